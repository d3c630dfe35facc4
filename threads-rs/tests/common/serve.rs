//! serve's side of the tests, the same for every Rust binary: a run driven from the test (its
//! events read as they come, its stdin held to release it), a minimal HTTP/1.1 client on std's
//! TcpStream, and the checks both binaries' suites run.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{events, only, validator, Output};

/// How long a test waits for an event, a response or an exit before it fails rather than hangs.
const PATIENCE: Duration = Duration::from_secs(30);

/// A serve run in progress.
pub struct Serving {
    child: Child,
    /// Held open: a line or EOF on it releases the run.
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stdout: String,
    stderr: Option<thread::JoinHandle<String>>,
}

impl Serving {
    pub fn start(bin: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
        // Read on threads, so that a silent run fails the test at PATIENCE instead of hanging it.
        let stdout = child.stdout.take().unwrap();
        let (to_test, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if to_test.send(line).is_err() {
                    return;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Serving {
            stdin: child.stdin.take(),
            child,
            lines,
            stdout: String::new(),
            stderr: Some(stderr),
        }
    }

    /// The next event of `kind` (the events before it are kept for the output).
    pub fn wait_for(&mut self, kind: &str) -> Value {
        self.wait_until(kind, |e| e["event"] == kind)
    }

    /// The first event from here on that `matches` (`what` names it in the panic if none comes).
    pub fn wait_until(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!("no {what:?} event; stdout so far:\n{}", self.stdout);
            };
            self.stdout.push_str(&line);
            self.stdout.push('\n');
            let event: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if matches(&event) {
                return event;
            }
        }
    }

    /// The process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes `text` on its stdin, which stays open.
    pub fn write(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still held");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// The line it printed within `wait`, if any (kept for the output too).
    pub fn line_within(&mut self, wait: Duration) -> Option<String> {
        let line = self.lines.recv_timeout(wait).ok()?;
        self.stdout.push_str(&line);
        self.stdout.push('\n');
        Some(line)
    }

    /// The addresses the `listening` event lists.
    pub fn addrs(&mut self) -> Vec<String> {
        let listening = self.wait_for("listening");
        let addrs = listening["addrs"].as_array().expect("addrs is a list");
        addrs
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    }

    /// Writes a line on stdin, which releases the run, and waits for it to end.
    pub fn release(mut self) -> Output {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        self.wait()
    }

    /// Waits for the run to end (its stdin still held, if not released): all of its stdout, its
    /// stderr and exit code.
    pub fn wait(mut self) -> Output {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.stdout.push_str(&line);
                    self.stdout.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("the run did not end; stdout so far:\n{}", self.stdout)
                }
            }
        }
        let status = self.child.wait().unwrap();
        Output {
            stdout: std::mem::take(&mut self.stdout),
            stderr: self.stderr.take().unwrap().join().unwrap(),
            code: status.code().unwrap_or(-1),
        }
    }
}

impl Drop for Serving {
    /// A test that failed midway leaves nothing running.
    fn drop(&mut self) {
        if self.stderr.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One HTTP response, as the client read it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A 200 with a body of `body` bytes of 'x', Content-Length saying so.
    pub fn assert_ok(&self, body: usize) {
        assert_eq!(self.status, 200, "{self:?}");
        assert_eq!(self.header("Content-Length"), Some(&*body.to_string()));
        assert_eq!(self.header("Content-Type"), Some("text/plain"));
        assert_eq!(self.body.len(), body);
        assert!(self.body.iter().all(|&b| b == b'x'), "the body is all 'x'");
    }
}

/// A client connection, kept alive between requests.
pub struct Client {
    conn: BufReader<TcpStream>,
}

pub const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: spawnscope\r\n\r\n";

impl Client {
    pub fn connect(addr: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        Ok(Client {
            conn: BufReader::new(stream),
        })
    }

    /// Sends `request` as it is.
    pub fn send(&mut self, request: &[u8]) -> io::Result<()> {
        self.conn.get_mut().write_all(request)
    }

    /// Reads one response.
    pub fn response(&mut self) -> io::Result<Response> {
        let mut line = String::new();
        if self.conn.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let status = line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3)?.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {line:?}"));
        let mut headers = Vec::new();
        loop {
            line.clear();
            self.conn.read_line(&mut line)?;
            let Some((name, value)) = line.trim_end_matches("\r\n").split_once(": ") else {
                assert_eq!(line, "\r\n", "a header or the blank line");
                break;
            };
            headers.push((name.to_string(), value.to_string()));
        }
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let length: usize = response.header("Content-Length").unwrap().parse().unwrap();
        response.body.resize(length, 0);
        self.conn.read_exact(&mut response.body)?;
        Ok(response)
    }

    /// One GET and its response.
    pub fn get(&mut self) -> Response {
        self.send(GET).unwrap();
        self.response().unwrap()
    }

    /// Whether the server has closed the connection (end of file, or reset).
    pub fn closed_by_server(&mut self) -> bool {
        let mut byte = [0u8; 1];
        !matches!(self.conn.read(&mut byte), Ok(1..))
    }
}

/// A serve run with `args` (whose --n is `connections`), driven by `connections` clients spread
/// over the addresses it listens on: each sends `requests_each` keep-alive GETs and checks every
/// response (a body of `body` bytes); then the test waits for `peak`, closes the clients and
/// releases the run.
pub fn serve_with_clients(
    bin: &Path,
    args: &[&str],
    connections: usize,
    requests_each: usize,
    body: usize,
) -> Output {
    let mut run = Serving::start(bin, args);
    let addrs = run.addrs();
    let mut clients: Vec<Client> = (0..connections)
        .map(|i| Client::connect(&addrs[i % addrs.len()]).unwrap())
        .collect();
    for _ in 0..requests_each {
        for client in &mut clients {
            client.get().assert_ok(body);
        }
    }
    let peak = run.wait_for("peak");
    assert_eq!(peak["alive"], connections, "{peak}");
    // A response reaches the client before its task counts it: released only once the server
    // says it counted every one (its progress, ~100 ms apart), so that all of them are in
    // `load` (requests_in_load).
    let total = (connections * requests_each) as u64;
    run.wait_until("progress counting every request", |e| {
        e["event"] == "progress" && e["requests"].as_u64() >= Some(total)
    });
    drop(clients);
    run.release()
}

/// The phases a run went through.
fn phases(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .filter(|e| e["event"] == "phase")
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

/// 50 connections, 3 requests each, a 1 KiB body: every request answered, the peak at 50 open,
/// the drain with none left.
pub fn check_serve_run(bin: &Path) {
    let out = serve_with_clients(
        bin,
        &["serve", "--n", "50", "--work", "body=1K"],
        50,
        3,
        1024,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds[..3], ["start", "phase", "listening"]);
    assert_eq!(phases(&events), ["listen", "load", "drain", "end"]);
    let peak = only(&events, "peak");
    assert_eq!(
        (&peak["alive"], &peak["expected"]),
        (&50.into(), &50.into())
    );
    assert!(events
        .iter()
        .filter(|e| e["event"] == "progress")
        .all(|e| e["requests"].is_u64()));
    let result = only(&events, "result");
    assert_eq!(result["ok"], true);
    assert_eq!(result["params"]["work"]["body_bytes"], 1024);
    assert_eq!(
        (&result["target"], &result["spawned"]),
        (&50.into(), &50.into())
    );
    assert_eq!(result["alive_at_peak"], 50);
    assert_eq!(result["alive_max"], 50);
    let throughput = &result["throughput"];
    assert_eq!(
        (&throughput["unit"], &throughput["count"]),
        (&"requests/s".into(), &150.into())
    );
    let response_len =
        "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nContent-Type: text/plain\r\n\r\n".len() + 1024;
    let serve = &result["serve"];
    let want = serde_json::json!({
        "connections_accepted": 50,
        "connections_max_open": 50,
        "requests": 150,
        "requests_in_load": 150,
        "response_bytes": 150 * response_len,
        "bad_requests": 0,
        "accept_errors": 0,
        "open_at_end": 0,
    });
    assert_eq!(*serve, want);
}

/// --work sleep=200ms: a request takes at least that long.
pub fn check_serve_sleep(bin: &Path) {
    let mut run = Serving::start(bin, &["serve", "--n", "1", "--work", "sleep=200ms"]);
    let addrs = run.addrs();
    let mut client = Client::connect(&addrs[0]).unwrap();
    let before = Instant::now();
    client.get().assert_ok(128);
    let took = before.elapsed();
    assert!(took >= Duration::from_millis(200), "took {took:?}");
    drop(client);
    let out = run.release();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["params"]["work"]["sleep_ns"], 200_000_000);
    assert_eq!(result["serve"]["requests"], 1);
}

/// --addrs 3: three addresses on one port, each accepting.
pub fn check_serve_addrs(bin: &Path) {
    let mut run = Serving::start(bin, &["serve", "--n", "3", "--addrs", "3"]);
    let addrs = run.addrs();
    let port = addrs[0].rsplit_once(':').unwrap().1;
    let want: Vec<String> = (1..=3).map(|k| format!("127.0.0.{k}:{port}")).collect();
    assert_eq!(addrs, want);
    let mut clients: Vec<Client> = addrs.iter().map(|a| Client::connect(a).unwrap()).collect();
    for client in &mut clients {
        client.get().assert_ok(128);
    }
    run.wait_for("peak");
    drop(clients);
    let out = run.release();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["params"]["addrs"], 3);
    assert_eq!(result["serve"]["connections_accepted"], 3);
}

/// What goes over the wire: pipelining, closing when asked or for HTTP/1.0, 400 and 431.
pub fn check_serve_protocol(bin: &Path) {
    let mut run = Serving::start(bin, &["serve", "--n", "10", "--work", "body=0"]);
    let addr = run.addrs().remove(0);
    let connect = || Client::connect(&addr).unwrap();

    let mut pipelined = connect();
    pipelined.send(&[GET, GET].concat()).unwrap();
    pipelined.response().unwrap().assert_ok(0);
    pipelined.response().unwrap().assert_ok(0);

    let mut closing = connect();
    closing
        .send(b"POST / HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
        .unwrap();
    let response = closing.response().unwrap();
    response.assert_ok(0);
    assert_eq!(response.header("Connection"), Some("close"));
    assert!(closing.closed_by_server());

    let mut old = connect();
    old.send(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(old.response().unwrap().header("Connection"), Some("close"));
    assert!(old.closed_by_server());

    let mut bad = connect();
    bad.send(b"NOT HTTP\r\n\r\n").unwrap();
    let response = bad.response().unwrap();
    assert_eq!(response.status, 400);
    assert_eq!(response.header("Connection"), Some("close"));
    assert!(bad.closed_by_server());

    let mut large = connect();
    let mut head = b"GET / HTTP/1.1\r\nX-Large: ".to_vec();
    head.resize(5000, b'a');
    large.send(&head).unwrap();
    assert_eq!(large.response().unwrap().status, 431);
    assert!(large.closed_by_server());

    drop(pipelined);
    let out = run.release();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let serve = &only(&events, "result")["serve"];
    assert_eq!(serve["requests"], 4);
    assert_eq!(serve["bad_requests"], 2);
    assert_eq!(serve["connections_accepted"], 5);
    assert_eq!(serve["open_at_end"], 0);
}

/// A reserve larger than any machine's memory: the guard refuses a connection at its first check,
/// accepting stops (later connections are refused or reset), the open ones are served, exit 3.
pub fn check_serve_guard(bin: &Path) {
    let mut run = Serving::start(bin, &["serve", "--n", "100", "--reserve", "1048576G"]);
    let addr = run.addrs().remove(0);
    let mut clients: Vec<Client> = (0..100)
        .filter_map(|_| Client::connect(&addr).ok())
        .collect();
    let mut served = 0;
    for client in &mut clients {
        if client.send(GET).is_ok() && client.response().is_ok_and(|r| r.status == 200) {
            served += 1;
        }
    }
    drop(clients);
    let out = run.release();
    assert_eq!(out.code, 3, "{}", out.stderr);
    let events = events(&validator(), &out.stdout);
    let result = only(&events, "result");
    assert_eq!(result["failure"]["limit"], "memory");
    let spawned = result["spawned"].as_u64().unwrap();
    assert!(0 < spawned && spawned < 100, "spawned {spawned}");
    assert_eq!(served, spawned, "every connection given a task was served");
    assert_eq!(result["serve"]["connections_accepted"], spawned);
    assert_eq!(result["serve"]["requests"], spawned);
}
