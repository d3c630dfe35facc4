//! `serve`'s share of the contract, the same in both Rust binaries: its listeners (bound before
//! `start`, so that an address that cannot be listened on is bad usage), the service every
//! connection reads and counts into, and what wakes main while it serves. The protocol is
//! http.rs; main's loop (guard, peak, release, drain) is the harness's; the accept loops and the
//! connections' tasks are each binary's serve.rs (goroutines-go/serve.go is the same in Go).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::thread::{self, Thread};
use std::time::Duration;

use crate::cli::Config;
use crate::json::Obj;
use crate::{http, sys};

/// How long an accept loop waits after a failed accept (EMFILE, ENFILE) before trying again.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// How long the drain waits for the clients to close their connections.
pub const DRAIN_FOR_NS: u64 = 10_000_000_000;

/// What wakes main while it serves: a connection an accept loop took, or the release.
pub enum Arrival<S> {
    Connection(S),
    Released,
}

/// Listens on 127.0.0.1 to 127.0.0.K (--addrs), all on --port (0: the first bind picks the port
/// for all), with --backlog. Err: the bad-usage line; nothing is left listening.
pub fn bind(cfg: &Config) -> Result<Vec<TcpListener>, String> {
    let mut listeners = Vec::new();
    let mut port = cfg.port;
    for k in 1..=cfg.addrs {
        let addr = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, k as u8), port);
        let listener = TcpListener::bind(addr)
            .and_then(|l| sys::set_backlog(&l, cfg.backlog).map(|()| l))
            .map_err(|err| format!("--port {}: {}", cfg.port, bind_error(addr, &err)))?;
        port = listener.local_addr().map_or(port, |a| a.port());
        listeners.push(listener);
    }
    Ok(listeners)
}

/// Why `addr` could not be listened on, naming the errno.
fn bind_error(addr: SocketAddrV4, err: &io::Error) -> String {
    let name = sys::errno_name(err.raw_os_error().unwrap_or(0));
    let why = match name {
        "EADDRINUSE" => "is in use",
        "EACCES" => "is not permitted",
        "EADDRNOTAVAIL" => "is not available",
        _ => return format!("{addr} cannot be listened on: {err}"),
    };
    format!("{addr} {why} ({name})")
}

/// What every connection of a run reads and counts into: made once when serving starts (the
/// responses built once per run, shared read-only), never freed.
pub struct Service {
    /// --work spin: CPU work per request.
    spin_ns: u64,
    /// --work sleep: a simulated I/O wait per request.
    pub sleep: Duration,
    response: Vec<u8>,
    closing_response: Vec<u8>,
    open: AtomicU64,
    requests: AtomicU64,
    response_bytes: AtomicU64,
    bad_requests: AtomicU64,
    accept_errors: AtomicU64,
    /// Connections taken by tasks that accept for themselves (`took`): a prefork server's.
    accepted: AtomicU64,
    /// The most connections open at once among those (`took`).
    max_open: AtomicU64,
    /// Main, woken when the last open connection closes (the drain waits for that).
    main: Thread,
}

impl Service {
    /// The service of the run `cfg` describes; made on main.
    pub(crate) fn new(cfg: &Config) -> Self {
        let work = cfg.work;
        Service {
            spin_ns: work.spin_ns,
            sleep: Duration::from_nanos(work.sleep_ns),
            response: http::ok_response(work.body_bytes, false),
            closing_response: http::ok_response(work.body_bytes, true),
            open: 0.into(),
            requests: 0.into(),
            response_bytes: 0.into(),
            bad_requests: 0.into(),
            accept_errors: 0.into(),
            accepted: 0.into(),
            max_open: 0.into(),
            main: thread::current(),
        }
    }

    /// The answer to a good request; `keep_alive` false: the one that says the connection closes.
    pub fn response(&self, keep_alive: bool) -> &[u8] {
        if keep_alive {
            &self.response
        } else {
            &self.closing_response
        }
    }

    /// A request's CPU work: a busy loop on the monotonic clock (read through the vDSO).
    pub fn spin(&self) {
        if self.spin_ns == 0 {
            return;
        }
        let end = sys::monotonic_ns() + self.spin_ns;
        while sys::monotonic_ns() < end {}
    }

    /// Response bytes that went out, whole response or not.
    pub fn sent(&self, bytes: usize) {
        self.response_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// A good request answered: its response went out whole.
    pub fn answered(&self) {
        self.requests.fetch_add(1, Relaxed);
    }

    /// A bad request answered with 400 or 431.
    pub fn rejected(&self) {
        self.bad_requests.fetch_add(1, Relaxed);
    }

    pub fn accept_failed(&self) {
        self.accept_errors.fetch_add(1, Relaxed);
    }

    /// Counts a connection open before its task starts; returns how many are open.
    pub(crate) fn opened(&self) -> u64 {
        self.open.fetch_add(1, SeqCst) + 1
    }

    /// A task that accepts for itself (a prefork server's process) took a connection: counted
    /// accepted and open, and the most open at once kept, where main, which does not see it,
    /// reads them (`accepted`, `max_open`). Returns how many are open.
    pub fn took(&self) -> u64 {
        self.accepted.fetch_add(1, SeqCst);
        let open = self.opened();
        self.max_open.fetch_max(open, SeqCst);
        open
    }

    /// Connections taken so far by tasks that accept for themselves.
    pub fn accepted(&self) -> u64 {
        self.accepted.load(SeqCst)
    }

    /// The most connections open at once among those taken by tasks that accept for themselves.
    pub fn max_open(&self) -> u64 {
        self.max_open.load(SeqCst)
    }

    /// A connection's task ends, its socket closed (or it never started).
    pub fn closed(&self) {
        if self.open.fetch_sub(1, SeqCst) == 1 {
            self.main.unpark();
        }
    }

    /// Connections open now: serve's tasks alive.
    pub fn open(&self) -> u64 {
        self.open.load(SeqCst)
    }

    /// Good requests answered so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    /// The result's `serve`: `accepted` connections were given a task, at most `max_open` open at
    /// once, `open_at_end` still open when the drain gave up, `requests_in_load` answered by the
    /// release.
    pub(crate) fn to_obj(
        &self,
        accepted: u64,
        max_open: u64,
        open_at_end: u64,
        requests_in_load: u64,
    ) -> Obj {
        Obj::new()
            .with("connections_accepted", accepted)
            .with("connections_max_open", max_open)
            .with("requests", self.requests())
            .with("requests_in_load", requests_in_load)
            .with("response_bytes", self.response_bytes.load(Relaxed))
            .with("bad_requests", self.bad_requests.load(Relaxed))
            .with("accept_errors", self.accept_errors.load(Relaxed))
            .with("open_at_end", open_at_end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{self, Command};
    use crate::{Program, RuntimeFlag};

    const PROGRAM: Program = Program {
        name: "test",
        runtime: "threads",
        runtime_version: "test",
        about: "",
        channels: "",
        stack_size: RuntimeFlag::Refuses(""),
        workers: RuntimeFlag::Refuses(""),
        gomaxprocs_refusal: "",
        tokio_trace: RuntimeFlag::Refuses(""),
    };

    fn config(port: u16, addrs: u64) -> Config {
        let args = format!("serve --port {port} --addrs {addrs}");
        let args: Vec<String> = args.split(' ').map(String::from).collect();
        match cli::parse(&PROGRAM, &args) {
            Ok(Command::Run(cfg)) => cfg,
            _ => panic!("{args:?} is a run"),
        }
    }

    #[test]
    fn binds_every_address_on_the_port_the_first_got() {
        let listeners = bind(&config(0, 3)).unwrap();
        let addrs: Vec<_> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        let port = addrs[0].port();
        assert_ne!(port, 0);
        let want: Vec<String> = (1..=3).map(|k| format!("127.0.0.{k}:{port}")).collect();
        let got: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_port_in_use_is_named() {
        let busy = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = busy.local_addr().unwrap().port();
        let err = bind(&config(port, 1)).unwrap_err();
        assert_eq!(
            err,
            format!("--port {port}: 127.0.0.1:{port} is in use (EADDRINUSE)")
        );
    }

    #[test]
    fn counts_connections_and_wakes_main_at_the_last_close() {
        let service = Service::new(&config(0, 1));
        assert_eq!((service.opened(), service.opened()), (1, 2));
        service.closed();
        service.closed();
        assert_eq!(service.open(), 0);
        // The last close left main a wake-up: this returns at once.
        let before = std::time::Instant::now();
        thread::park_timeout(Duration::from_secs(5));
        assert!(before.elapsed() < Duration::from_secs(1));
        assert_eq!(
            service.response(false).len(),
            service.response(true).len() + 19
        );
    }

    #[test]
    fn connections_taken_by_their_tasks_count_accepted_open_and_the_most_open() {
        let service = Service::new(&config(0, 1));
        assert_eq!((service.took(), service.took(), service.took()), (1, 2, 3));
        service.closed();
        service.closed();
        assert_eq!(service.took(), 2);
        assert_eq!(
            (service.accepted(), service.open(), service.max_open()),
            (4, 2, 3)
        );
    }
}
