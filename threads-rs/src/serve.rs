//! serve on OS threads: an HTTP/1.1 keep-alive server on the loopback with an OS thread per
//! connection (std::net, std::thread). An accept loop per address (a thread each) hands every
//! connection to main, which asks the guard and starts its thread through the harness; the
//! connections only count into the shared service.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::mpsc::{self, Sender};
use std::thread;

use workload::harness::Throughput;
use workload::http::{self, Next, Requests};
use workload::serve::{Arrival, Service, ACCEPT_RETRY};
use workload::sys;

use crate::spawn::{spawn_detached, ThreadHarness as Harness};

pub fn serve(h: &mut Harness) -> Option<Throughput> {
    let (listeners, service) = h.listen();
    let (to_main, arrivals) = mpsc::channel();
    let closing = AtomicBool::new(false);
    thread::scope(|scope| {
        for listener in &listeners {
            let (to_main, closing) = (to_main.clone(), &closing);
            let started = thread::Builder::new().spawn_scoped(scope, move || {
                accept_loop(listener, &to_main, closing, service)
            });
            if let Err(err) = started {
                h.spawn_failed(&err);
            }
        }
        h.serve(
            to_main,
            arrivals,
            |h, stream| {
                spawn_detached(h, move || {
                    connection(stream, service);
                    service.closed();
                })
                .is_some()
            },
            || stop_accepting(&listeners, &closing),
        )
    })
}

/// Hands every connection accepted on `listener` to main until the listener stops. A failed
/// accept (EMFILE, ENFILE) is counted and tried again after ACCEPT_RETRY.
fn accept_loop(
    listener: &TcpListener,
    to_main: &Sender<Arrival<TcpStream>>,
    closing: &AtomicBool,
    service: &Service,
) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if to_main.send(Arrival::Connection(stream)).is_err() {
                    return; // main has stopped taking connections
                }
            }
            Err(_) if closing.load(SeqCst) => return,
            Err(_) => {
                service.accept_failed();
                thread::sleep(ACCEPT_RETRY);
            }
        }
    }
}

/// Closes the listeners to new connections and wakes their accept loops, which then end.
fn stop_accepting(listeners: &[TcpListener], closing: &AtomicBool) {
    closing.store(true, SeqCst);
    for listener in listeners {
        sys::stop_listening(listener);
    }
}

/// A connection's task: read, answer every complete request in the buffer, read again; it ends
/// when the client closes, on an error, or after a response that closes.
fn connection(mut stream: TcpStream, service: &Service) {
    // As Go does by default, so that the three send alike: each response goes out at once, not
    // held back by Nagle until the previous one is acknowledged.
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; http::BUFFER];
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
                        thread::sleep(service.sleep);
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
        // The start of a request moves to the front, so that a head always has BUFFER bytes.
        buf.copy_within(at..held, 0);
        held -= at;
    }
}

/// Writes a response: one write call, more only when the socket takes it in parts. Counts the
/// bytes that went out; false when the connection failed.
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
