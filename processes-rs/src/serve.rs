//! serve as a prefork server: --n processes forked before serving, each accepting on the
//! listening sockets they all hold, serving one connection at a time until its client closes,
//! then accepting again; a process ends when its listeners are shut down. Their counts are in
//! memory shared with the parent (`Harness::listen_shared`), which watches them
//! (`Harness::serve_watched`): the connections they take are the run's tasks, as in the other
//! binaries, and the processes are what each connection is served by.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use workload::cli::MAX_ADDRS;
use workload::harness::Throughput;
use workload::http::{self, Next, Requests};
use workload::serve::{Service, ACCEPT_RETRY};
use workload::sys;

use crate::os::{self, PollFd};
use crate::spawn::{spawn, ProcessHarness as Harness};

/// How often the parent looks at the shared counts while it serves: a peak is seen within this.
const LOOK_EVERY: Duration = Duration::from_millis(10);

pub fn serve(h: &mut Harness) -> Option<Throughput> {
    let (listeners, service) = h.listen_shared();
    // On one listener every process blocks in accept, which wakes one of them per connection;
    // on several they poll, which wakes them all, and the accept of each but one finds nothing.
    if listeners.len() > 1 {
        for listener in &listeners {
            if let Err(err) = os::set_nonblocking(listener.as_raw_fd()) {
                h.spawn_failed(&err);
            }
        }
    }
    // One process per connection --n asks for, forked while the parent has its one thread.
    let mut pids = Vec::with_capacity(h.target() as usize);
    while !h.failed() && (pids.len() as u64) < h.target() && h.may_spawn() {
        pids.extend(spawn(h, &[], || accept_loop(&listeners, service)));
    }
    // The result's tasks are the connections taken (the processes: runtime_stats).
    h.spawned = 0;
    let throughput = h.serve_watched(LOOK_EVERY, pids.len() as u64, || {
        for listener in &listeners {
            sys::stop_listening(listener);
        }
    });
    // Processes still in a connection when the drain gave up end with the run, as a thread
    // would with its process.
    if service.open() > 0 {
        for &pid in &pids {
            os::kill_now(pid);
        }
    }
    h.tasks.reap_all();
    throughput
}

/// A process's life: waits until a listener has a connection, takes it (another process may
/// have been quicker: it waits again) and serves it; ends when the listeners are shut down. A
/// failed accept (EMFILE, ENFILE) is counted and tried again after ACCEPT_RETRY.
fn accept_loop(listeners: &[TcpListener], service: &Service) {
    let mut fds: [PollFd; MAX_ADDRS as usize] = std::array::from_fn(|_| PollFd {
        fd: -1,
        events: os::POLLIN,
        revents: 0,
    });
    for (slot, listener) in fds.iter_mut().zip(listeners) {
        slot.fd = listener.as_raw_fd();
    }
    let fds = &mut fds[..listeners.len()];
    loop {
        // One listener, blocking: accept waits. Several: wait until one has a connection.
        if listeners.len() > 1 && os::poll_fds(fds, -1) == 0 {
            continue;
        }
        for (slot, listener) in fds.iter_mut().zip(listeners) {
            if listeners.len() > 1 && slot.revents == 0 {
                continue;
            }
            slot.revents = 0;
            match listener.accept() {
                Ok((stream, _)) => {
                    service.took();
                    connection(stream, service);
                    service.closed();
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                // EINVAL: the listener was shut down (the drain).
                Err(err) if err.kind() == io::ErrorKind::InvalidInput => return,
                Err(_) => {
                    service.accept_failed();
                    os::sleep_ns(ACCEPT_RETRY.as_nanos() as u64);
                }
            }
        }
    }
}

/// A connection: read, answer every complete request in the buffer, read again; it ends when
/// the client closes, on an error, or after a response that closes.
fn connection(mut stream: TcpStream, service: &Service) {
    // As Go does by default, so that the binaries send alike.
    let _ = stream.set_nodelay(true);
    let mut buf = [0u8; http::BUFFER];
    let mut requests = Requests::default();
    let mut held = 0; // bytes received and not consumed yet, from buf[0]
    while let Ok(read @ 1..) = stream.read(&mut buf[held..]) {
        held += read;
        let mut at = 0;
        loop {
            let (used, next) = requests.next(&buf[at..held]);
            at += used;
            match next {
                Next::Read => break,
                Next::Respond { keep_alive } => {
                    service.spin();
                    if !service.sleep.is_zero() {
                        os::sleep_ns(service.sleep.as_nanos() as u64);
                    }
                    if !send(&mut stream, service.response(keep_alive), service) {
                        return;
                    }
                    service.answered();
                    if !keep_alive {
                        return;
                    }
                }
                Next::Reject(response) => {
                    send(&mut stream, response, service);
                    service.rejected();
                    return;
                }
            }
        }
        buf.copy_within(at..held, 0);
        held -= at;
    }
}

/// Writes a response; counts the bytes that went out; false when the connection failed.
fn send(stream: &mut TcpStream, response: &[u8], service: &Service) -> bool {
    let mut sent = 0;
    while sent < response.len() {
        match stream.write(&response[sent..]) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    service.sent(sent);
    sent == response.len()
}
