//! bench-of-chan (elsejj, 2022): N receivers each with a bounded channel, N senders each sending
//! E events of a type (int, str, str_ptr); speed = N × E / the time after spawning. Go, Rust
//! (tokio) and Kotlin coroutines. Run by `scripts/bench-chan.sh` (the `chain` workload of our
//! three runtimes, and examples/kotlin-chain), which prints its rows beside these published ones
//! (`spawnscope published bench-of-chan`).

use crate::Study;

pub const STUDY: Study = Study {
    name: "bench-of-chan",
    about: "bench-of-chan 2022: channels between N sender and N receiver tasks (Go, Rust tokio, Kotlin coroutines); run by scripts/bench-chan.sh",
    source: "elsejj, \"bench-of-chain\" (2022-07-29, gitee.com/elsejj/bench-of-chain): run.sh -e 10000, queue 256, i7-9750H under WSL (Ubuntu 22.04), Go 1.18, Rust 1.62 (tokio), Kotlin (kotlinx.coroutines, after a warm-up run); speed = messages/s",
    plan: None,
    table: None,
    published_csv: Some(csv),
};

/// One published line, in the article's CSV shape: program, etype, worker, event, time (s),
/// speed (messages/s).
pub struct Row {
    pub program: &'static str,
    pub etype: &'static str,
    pub worker: u64,
    pub event: u64,
    pub time_s: f64,
    pub speed: u64,
}

const fn row(
    program: &'static str,
    etype: &'static str,
    worker: u64,
    time_s: f64,
    speed: u64,
) -> Row {
    Row {
        program,
        etype,
        worker,
        event: 10_000,
        time_s,
        speed,
    }
}

/// The lines the article printed (its `run.sh` and `bench.sh` output; the middle of the latter
/// elided by the article itself). Its last Kotlin str_ptr line at 50,000 reads "11.662 4287558",
/// a speed that does not match its time (5e8 / 11.662 = 42.9 M/s): kept as printed.
pub const PUBLISHED: [Row; 21] = [
    row("golang", "str_ptr", 5_000, 0.477, 104_845_454),
    row("rust", "str_ptr", 5_000, 0.652, 76_636_797),
    row("kotlin", "str_ptr", 5_000, 1.638, 30_526_077),
    row("golang", "int", 100, 0.010, 98_969_725),
    row("rust", "int", 100, 0.012, 80_789_148),
    row("kotlin", "int", 100, 0.145, 6_917_313),
    row("golang", "str", 100, 0.045, 21_989_041),
    row("rust", "str", 100, 0.019, 53_630_230),
    row("kotlin", "str", 100, 0.159, 6_304_093),
    row("golang", "str_ptr", 100, 0.011, 88_775_257),
    row("rust", "str_ptr", 100, 0.012, 81_436_541),
    row("kotlin", "str_ptr", 100, 0.136, 7_340_791),
    row("kotlin", "str_ptr", 50_000, 12.434, 40_212_992),
    row("golang", "int", 50_000, 5.594, 89_376_773),
    row("rust", "int", 50_000, 9.131, 54_760_465),
    row("kotlin", "int", 50_000, 9.629, 51_927_597),
    row("golang", "str", 50_000, 17.794, 28_099_233),
    row("rust", "str", 50_000, 12.437, 40_203_692),
    row("kotlin", "str", 50_000, 16.774, 29_807_544),
    row("golang", "str_ptr", 50_000, 4.911, 101_819_179),
    row("rust", "str_ptr", 50_000, 8.795, 56_850_205),
];

/// The published lines as the article's CSV, header first.
pub fn csv() -> String {
    let mut out = String::from("program,etype,worker,event,time,speed\n");
    for r in &PUBLISHED {
        out.push_str(&format!(
            "{},{},{},{},{:.3},{}\n",
            r.program, r.etype, r.worker, r.event, r.time_s, r.speed
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_published_lines_are_the_articles() {
        let csv = csv();
        assert!(csv.starts_with("program,etype,worker,event,time,speed\n"));
        assert!(csv.contains("\nkotlin,str_ptr,5000,10000,1.638,30526077\n"));
        assert!(csv.contains("\ngolang,int,50000,10000,5.594,89376773\n"));
        // One line per (program, etype, worker): the script looks each up by those three.
        for (i, r) in PUBLISHED.iter().enumerate() {
            assert!(
                PUBLISHED[..i]
                    .iter()
                    .all(|o| (o.program, o.etype, o.worker) != (r.program, r.etype, r.worker)),
                "{} {} {}",
                r.program,
                r.etype,
                r.worker
            );
        }
    }
}
