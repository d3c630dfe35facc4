//! serve on tokio tasks: an HTTP/1.1 keep-alive server on the loopback with a tokio task per
//! connection. An accept loop per address (a task each) hands every connection to main, which
//! asks the guard and spawns its task through the harness, as `#[tokio::main]` programs spawn
//! them; the connections only count into the shared service.

use std::sync::mpsc::{self, Sender};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use workload::harness::Throughput;
use workload::http::{self, Next, Requests};
use workload::serve::{Arrival, Service, ACCEPT_RETRY};

use crate::runtime::{spawn, TokioHarness as Harness};

pub fn serve(h: &mut Harness) -> Option<Throughput> {
    let (listeners, service) = h.listen();
    let (to_main, arrivals) = mpsc::channel();
    let runtime = h.tasks.runtime.handle().clone();
    let mut accept_loops: Vec<JoinHandle<()>> = Vec::new();
    for listener in listeners {
        // The listeners were bound with std before `start`: here they join the runtime's reactor.
        let registered = listener.set_nonblocking(true).and_then(|()| {
            let _in_runtime = runtime.enter();
            TcpListener::from_std(listener)
        });
        match registered {
            Ok(listener) => {
                let to_main = to_main.clone();
                accept_loops.push(runtime.spawn(accept_loop(listener, to_main, service)));
            }
            Err(err) => h.spawn_failed(&err),
        }
    }
    h.serve(
        to_main,
        arrivals,
        |h, stream| {
            spawn(h, async move {
                connection(stream, service).await;
                service.closed();
            });
            true
        },
        // Dropping an accept loop closes its listener: new connections are refused.
        move || {
            accept_loops.iter().for_each(JoinHandle::abort);
            runtime.block_on(async {
                for accept_loop in accept_loops {
                    let _ = accept_loop.await;
                }
            });
        },
    )
}

/// Hands every connection accepted on `listener` to main until aborted. A failed accept (EMFILE,
/// ENFILE) is counted and tried again after ACCEPT_RETRY.
async fn accept_loop(
    listener: TcpListener,
    to_main: Sender<Arrival<TcpStream>>,
    service: &'static Service,
) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                if to_main.send(Arrival::Connection(stream)).is_err() {
                    return; // main has stopped taking connections
                }
            }
            Err(_) => {
                service.accept_failed();
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// A connection's task: read, answer every complete request in the buffer, read again; it ends
/// when the client closes, on an error, or after a response that closes.
async fn connection(mut stream: TcpStream, service: &Service) {
    // As Go does by default, so that the three send alike: each response goes out at once, not
    // held back by Nagle until the previous one is acknowledged.
    let _ = stream.set_nodelay(true);
    let mut buf = vec![0u8; http::BUFFER];
    let mut requests = Requests::default();
    let mut held = 0; // bytes received and not consumed yet, from buf[0]
    while let Ok(read @ 1..) = stream.read(&mut buf[held..]).await {
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
                        tokio::time::sleep(service.sleep).await;
                    }
                    if !send(&mut stream, service.response(keep_alive), service).await {
                        return;
                    }
                    service.answered();
                    if !keep_alive {
                        return;
                    }
                }
                Next::Reject(response) => {
                    send(&mut stream, response, service).await;
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
async fn send(stream: &mut TcpStream, response: &[u8], service: &Service) -> bool {
    let mut sent = 0;
    while sent < response.len() {
        match stream.write(&response[sent..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => sent += n,
        }
    }
    service.sent(sent);
    sent == response.len()
}
