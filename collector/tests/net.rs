//! The syscalls that serve requests (`Config::net_syscalls`), counted by the collector on a small
//! program that makes every one of them a known number of times over loopback TCP: this test
//! binary re-execs itself to run `child_serve_syscalls` under the collector, as root. The child
//! makes each call with syscall(2) and tallies what the kernel returned; its phase `serve` must
//! hold exactly that tally. Without the option the same child's report has none of these metrics
//! (not measured, not 0) and none of their probes. Without root or BPF each test prints
//! `SKIP <test>: <reason>` and returns.

mod common;

use std::collections::BTreeMap;
#[cfg(target_arch = "x86_64")]
use std::io::Write;

use common::{serial, skip, ChildRun};
#[cfg(target_arch = "x86_64")]
use serde_json::json;
use spawnscope_collector::{Attach, Report};

/// How each syscall's return is counted (as probes/collector/serving.bpf.c does).
#[derive(Clone, Copy)]
enum Kind {
    /// calls, bytes (ret > 0), eagain
    Io,
    /// calls, failed (ret < 0), eagain
    Accept,
    /// calls, empty (ret == 0)
    Wait,
    /// calls
    Call,
}

/// The syscalls counted, as the kernel names them.
const SYSCALLS: &[(&str, Kind)] = &[
    ("accept", Kind::Accept),
    ("accept4", Kind::Accept),
    ("read", Kind::Io),
    ("readv", Kind::Io),
    ("recvfrom", Kind::Io),
    ("recvmsg", Kind::Io),
    ("write", Kind::Io),
    ("writev", Kind::Io),
    ("sendto", Kind::Io),
    ("sendmsg", Kind::Io),
    ("epoll_wait", Kind::Wait),
    ("epoll_pwait", Kind::Wait),
    ("epoll_pwait2", Kind::Wait),
    ("epoll_ctl", Kind::Call),
    ("poll", Kind::Call),
    ("ppoll", Kind::Call),
    ("close", Kind::Call),
    ("shutdown", Kind::Call),
];

fn fields(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Io => &["calls", "bytes", "eagain"],
        Kind::Accept => &["calls", "failed", "eagain"],
        Kind::Wait => &["calls", "empty"],
        Kind::Call => &["calls"],
    }
}

/// Every counter's name (`read_calls`, …): what the report must name too.
fn counter_names() -> Vec<String> {
    SYSCALLS
        .iter()
        .flat_map(|&(name, kind)| fields(kind).iter().map(move |f| format!("{name}_{f}")))
        .collect()
}

/// Round trips of each read/write pair.
const K: usize = 5;

// ---- the child: every call made with syscall(2), its return tallied ----

#[cfg(target_arch = "x86_64")]
mod child {
    use super::*;
    use libc::{c_long, c_void};

    /// What the child's calls returned, as the collector should count them.
    pub type Tally = BTreeMap<String, u64>;

    pub fn tally() -> Tally {
        counter_names().into_iter().map(|n| (n, 0)).collect()
    }

    /// One call of syscall `name` (number `nr`), its return counted into `t`.
    pub fn call(t: &mut Tally, name: &str, nr: c_long, a: [usize; 6]) -> i64 {
        // SAFETY: each caller passes the arguments its syscall takes: live buffers of the
        // lengths given, fds of this process (or -1), null where the kernel allows it.
        let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        let kind = SYSCALLS.iter().find(|(n, _)| *n == name).unwrap().1;
        let mut add = |field: &str, n: u64| *t.get_mut(&format!("{name}_{field}")).unwrap() += n;
        add("calls", 1);
        match kind {
            Kind::Io if ret > 0 => add("bytes", ret as u64),
            Kind::Io | Kind::Accept if ret == -1 && errno == libc::EAGAIN => {
                add("eagain", 1);
                if matches!(kind, Kind::Accept) {
                    add("failed", 1);
                }
            }
            Kind::Accept if ret == -1 => add("failed", 1),
            Kind::Wait if ret == 0 => add("empty", 1),
            _ => {}
        }
        ret
    }

    /// A phase event written with one write(2), counted in `t` (the kernel switches phase at
    /// the call's entry, so the write counts in the phase it opens).
    pub fn phase(t: &mut Tally, name: &str) {
        let line = format!(
            "{{\"event\":\"phase\",\"name\":\"{name}\",\"t_ns\":{}}}\n",
            spawnscope_collector::monotonic_ns()
        );
        let n = call(
            t,
            "write",
            libc::SYS_write,
            [1, line.as_ptr() as usize, line.len(), 0, 0, 0],
        );
        assert_eq!(n, line.len() as i64);
    }

    /// A message of one buffer, for sendmsg and recvmsg.
    pub fn message(iov: &mut libc::iovec) -> libc::msghdr {
        // SAFETY: all zeros is a valid msghdr (no name, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
        msg
    }

    pub fn set_nonblocking(fd: i32, on: bool) {
        // SAFETY: fcntl on an fd of this process.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            let flags = if on {
                flags | libc::O_NONBLOCK
            } else {
                flags & !libc::O_NONBLOCK
            };
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags), 0);
        }
    }

    /// A listening socket on 127.0.0.1 and its port (socket, bind, listen: none counted).
    pub fn listener() -> (i32, u16) {
        // SAFETY: plain socket calls on a sockaddr_in of the right size.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as u16;
            addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            assert_eq!(libc::bind(fd, &addr as *const _ as *const _, len), 0);
            assert_eq!(libc::listen(fd, 16), 0);
            let mut len = len;
            assert_eq!(
                libc::getsockname(fd, &mut addr as *mut _ as *mut _, &mut len),
                0
            );
            (fd, u16::from_be(addr.sin_port))
        }
    }

    /// A client connected to 127.0.0.1:port, Nagle off (socket, connect: not counted).
    pub fn connect(port: u16) -> i32 {
        // SAFETY: as in listener().
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0);
            let mut addr: libc::sockaddr_in = std::mem::zeroed();
            addr.sin_family = libc::AF_INET as u16;
            addr.sin_port = port.to_be();
            addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as u32;
            assert_eq!(libc::connect(fd, &addr as *const _ as *const _, len), 0);
            let one: i32 = 1;
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_NODELAY,
                &one as *const _ as *const c_void,
                4,
            );
            fd
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
#[ignore = "a child of the serving syscalls' tests"]
fn child_serve_syscalls() {
    use child::*;
    use libc::*;

    let mut setup = tally();
    phase(&mut setup, "setup");
    let (l, port) = listener();
    let (ca, cb) = (child::connect(port), child::connect(port));
    // SAFETY: epoll_create1 with a flag.
    let ep = unsafe { epoll_create1(EPOLL_CLOEXEC) };
    assert!(ep >= 0);
    let mut buf = vec![0u8; 256 * 1024];
    let data = vec![b'x'; 256 * 1024];
    let p = |b: &[u8]| b.as_ptr() as usize;
    let mut events = [epoll_event { events: 0, u64: 0 }; 8];
    let evp = events.as_mut_ptr() as usize;
    let zero = timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let zp = &zero as *const _ as usize;

    let mut t = tally();
    phase(&mut t, "serve");
    let t = &mut t;
    // Accept: blocking, one connection each, then non-blocking on an empty queue (EAGAIN).
    let sa = call(t, "accept", SYS_accept, [l as usize, 0, 0, 0, 0, 0]) as i32;
    let sb = call(
        t,
        "accept4",
        SYS_accept4,
        [l as usize, 0, 0, SOCK_CLOEXEC as usize, 0, 0],
    ) as i32;
    assert!(sa >= 0 && sb >= 0);
    set_nonblocking(l, true);
    call(t, "accept", SYS_accept, [l as usize, 0, 0, 0, 0, 0]);
    call(t, "accept4", SYS_accept4, [l as usize, 0, 0, 0, 0, 0]);
    // Readiness, nothing to read yet: each wait returns no event.
    let mut ev = epoll_event {
        events: EPOLLIN as u32,
        u64: 0,
    };
    let add = [
        ep as usize,
        EPOLL_CTL_ADD as usize,
        sa as usize,
        &mut ev as *mut _ as usize,
        0,
        0,
    ];
    assert_eq!(call(t, "epoll_ctl", SYS_epoll_ctl, add), 0);
    let (ep_, sigsz) = (ep as usize, 8usize);
    call(t, "epoll_wait", SYS_epoll_wait, [ep_, evp, 8, 0, 0, 0]);
    call(
        t,
        "epoll_pwait",
        SYS_epoll_pwait,
        [ep_, evp, 8, 0, 0, sigsz],
    );
    call(
        t,
        "epoll_pwait2",
        SYS_epoll_pwait2,
        [ep_, evp, 8, zp, 0, sigsz],
    );
    let mut pfd = pollfd {
        fd: sa,
        events: POLLIN,
        revents: 0,
    };
    let pp = &mut pfd as *mut _ as usize;
    call(t, "poll", SYS_poll, [pp, 1, 0, 0, 0, 0]);
    call(t, "ppoll", SYS_ppoll, [pp, 1, zp, 0, sigsz, 0]);
    // K round trips of each kind of write and its read, client to server.
    let (ca_, sa_) = (ca as usize, sa as usize);
    for i in 0..K {
        call(t, "write", SYS_write, [ca_, p(&data), 100, 0, 0, 0]);
        if i == 0 {
            // Data is there: each wait (no timeout) returns its event.
            assert_eq!(
                call(
                    t,
                    "epoll_wait",
                    SYS_epoll_wait,
                    [ep_, evp, 8, usize::MAX, 0, 0]
                ),
                1
            );
            let forever = [ep_, evp, 8, usize::MAX, 0, sigsz];
            assert_eq!(call(t, "epoll_pwait", SYS_epoll_pwait, forever), 1);
            let no_timeout = [ep_, evp, 8, 0, 0, sigsz];
            assert_eq!(call(t, "epoll_pwait2", SYS_epoll_pwait2, no_timeout), 1);
        }
        call(t, "read", SYS_read, [sa_, p(&buf), 100, 0, 0, 0]);
        call(t, "sendto", SYS_sendto, [ca_, p(&data), 50, 0, 0, 0]);
        call(t, "recvfrom", SYS_recvfrom, [sa_, p(&buf), 50, 0, 0, 0]);
        let wv = [
            iovec {
                iov_base: data.as_ptr() as *mut c_void,
                iov_len: 30,
            },
            iovec {
                iov_base: data.as_ptr() as *mut c_void,
                iov_len: 20,
            },
        ];
        call(
            t,
            "writev",
            SYS_writev,
            [ca_, wv.as_ptr() as usize, 2, 0, 0, 0],
        );
        let rv = [
            iovec {
                iov_base: buf.as_mut_ptr() as *mut c_void,
                iov_len: 25,
            },
            iovec {
                iov_base: buf[25..].as_mut_ptr() as *mut c_void,
                iov_len: 25,
            },
        ];
        call(
            t,
            "readv",
            SYS_readv,
            [sa_, rv.as_ptr() as usize, 2, 0, 0, 0],
        );
        let mut out = iovec {
            iov_base: data.as_ptr() as *mut c_void,
            iov_len: 40,
        };
        let msg = message(&mut out);
        call(
            t,
            "sendmsg",
            SYS_sendmsg,
            [ca_, &msg as *const _ as usize, 0, 0, 0, 0],
        );
        let mut into = iovec {
            iov_base: buf.as_mut_ptr() as *mut c_void,
            iov_len: 40,
        };
        let mut msg = message(&mut into);
        call(
            t,
            "recvmsg",
            SYS_recvmsg,
            [sa_, &mut msg as *mut _ as usize, 0, 0, 0, 0],
        );
    }
    // Nothing left to read, non-blocking: EAGAIN from each read.
    set_nonblocking(sa, true);
    call(t, "read", SYS_read, [sa_, p(&buf), 100, 0, 0, 0]);
    let rv = [iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: 100,
    }];
    call(
        t,
        "readv",
        SYS_readv,
        [sa_, rv.as_ptr() as usize, 1, 0, 0, 0],
    );
    call(t, "recvfrom", SYS_recvfrom, [sa_, p(&buf), 100, 0, 0, 0]);
    let mut into = iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: 100,
    };
    let mut msg = message(&mut into);
    call(
        t,
        "recvmsg",
        SYS_recvmsg,
        [sa_, &mut msg as *mut _ as usize, 0, 0, 0, 0],
    );
    // Nobody reads the second connection: send until the socket is full (EAGAIN), then each
    // other kind of write once more.
    set_nonblocking(cb, true);
    let cb_ = cb as usize;
    let mut fills = 0;
    while call(
        t,
        "sendto",
        SYS_sendto,
        [cb_, p(&data), data.len(), 0, 0, 0],
    ) > 0
    {
        fills += 1;
        assert!(fills < 10_000, "the socket never filled");
    }
    call(t, "write", SYS_write, [cb_, p(&data), data.len(), 0, 0, 0]);
    let wv = [iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    }];
    call(
        t,
        "writev",
        SYS_writev,
        [cb_, wv.as_ptr() as usize, 1, 0, 0, 0],
    );
    let mut out = iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let msg = message(&mut out);
    call(
        t,
        "sendmsg",
        SYS_sendmsg,
        [cb_, &msg as *const _ as usize, 0, 0, 0, 0],
    );
    // The client closes its side: the server's read sees the end (0, no bytes).
    call(
        t,
        "shutdown",
        SYS_shutdown,
        [ca_, SHUT_WR as usize, 0, 0, 0, 0],
    );
    set_nonblocking(sa, false);
    assert_eq!(call(t, "read", SYS_read, [sa_, p(&buf), 100, 0, 0, 0]), 0);
    for fd in [ca, sa, cb, sb, ep, l, -1] {
        call(t, "close", SYS_close, [fd as usize, 0, 0, 0, 0, 0]);
    }
    let serve = t.clone();
    phase(&mut tally(), "end");
    let line = json!({"event": "result", "serve": serve, "setup": setup, "fills": fills});
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

// ---- the tests ----

fn run(test: &str, net: bool) -> Option<ChildRun> {
    if !cfg!(target_arch = "x86_64") {
        skip(
            test,
            "the child makes x86_64 syscalls (accept, epoll_wait, poll)",
        );
        return None;
    }
    common::run_child(test, "child_serve_syscalls", 16, |c| c.net_syscalls = net)
}

/// What the child says it did in phase `phase`.
fn tallied(run: &ChildRun, phase: &str) -> BTreeMap<String, u64> {
    serde_json::from_value(run.result[phase].clone()).expect("the child's tally")
}

fn net_probes(report: &Report) -> Vec<String> {
    report
        .probes
        .iter()
        .filter(|p| p.probe.starts_with("syscalls:sys_exit_"))
        .filter(|p| {
            let name = &p.probe["syscalls:sys_exit_".len()..];
            SYSCALLS.iter().any(|(s, _)| *s == name)
        })
        .map(|p| p.probe.clone())
        .collect()
}

#[test]
fn serving_syscalls_are_counted_exactly_per_phase() {
    let _one = serial();
    let test = "serving_syscalls";
    let Some(run) = run(test, true) else {
        return;
    };
    let r = &run.report;
    assert!(r.diagnostics.net_syscalls);
    assert_eq!(run.phases, ["setup", "serve", "end"]);
    // Every probe attached, as a classic tracepoint (a kernel without one would leave its
    // metrics out: then this test says which).
    let probes = net_probes(r);
    assert_eq!(probes.len(), SYSCALLS.len(), "{probes:?}");
    for p in r.probes.iter().filter(|p| probes.contains(&p.probe)) {
        if p.attach.is_none() {
            return skip(
                test,
                &format!("{} not attached here: {:?}", p.probe, p.note),
            );
        }
        assert_eq!(p.attach, Some(Attach::Tracepoint), "{p:?}");
    }
    let serve = tallied(&run, "serve");
    let mut rows = Vec::new();
    for name in counter_names() {
        let counted = run.in_phase(&name, "serve");
        let made = serve[&name];
        rows.push(format!("{name} {counted}"));
        assert_eq!(
            counted, made,
            "{name} in phase serve: counted {counted}, the child made {made}"
        );
    }
    println!("{test}: phase serve, counted = made: {}", rows.join(", "));
    // The tally itself is what the child was written to do.
    let k = K as u64;
    let expect = |name: &str, n: u64| assert_eq!(serve[name], n, "{name} (the child's own tally)");
    for accept in ["accept", "accept4"] {
        expect(&format!("{accept}_calls"), 2);
        expect(&format!("{accept}_failed"), 1);
        expect(&format!("{accept}_eagain"), 1);
    }
    expect("read_calls", k + 2); // K, EAGAIN, end of stream
    expect("read_bytes", 100 * k);
    expect("read_eagain", 1);
    for (name, bytes) in [("readv", 50), ("recvfrom", 50), ("recvmsg", 40)] {
        expect(&format!("{name}_calls"), k + 1);
        expect(&format!("{name}_bytes"), bytes * k);
        expect(&format!("{name}_eagain"), 1);
    }
    let fills = run.result["fills"].as_u64().unwrap();
    expect("sendto_calls", k + fills + 1);
    expect("sendto_eagain", 1);
    expect("writev_calls", k + 1);
    expect("sendmsg_calls", k + 1);
    expect("write_calls", k + 2); // the phase line, K, the full socket
    for wait in ["epoll_wait", "epoll_pwait", "epoll_pwait2"] {
        expect(&format!("{wait}_calls"), 2);
        expect(&format!("{wait}_empty"), 1);
    }
    for (name, n) in [
        ("epoll_ctl_calls", 1),
        ("poll_calls", 1),
        ("ppoll_calls", 1),
        ("shutdown_calls", 1),
        ("close_calls", 7),
    ] {
        expect(name, n);
    }
    // The setup phase: its own phase line only (socket, bind, listen, connect are not counted).
    let setup = tallied(&run, "setup");
    assert_eq!(run.in_phase("write_calls", "setup"), setup["write_calls"]);
    assert_eq!(run.in_phase("write_bytes", "setup"), setup["write_bytes"]);
    for name in [
        "read_calls",
        "accept_calls",
        "epoll_wait_calls",
        "close_calls",
    ] {
        assert_eq!(run.in_phase(name, "setup"), 0, "{name} in setup");
    }
    // The summary's groups sum the syscalls, per phase.
    let summary = r.summary_rows();
    let row = |name: &str| {
        summary
            .iter()
            .find(|s| s.metric == name)
            .unwrap_or_else(|| panic!("no summary row {name}"))
    };
    let serve_at = run.phases.iter().position(|p| p == "serve").unwrap();
    let sum = |parts: &[&str]| parts.iter().map(|p| serve[*p]).sum::<u64>();
    for (group, parts) in [
        ("accepts", &["accept_calls", "accept4_calls"][..]),
        (
            "net_reads",
            &[
                "read_calls",
                "readv_calls",
                "recvfrom_calls",
                "recvmsg_calls",
            ],
        ),
        (
            "net_read_bytes",
            &[
                "read_bytes",
                "readv_bytes",
                "recvfrom_bytes",
                "recvmsg_bytes",
            ],
        ),
        (
            "net_writes",
            &[
                "write_calls",
                "writev_calls",
                "sendto_calls",
                "sendmsg_calls",
            ],
        ),
        (
            "net_writes_eagain",
            &[
                "write_eagain",
                "writev_eagain",
                "sendto_eagain",
                "sendmsg_eagain",
            ],
        ),
        (
            "epoll_waits",
            &[
                "epoll_wait_calls",
                "epoll_pwait_calls",
                "epoll_pwait2_calls",
            ],
        ),
        (
            "epoll_waits_empty",
            &[
                "epoll_wait_empty",
                "epoll_pwait_empty",
                "epoll_pwait2_empty",
            ],
        ),
    ] {
        let got = row(group).per_phase[serve_at];
        println!(
            "{test}: {group} ({}) in serve: {got}",
            spawnscope_collector::metric_label(group)
        );
        assert_eq!(got, sum(parts), "{group}");
    }
    assert_eq!(row("net_read_bytes").unit, "bytes");
    // What the probes cost: each runs for every such call on the machine, the target's or not.
    let mut cost = (0, 0);
    for p in r
        .program_costs
        .iter()
        .filter(|p| probes.contains(&p.tracepoint))
    {
        println!(
            "{test}: {} ran {} times, {:.0} ns each",
            p.program,
            p.run_cnt,
            p.run_time_ns as f64 / p.run_cnt.max(1) as f64
        );
        cost.0 += p.run_cnt;
        cost.1 += p.run_time_ns;
    }
    println!(
        "{test}: the serving syscalls' programs: {} runs, {:.0} ns each on average; {} of them \
         the child's in phase serve",
        cost.0,
        cost.1 as f64 / cost.0.max(1) as f64,
        serve
            .iter()
            .filter(|(n, _)| n.ends_with("_calls"))
            .map(|(_, v)| v)
            .sum::<u64>()
    );
}

#[test]
fn without_the_option_the_serving_syscalls_are_not_measured_and_not_attached() {
    let _one = serial();
    let test = "serving_syscalls_off";
    let Some(run) = run(test, false) else {
        return;
    };
    let r = &run.report;
    assert!(!r.diagnostics.net_syscalls);
    // Not measured: no metric, no summary row — not zeros.
    for name in counter_names() {
        assert!(
            r.metric(&name).is_none(),
            "{name} reported without the option"
        );
    }
    let rows: Vec<String> = r.summary_rows().into_iter().map(|s| s.metric).collect();
    for name in [
        "accepts",
        "net_reads",
        "net_read_bytes",
        "net_writes",
        "epoll_waits",
        "read_calls",
        "close_calls",
    ] {
        assert!(!rows.iter().any(|m| m == name), "{name} in {rows:?}");
    }
    // Not attached: not in the probes, none of their programs ran, nothing said missing.
    assert_eq!(net_probes(r), Vec::<String>::new());
    let names: Vec<String> = SYSCALLS
        .iter()
        .map(|(s, _)| format!("syscalls:sys_exit_{s}"))
        .collect();
    assert!(
        !r.program_costs
            .iter()
            .any(|p| names.contains(&p.tracepoint)),
        "{:?}",
        r.program_costs
    );
    assert!(r.missing().all(|p| !names.contains(&p.probe)));
    // The rest of the report is as before: the other counters are there.
    assert!(r.metric("mmap_calls").is_some() && r.metric("clone3_calls").is_some());
    let attached: Vec<&str> = r
        .probes
        .iter()
        .filter(|p| p.attach.is_some())
        .map(|p| p.probe.as_str())
        .collect();
    println!(
        "{test}: {} probes attached without the option: {}",
        attached.len(),
        attached.join(", ")
    );
}
