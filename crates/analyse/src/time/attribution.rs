//! "80 s of system time — doing what?": every perf sample of a run gets a category. Kernel samples
//! by their kernel entry path (page faults, thread creation, thread exit, memory syscalls, futex
//! and scheduler, other syscalls, interrupts), user samples by whose code ran (runtime scheduler,
//! GC, allocation and task creation, the workload's own code). The rules are data:
//! attribution-rules.tsv (analyse::rules). Shares are scaled to the run's rusage: kernel
//! rows to its system time, user rows to its user time, and split by phase.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::rules::{symbol, KERNEL_OTHER, USER_OTHER};
pub use crate::time::rules::{Mode, Rules, CATEGORIES};
use record::perf::{is_kernel_frame, is_unresolved_frame, PerfRecord, Profile};
use record::RunRecord;

/// One category's samples, overall and per phase.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub category: String,
    pub label: String,
    pub mode: Mode,
    pub samples: u64,
    /// Of the samples of its mode (kernel rows of kernel samples, user rows of user samples).
    pub share: f64,
    /// The share of the run's rusage system time (kernel rows) or user time (user rows).
    pub seconds: f64,
    /// Seconds per phase, in the order of `Attribution::phases`.
    pub phase_seconds: Vec<f64>,
    /// The commonest paths below the deciding frame: "copy_process → dup_task_struct → …".
    pub top_paths: Vec<(String, u64)>,
    /// Kernel rows: the user code that entered the kernel, innermost first
    /// ("runtime.memclrNoHeapPointers ← runtime.malg.func1").
    pub top_callers: Vec<(String, u64)>,
}

/// Where a run's CPU time went, from its perf samples.
#[derive(schemars::JsonSchema, Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Attribution {
    pub samples: u64,
    pub kernel_samples: u64,
    pub user_samples: u64,
    pub freq_hz: Option<u32>,
    pub call_graph: Option<String>,
    pub scope: Option<String>,
    /// The CPU time the samples stand for (samples / rate), to hold against rusage.
    pub sampled_cpu_s: Option<f64>,
    pub rusage_user_s: f64,
    pub rusage_sys_s: f64,
    /// Kernel samples in a named category (all but "kernel, unclassified").
    pub named_kernel_share: f64,
    /// User samples in a named category (all but "user, unclassified").
    pub named_user_share: f64,
    /// Samples with at least one frame perf could not name.
    pub unresolved_share: f64,
    /// Samples perf recorded without any stack: counted here, in no row.
    pub stackless_samples: u64,
    pub phases: Vec<String>,
    pub rows: Vec<Row>,
    pub flame_graph: Option<String>,
    /// What perf said about lost samples or limits, and coverage warnings.
    pub notes: Vec<String>,
}

impl Attribution {
    #[cfg(test)]
    pub fn row(&self, category: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.category == category)
    }
}

/// The three commonest, most first (ties by name, so output is stable).
fn top3(counts: BTreeMap<String, u64>) -> Vec<(String, u64)> {
    let mut top: Vec<(String, u64)> = counts.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(3);
    top
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Classifies every sample of `profile` and scales the shares to `user_s`/`sys_s`.
pub fn attribute(
    profile: &Profile,
    rules: &Rules,
    phase_order: &[String],
    user_s: f64,
    sys_s: f64,
) -> Attribution {
    // Phases in time order, as far as samples fell in them.
    let phases: Vec<String> = phase_order
        .iter()
        .filter(|p| profile.stacks.iter().any(|s| &s.phase == *p))
        .cloned()
        .chain(
            profile
                .stacks
                .iter()
                .map(|s| s.phase.clone())
                .filter(|p| !phase_order.contains(p))
                .collect::<std::collections::BTreeSet<_>>(),
        )
        .collect();
    #[derive(Default)]
    struct Tally {
        samples: u64,
        by_phase: Vec<u64>,
        paths: BTreeMap<String, u64>,
        callers: BTreeMap<String, u64>,
    }
    let mut per: BTreeMap<&str, Tally> = BTreeMap::new();
    let (mut kernel, mut user, mut unresolved, mut stackless) = (0u64, 0u64, 0u64, 0u64);
    for stack in &profile.stacks {
        if !stack.has_stack() {
            stackless += stack.count;
            continue;
        }
        let mode = Mode::of(stack);
        match mode {
            Mode::Kernel => kernel += stack.count,
            Mode::User => user += stack.count,
        }
        if stack.frames.iter().any(|f| is_unresolved_frame(f)) {
            unresolved += stack.count;
        }
        let (category, decided) = rules.classify(stack);
        let entry = per.entry(category).or_insert_with(|| Tally {
            by_phase: vec![0; phases.len()],
            ..Default::default()
        });
        entry.samples += stack.count;
        if let Some(p) = phases.iter().position(|p| *p == stack.phase) {
            entry.by_phase[p] += stack.count;
        }
        if mode == Mode::Kernel {
            let callers: Vec<&str> = stack
                .frames
                .iter()
                .rev()
                .filter(|f| !is_kernel_frame(f))
                .take(2)
                .map(String::as_str)
                .collect();
            if !callers.is_empty() {
                *entry.callers.entry(callers.join(" ← ")).or_default() += stack.count;
            }
        }
        // The deciding frame and the next two toward the leaf, in the sample's mode.
        let from = decided.unwrap_or(stack.frames.len().saturating_sub(1));
        let path: Vec<String> = stack.frames[from..]
            .iter()
            .filter(|f| is_kernel_frame(f) == (mode == Mode::Kernel))
            .take(3)
            .map(|f| symbol(f))
            .collect();
        *entry.paths.entry(path.join(" → ")).or_default() += stack.count;
    }
    let seconds_per = |mode: Mode| match mode {
        Mode::Kernel if kernel > 0 => sys_s / kernel as f64,
        Mode::User if user > 0 => user_s / user as f64,
        _ => 0.0,
    };
    let rows: Vec<Row> = CATEGORIES
        .iter()
        .map(|&(id, label, mode)| {
            let Tally {
                samples,
                by_phase,
                paths,
                callers,
            } = per.remove(id).unwrap_or_default();
            let whole = if mode == Mode::Kernel { kernel } else { user };
            Row {
                category: id.to_string(),
                label: label.to_string(),
                mode,
                samples,
                share: share(samples, whole),
                seconds: samples as f64 * seconds_per(mode),
                phase_seconds: if by_phase.is_empty() {
                    vec![0.0; phases.len()]
                } else {
                    by_phase
                        .iter()
                        .map(|&n| n as f64 * seconds_per(mode))
                        .collect()
                },
                top_paths: top3(paths),
                top_callers: top3(callers),
            }
        })
        .collect();
    let other = |id: &str| {
        rows.iter()
            .find(|r| r.category == id)
            .map_or(0, |r| r.samples)
    };
    Attribution {
        samples: kernel + user,
        kernel_samples: kernel,
        user_samples: user,
        rusage_user_s: user_s,
        rusage_sys_s: sys_s,
        named_kernel_share: share(kernel - other(KERNEL_OTHER), kernel),
        named_user_share: share(user - other(USER_OTHER), user),
        unresolved_share: share(unresolved, kernel + user),
        stackless_samples: stackless,
        phases,
        rows,
        ..Default::default()
    }
}

/// The attribution of a run's samples, with what its recording says about them: the rate and call
/// graph (perf.json), lost or throttled samples, stackless samples, and samples that stand for less
/// CPU than the run used.
pub fn of_run(
    profile: &Profile,
    phases: &[String],
    run: &RunRecord,
    record: Option<&PerfRecord>,
    script_messages: &[String],
) -> Attribution {
    let (user_s, sys_s) = run.rusage.map_or((0.0, 0.0), |r| {
        (r.user_us as f64 / 1e6, r.sys_us as f64 / 1e6)
    });
    let mut a = attribute(profile, Rules::builtin(), phases, user_s, sys_s);
    let plan = record.as_ref().and_then(|r| r.plan.clone());
    a.freq_hz = plan.as_ref().map(|p| p.freq_hz);
    a.call_graph = plan.as_ref().map(|p| p.call_graph.arg());
    a.scope = record.as_ref().map(|r| r.scope.clone());
    a.sampled_cpu_s = a
        .freq_hz
        .map(|hz| (a.samples + a.stackless_samples) as f64 / hz as f64);
    let said = record
        .iter()
        .flat_map(|r| r.messages.iter())
        .chain(script_messages.iter());
    for line in said {
        let l = line.to_lowercase();
        if l.contains("lost") || l.contains("limit") || l.contains("throttl") {
            a.notes.push(format!("perf: {line}"));
        }
    }
    if a.stackless_samples > 0 {
        a.notes.push(format!(
            "{} samples ({:.1} %) came without any stack and are in no row",
            a.stackless_samples,
            share(a.stackless_samples, a.samples + a.stackless_samples) * 100.0
        ));
    }
    if let Some(sampled) = a.sampled_cpu_s {
        let used = user_s + sys_s;
        if used > 0.5 && (sampled / used) < 0.8 {
            a.notes.push(format!(
                "the samples stand for {sampled:.1} s of CPU, the run used {used:.1} s: some were lost or throttled, shares still hold if the loss was even"
            ));
        }
    }
    if a.unresolved_share > 0.2 && a.call_graph.as_deref() == Some("fp") {
        a.notes.push(format!(
            "{:.0} % of samples have a frame perf could not name: the program's libraries lack frame pointers; --perf-call-graph dwarf walks them",
            a.unresolved_share * 100.0
        ));
    }
    if record.is_some_and(|r| r.scope.starts_with("process")) {
        a.notes.push("recorded per process (no cgroup): threads shorter than one sample period are undersampled, which hides thread start and exit".into());
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::rules::tests::stack;
    use record::perf::{fold, Phases};

    #[test]
    fn shares_scale_to_rusage_and_split_by_phase() {
        let mut p = Profile::default();
        let mut add = |phase: &str, frames: &[&str], count: u64| {
            let mut s = stack(frames);
            s.phase = phase.into();
            s.count = count;
            p.stacks.push(s);
        };
        add("spawn", &["clone3", "__x64_sys_clone3_[k]"], 30);
        add("spawn", &["asm_exc_page_fault_[k]"], 10);
        add("join", &["do_exit_[k]"], 50);
        add("join", &["weird_[k]"], 10);
        add("join", &["threads::main"], 4);
        add("spawn", &["[unknown]"], 1);
        let order = vec!["startup".to_string(), "spawn".into(), "join".into()];
        let a = attribute(&p, Rules::builtin(), &order, 0.5, 10.0);
        assert_eq!(a.phases, ["spawn", "join"]);
        assert_eq!((a.kernel_samples, a.user_samples), (100, 5));
        let exit = a.row("thread_exit").unwrap();
        assert_eq!(exit.samples, 50);
        assert!((exit.share - 0.5).abs() < 1e-9);
        assert!(
            (exit.seconds - 5.0).abs() < 1e-9,
            "half the kernel samples, half of 10 s"
        );
        assert_eq!(exit.phase_seconds, [0.0, 5.0]);
        assert!((a.named_kernel_share - 0.9).abs() < 1e-9);
        assert!((a.named_user_share - 0.8).abs() < 1e-9);
        assert!((a.row("workload").unwrap().seconds - 0.4).abs() < 1e-9);
        assert!((a.unresolved_share - 1.0 / 105.0).abs() < 1e-9);
        let kernel_total: f64 = a
            .rows
            .iter()
            .filter(|r| r.mode == Mode::Kernel)
            .map(|r| r.seconds)
            .sum();
        assert!(
            (kernel_total - 10.0).abs() < 1e-9,
            "kernel rows add up to rusage sys"
        );
        assert_eq!(
            a.row("thread_creation").unwrap().top_paths[0].0,
            "__x64_sys_clone3"
        );
        assert_eq!(a.row("thread_creation").unwrap().top_callers[0].0, "clone3");
    }

    /// A recorded `perf script` fixture (tests/fixtures/perf/), folded by phase and classified,
    /// with seconds scaled so that one sample is one second.
    fn fixture(text: &str, marks: &[(&str, u64)]) -> Attribution {
        let phases = Phases(marks.iter().map(|(n, t)| (n.to_string(), *t)).collect());
        let profile = fold(text.as_bytes(), &phases).unwrap();
        let order: Vec<String> = marks.iter().map(|(n, _)| n.to_string()).collect();
        let unit = attribute(&profile, Rules::builtin(), &order, 1.0, 1.0);
        attribute(
            &profile,
            Rules::builtin(),
            &order,
            unit.user_samples as f64,
            unit.kernel_samples as f64,
        )
    }

    /// (category, samples, samples per phase) for every row with samples.
    fn counts(a: &Attribution) -> Vec<(&str, u64, Vec<u64>)> {
        a.rows
            .iter()
            .filter(|r| r.samples > 0)
            .map(|r| {
                let per = r.phase_seconds.iter().map(|s| s.round() as u64).collect();
                (r.category.as_str(), r.samples, per)
            })
            .collect()
    }

    #[test]
    fn a_recorded_threads_run_is_classified_to_known_counts() {
        let a = fixture(
            include_str!(
                "../../../../spawnscope/tests/fixtures/perf/threads-sleep-2000.perf-script"
            ),
            &[
                ("startup", 5_892_106_612_774),
                ("spawn", 5_892_109_988_322),
                ("join", 5_892_221_580_191),
                ("exit", 5_893_221_898_891),
            ],
        );
        assert_eq!(
            (a.kernel_samples, a.user_samples, a.stackless_samples),
            (180, 11, 1)
        );
        assert_eq!(a.phases, ["startup", "spawn", "join", "exit"]);
        assert_eq!(
            counts(&a),
            [
                ("page_faults", 11, vec![1, 10, 0, 0]),
                ("thread_creation", 23, vec![0, 23, 0, 0]),
                ("thread_exit", 11, vec![0, 0, 0, 11]),
                ("memory_syscalls", 99, vec![0, 33, 66, 0]),
                ("futex_sched", 19, vec![0, 0, 16, 3]),
                ("other_syscalls", 3, vec![0, 2, 1, 0]),
                ("interrupts", 5, vec![0, 1, 2, 2]),
                // perf's own records of each new mapping, fork and exit.
                ("tracing", 9, vec![0, 8, 1, 0]),
                ("allocation", 9, vec![0, 6, 3, 0]),
                ("workload", 2, vec![0, 0, 2, 0]),
            ]
        );
        assert_eq!(a.named_kernel_share, 1.0);
        assert_eq!(a.unresolved_share, 0.0, "dwarf unwinding names every frame");
        // Rust std's per-thread sigaltstack (mmap + mprotect at start, munmap at exit) is where
        // most memory syscalls come from.
        let mem = a.row("memory_syscalls").unwrap();
        assert_eq!(
            mem.top_callers[0],
            (
                "__munmap ← std::sys::pal::unix::stack_overflow::imp::drop_handler".to_string(),
                42
            )
        );
    }

    #[test]
    fn a_recorded_goroutines_run_is_classified_to_known_counts() {
        let a = fixture(
            include_str!(
                "../../../../spawnscope/tests/fixtures/perf/goroutines-hold-100000.perf-script"
            ),
            &[
                ("startup", 5_929_903_810_645),
                ("spawn", 5_929_907_140_224),
                ("steady", 5_930_079_793_747),
                ("join", 5_930_084_687_775),
                ("exit", 5_930_126_396_001),
            ],
        );
        assert_eq!(
            (a.kernel_samples, a.user_samples, a.stackless_samples),
            (60, 64, 0)
        );
        assert_eq!(
            counts(&a),
            [
                ("page_faults", 43, vec![0, 43, 0, 0, 0]),
                ("thread_exit", 8, vec![0, 0, 0, 0, 8]),
                ("futex_sched", 6, vec![0, 4, 0, 2, 0]),
                ("other_syscalls", 2, vec![1, 1, 0, 0, 0]),
                ("interrupts", 1, vec![0, 1, 0, 0, 0]),
                ("runtime_scheduler", 13, vec![0, 3, 0, 10, 0]),
                ("gc", 21, vec![0, 21, 0, 0, 0]),
                ("allocation", 15, vec![0, 11, 0, 4, 0]),
                ("workload", 15, vec![0, 6, 1, 8, 0]),
            ]
        );
        assert_eq!(a.named_kernel_share, 1.0);
        assert_eq!(a.named_user_share, 1.0);
        // Faults on fresh goroutine stacks, taken in the runtime's stack allocator.
        assert_eq!(
            a.row("page_faults").unwrap().top_callers[0],
            (
                "runtime.stackpoolalloc ← runtime.stackcacherefill".to_string(),
                25
            )
        );
    }

    /// A fixture recorded against a newer glibc (tests/fixtures/perf/README.md), classified with
    /// the phase marks its header gives.
    fn glibc_fixture(text: &str) -> Attribution {
        let marks: Vec<(&str, u64)> = text
            .lines()
            .find_map(|l| l.strip_prefix("# Phase marks (CLOCK_MONOTONIC ns): "))
            .expect("the fixture says its phase marks")
            .trim_end_matches('.')
            .split(", ")
            .map(|m| {
                let (name, t) = m.split_once(' ').unwrap();
                (name, t.parse().unwrap())
            })
            .collect();
        let a = fixture(text, &marks);
        assert_eq!(a.named_kernel_share, 1.0);
        // With the rules that knew only Debian 12's glibc 2.36, 36–40 % of these user samples
        // (1.3 % with libc6-dbg) were "user, unclassified". What is left is ld.so relocating the
        // program before main, one sample: no thread's cost.
        let unclassified = a.row(USER_OTHER).unwrap();
        assert!(
            unclassified.samples <= 1 && 1.0 - a.named_user_share < 0.01,
            "user, unclassified: {} of {} user samples: {:?}",
            unclassified.samples,
            a.user_samples,
            unclassified.top_paths
        );
        a
    }

    /// The user rows' top paths: where the deciding frame was.
    fn user_paths(a: &Attribution, category: &str) -> Vec<String> {
        let row = a.row(category).unwrap();
        row.top_paths.iter().map(|(p, _)| p.clone()).collect()
    }

    #[test]
    fn glibc_2_39_as_ubuntu_24_04_ships_it_is_classified() {
        let a = glibc_fixture(include_str!(
            "../../../../spawnscope/tests/fixtures/perf/threads-sleep-20000-glibc-2.39-ubuntu-24.04.perf-script"
        ));
        assert_eq!(
            (a.kernel_samples, a.user_samples, a.stackless_samples),
            (48, 315, 0)
        );
        assert_eq!(
            counts(&a),
            [
                ("page_faults", 2, vec![0, 2, 0, 0]),
                ("thread_creation", 10, vec![0, 10, 0, 0]),
                ("thread_exit", 2, vec![0, 1, 0, 1]),
                ("memory_syscalls", 25, vec![1, 15, 9, 0]),
                ("futex_sched", 6, vec![0, 3, 3, 0]),
                ("other_syscalls", 1, vec![0, 1, 0, 0]),
                ("tracing", 2, vec![0, 2, 0, 0]),
                ("allocation", 266, vec![0, 181, 84, 1]),
                ("workload", 49, vec![0, 25, 24, 0]),
            ]
        );
        // Without libc's symbols a thread's own glibc work is named by where its stack starts.
        assert!(
            user_paths(&a, "allocation")
                .contains(&"[libc.so.6] → [libc.so.6] → [libc.so.6]".into()),
            "{:?}",
            a.row("allocation").unwrap().top_paths
        );
    }

    #[test]
    fn glibc_2_41_is_classified_alike_with_and_without_debug_symbols() {
        let shipped = glibc_fixture(include_str!(
            "../../../../spawnscope/tests/fixtures/perf/threads-sleep-20000-glibc-2.41-debian-13.perf-script"
        ));
        let dbg = glibc_fixture(include_str!(
            "../../../../spawnscope/tests/fixtures/perf/threads-sleep-20000-glibc-2.41-debian-13-dbg.perf-script"
        ));
        for a in [&shipped, &dbg] {
            assert_eq!(
                (a.kernel_samples, a.user_samples, a.stackless_samples),
                (43, 313, 0)
            );
            assert_eq!(
                counts(a),
                [
                    ("page_faults", 4, vec![0, 4, 0, 0]),
                    ("thread_creation", 5, vec![0, 5, 0, 0]),
                    ("thread_exit", 4, vec![0, 3, 0, 1]),
                    ("memory_syscalls", 21, vec![0, 14, 6, 1]),
                    ("futex_sched", 3, vec![0, 2, 1, 0]),
                    ("other_syscalls", 2, vec![1, 1, 0, 0]),
                    ("tracing", 4, vec![0, 4, 0, 0]),
                    ("allocation", 268, vec![0, 201, 62, 5]),
                    ("workload", 44, vec![0, 29, 15, 0]),
                    // ld.so relocating the program before main.
                    ("user_other", 1, vec![1, 0, 0, 0]),
                ]
            );
        }
        // The same samples, named by different frames: glibc's own with its symbols, the stack's
        // root ([libc.so.6], a thread's clone3) without.
        assert_eq!(
            user_paths(&dbg, "allocation"),
            [
                "_int_malloc",
                "__malloc_arena_thread_freeres",
                "start_thread"
            ]
        );
        assert_eq!(
            user_paths(&shipped, "allocation")[0],
            "[libc.so.6] → [libc.so.6] → [libc.so.6]"
        );
    }

    #[test]
    fn glibc_2_43_as_debian_sid_ships_it_is_classified() {
        let a = glibc_fixture(include_str!(
            "../../../../spawnscope/tests/fixtures/perf/threads-sleep-20000-glibc-2.43-debian-sid.perf-script"
        ));
        assert_eq!(
            (a.kernel_samples, a.user_samples, a.stackless_samples),
            (44, 272, 0)
        );
        // The cut kept no sample of the exit phase.
        assert_eq!(a.phases, ["startup", "spawn", "join"]);
        assert_eq!(
            counts(&a),
            [
                ("thread_creation", 6, vec![0, 6, 0]),
                ("thread_exit", 3, vec![0, 3, 0]),
                ("memory_syscalls", 27, vec![0, 23, 4]),
                ("futex_sched", 3, vec![0, 3, 0]),
                ("other_syscalls", 4, vec![0, 4, 0]),
                ("tracing", 1, vec![0, 1, 0]),
                ("allocation", 213, vec![0, 188, 25]),
                ("workload", 58, vec![1, 47, 10]),
                ("user_other", 1, vec![1, 0, 0]),
            ]
        );
    }
}
