//! The verdict on a run's time figures: trustworthy, or suspect and why. Memory figures do not
//! move between runs; time figures do, when something else had the machine (the hypervisor, other
//! tasks, reclaim, memory handed back to the host) or when the workload hit a kernel slow path
//! (futex wakes walking thousands of waiters). Each rule is a row of [`RULES`], checked phase by
//! phase, and every finding carries the rule that made it, in words.

use serde::{Deserialize, Serialize};

use spawnscope_collector::Report as CollectorReport;

use crate::time::sentinels::{PhaseSentinels, SentinelFigures};
use units::{bytes, count};

/// What one phase of a run shows about the machine and the workload's waits. `None`: not
/// available here (the host lacks it, or the run was recorded without it) — never a zero.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PhaseEvidence {
    pub phase: String,
    pub wall_ns: u64,
    /// Time the hypervisor ran something else while a CPU of this VM wanted to run.
    pub steal_ns: Option<u64>,
    /// CPU time of everything outside the run: other processes, and kernel threads where
    /// neither the collector nor the sentinels told them apart.
    pub outside_cpu_ns: Option<u64>,
    /// Of that, kernel threads' CPU time, told apart by the collector, else by the sentinels
    /// (their /proc times; a run on the whole machine only), and then left out of
    /// `outside_cpu_ns`: at a big run's exit they free what it left — its threads' stacks,
    /// their task structs through RCU — on its behalf; their other work is judged by the
    /// reclaim, compaction, THP and page-reporting rules.
    pub kernel_threads_cpu_ns: Option<u64>,
    /// What `outside_cpu_ns` may be off by (None: not stated, records from before): a figure
    /// below it is not a finding.
    pub outside_cpu_resolution_ns: Option<u64>,
    /// Who took the CPU outside the run, where the sentinels read every process: the processes
    /// by CPU (most first), all of them together, and /proc/stat's softirq column. None: not
    /// read (older records), and the finding names no one.
    pub outside_takers: Option<OutsideTakers>,
    /// Free memory the guest handed back to the host (free page reporting).
    pub reported_to_host_bytes: Option<u64>,
    /// Memory used for the first time since boot: initialized by the kernel during the phase.
    pub first_used_bytes: Option<u64>,
    /// Change of the balloon's size (positive: the host took memory).
    pub balloon_change_bytes: Option<i64>,
    /// Reclaim on the whole machine, direct or of cgroups at their limit: time (in-kernel
    /// tracepoints), and direct reclaim stalls (vmstat).
    pub reclaim_ns: Option<u64>,
    pub direct_reclaim_stalls: Option<u64>,
    /// Allocations on the whole machine that stalled on compaction.
    pub compaction_stalls: Option<u64>,
    /// Transparent huge page collapse attempts on the whole machine.
    pub thp_events: Option<u64>,
    /// Lowest and highest CPU frequency seen.
    pub freq_khz: Option<(u64, u64)>,
    /// The workload's futex wakes, and the waiters on other addresses their walks passed over in
    /// the futex hash slot's chain.
    pub futex_wakes: Option<u64>,
    pub futex_waiters_walked: Option<u64>,
}

/// Who took a phase's CPU outside the run (analyse::time::outside_cpu).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutsideTakers {
    /// The processes that took the most, most first: (label "stress-ng (PID 4321)", ns).
    pub processes: Vec<(String, u64)>,
    /// Every process outside the run, ns.
    pub processes_ns: u64,
    /// Interrupt work the tick saw (softirq), ns.
    pub softirq_ns: Option<u64>,
}

/// Whether a CPU figure passes the outside-CPU rule's threshold (≥ 10 % of the phase's capacity
/// and ≥ 100 ms) and the reading's resolution.
fn outside_past_rule(ns: u64, p: &PhaseEvidence, cpus: u32) -> bool {
    ns as f64 >= 0.10 * capacity_ns(p, cpus)
        && ns >= 100_000_000
        && p.outside_cpu_resolution_ns.is_none_or(|r| ns >= r)
}

/// The outside-CPU finding's causes, each with its figure, each past the rule on its own: the
/// processes that are, the other processes together, the interrupts, and what no process
/// accounts for (a process that began and ended between two marks without a parent to wait
/// for it, an interrupt on an idle CPU). Where none is past the rule alone (the CPU spread
/// thin), the largest two with their figures.
fn outside_causes(outside: u64, t: &OutsideTakers, p: &PhaseEvidence, cpus: u32) -> Vec<String> {
    let mut candidates: Vec<(String, u64)> = Vec::new();
    let mut named = 0;
    for (label, ns) in &t.processes {
        if outside_past_rule(*ns, p, cpus) {
            candidates.push((label.clone(), *ns));
            named += ns;
        }
    }
    let others = t.processes_ns.saturating_sub(named);
    if others > 0 {
        // One process's time alone is named as that process.
        let alone = t
            .processes
            .iter()
            .find(|(label, ns)| *ns == others && !candidates.iter().any(|(c, _)| c == label));
        let what = alone.map_or("other processes together".to_string(), |(l, _)| l.clone());
        candidates.push((what, others));
    }
    if let Some(softirq) = t.softirq_ns.filter(|&n| n > 0) {
        candidates.push(("interrupts (softirq, as the tick saw them)".into(), softirq));
    }
    let unattributed = outside
        .saturating_sub(t.processes_ns)
        .saturating_sub(t.softirq_ns.unwrap_or(0));
    if unattributed > 0 {
        candidates.push((
            "unattributed (no process alive at a mark took it: processes that began and ended between two marks unwaited for, kernel work in interrupts)".into(),
            unattributed,
        ));
    }
    let past: Vec<&(String, u64)> = candidates
        .iter()
        .filter(|(_, ns)| outside_past_rule(*ns, p, cpus))
        .collect();
    let shown: Vec<&(String, u64)> = if past.is_empty() {
        let mut largest: Vec<&(String, u64)> = candidates.iter().collect();
        largest.sort_by_key(|c| std::cmp::Reverse(c.1));
        largest.into_iter().take(2).collect()
    } else {
        past
    };
    shown
        .into_iter()
        .map(|(label, ns)| format!("{label} {}", seconds(*ns)))
        .collect()
}

/// A run's evidence: its phases and the machine's CPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    pub cpus: u32,
    pub phases: Vec<PhaseEvidence>,
    /// The emulator that ran the CPU (QEMU's TCG), when it was emulated: no phase's time is
    /// the kernel's then.
    pub emulator: Option<String>,
}

/// One rule: a sentinel, the threshold past which the phase's time figures are suspect, and the
/// rule in words as summaries print it.
pub struct Rule {
    pub id: &'static str,
    pub rule: &'static str,
    check: fn(&PhaseEvidence, cpus: u32) -> Check,
}

/// What a rule found in one phase.
enum Check {
    NotAvailable,
    Clean,
    Suspect(String),
}

fn capacity_ns(p: &PhaseEvidence, cpus: u32) -> f64 {
    p.wall_ns as f64 * cpus.max(1) as f64
}

fn seconds(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 1.0 {
        format!("{s:.1} s")
    } else {
        format!("{:.0} ms", s * 1e3)
    }
}

/// Share of the phase's CPU capacity, as "31 %".
fn share(ns: u64, p: &PhaseEvidence, cpus: u32) -> String {
    format!("{:.0} %", 100.0 * ns as f64 / capacity_ns(p, cpus).max(1.0))
}

fn check_opt<T>(value: Option<T>, suspect: impl FnOnce(T) -> Option<String>) -> Check {
    match value {
        None => Check::NotAvailable,
        Some(v) => suspect(v).map_or(Check::Clean, Check::Suspect),
    }
}

/// The rules, in the order findings are told. Thresholds are where, on the machines measured
/// (docs/manual/time-and-verdict.md), the figure starts to move a run's time figures by more than
/// their run-to-run spread.
pub const RULES: &[Rule] = &[
    Rule {
        id: "steal",
        rule: "steal time ≥ 2 % of the phase's CPU capacity (wall × CPUs) and ≥ 20 ms",
        check: |p, cpus| {
            check_opt(p.steal_ns, |ns| {
                (ns as f64 >= 0.02 * capacity_ns(p, cpus) && ns >= 20_000_000).then(|| {
                    format!("{} stolen by the hypervisor ({} of the CPUs)", seconds(ns), share(ns, p, cpus))
                })
            })
        },
    },
    Rule {
        id: "outside_cpu",
        rule: "CPU time outside the run ≥ 10 % of the phase's CPU capacity, ≥ 100 ms and ≥ the reading's stated resolution — other processes (named by PID where every process was read) and interrupts; spawnscope's own CPU apart, and kernel threads apart where the collector tells them or the sentinels read their /proc times: they free what the run leaves, and their other work has its own rules",
        check: |p, cpus| {
            check_opt(p.outside_cpu_ns, |ns| {
                outside_past_rule(ns, p, cpus).then(|| match &p.outside_takers {
                    Some(takers) => format!(
                        "{} of CPU outside the run ({} of the CPUs): {}",
                        seconds(ns),
                        share(ns, p, cpus),
                        outside_causes(ns, takers, p, cpus).join(", ")
                    ),
                    None => format!(
                        "{} of CPU used by other programs' tasks ({} of the CPUs)",
                        seconds(ns),
                        share(ns, p, cpus)
                    ),
                })
            })
        },
    },
    Rule {
        id: "reclaim",
        rule: "memory reclaimed on the machine while it ran — by allocations that had to free memory first (direct reclaim) or by a cgroup at its memory limit: ≥ 10 ms, or ≥ 1 direct reclaim stall where the time is not measured",
        check: |p, _| match (p.reclaim_ns, p.direct_reclaim_stalls) {
            (Some(ns), stalls) if ns >= 10_000_000 => Check::Suspect(format!(
                "{} reclaiming memory{}",
                seconds(ns),
                stalls
                    .filter(|&s| s > 0)
                    .map_or(String::new(), |s| format!(" ({} direct reclaim stalls)", count(s)))
            )),
            (None, Some(stalls)) if stalls > 0 => {
                Check::Suspect(format!("{} direct reclaim stalls", count(stalls)))
            }
            (None, None) => Check::NotAvailable,
            _ => Check::Clean,
        },
    },
    Rule {
        id: "compaction",
        rule: "any allocation stalled on memory compaction (≥ 1 stall)",
        check: |p, _| {
            check_opt(p.compaction_stalls, |stalls| {
                (stalls > 0).then(|| format!("{} compaction stalls", count(stalls)))
            })
        },
    },
    Rule {
        id: "first_use",
        rule: "≥ 64 MiB of memory used for the first time since boot in the phase (pages the kernel initialized only then: deferred page init, which some VMs' kernels leave until memory is needed): a first use costs the page's initialization and, in a VM, the host's fault-in of memory the guest never touched — on the 2-core development VM about 16 µs a page, against 2 µs warm",
        check: |p, _| {
            check_opt(p.first_used_bytes, |b| {
                (b >= 64 << 20).then(|| format!("{} of memory used for the first time since boot", bytes(b as f64)))
            })
        },
    },
    Rule {
        id: "page_reporting",
        rule: "≥ 1 GiB of free memory handed back to the host (free page reporting) in the phase: the host is taking memory back, and using it again faults it in from the host",
        check: |p, _| {
            check_opt(p.reported_to_host_bytes, |b| {
                (b >= 1 << 30).then(|| format!("{} handed back to the host", bytes(b as f64)))
            })
        },
    },
    Rule {
        id: "balloon",
        rule: "the balloon changed by ≥ 64 MiB",
        check: |p, _| {
            check_opt(p.balloon_change_bytes, |b| {
                (b.unsigned_abs() >= 64 << 20).then(|| {
                    let how = if b > 0 { "inflated" } else { "deflated" };
                    format!("the balloon {how} by {}", bytes(b.unsigned_abs() as f64))
                })
            })
        },
    },
    Rule {
        id: "thp",
        rule: "≥ 512 transparent huge page collapse attempts on the machine",
        check: |p, _| {
            check_opt(p.thp_events, |n| {
                (n >= 512).then(|| format!("{} huge page collapse attempts", count(n)))
            })
        },
    },
    Rule {
        id: "cpu_frequency",
        rule: "CPU frequency varied by ≥ 10 % (highest / lowest seen)",
        check: |p, _| {
            check_opt(p.freq_khz, |(low, high)| {
                (low > 0 && high as f64 >= 1.10 * low as f64).then(|| {
                    format!(
                        "CPU frequency between {:.2} and {:.2} GHz",
                        low as f64 / 1e6,
                        high as f64 / 1e6
                    )
                })
            })
        },
    },
    Rule {
        id: "futex_walk",
        rule: "the workload's futex wakes walked past ≥ 1,000 waiters of other futexes each on average (≥ 10 wakes): a futex hash slot shared with parked tasks",
        check: |p, _| match (p.futex_wakes, p.futex_waiters_walked) {
            (Some(wakes), Some(walked)) => {
                if wakes >= 10 && walked as f64 / wakes as f64 >= 1000.0 {
                    Check::Suspect(format!(
                        "{} futex wakes walked past {} waiters of other futexes each",
                        count(wakes),
                        count(walked / wakes)
                    ))
                } else {
                    Check::Clean
                }
            }
            _ => Check::NotAvailable,
        },
    },
];

/// The one rule about the whole run rather than a phase: an emulated CPU.
pub const EMULATED_CPU: Rule = Rule {
    id: "emulated_cpu",
    rule: "the CPU was emulated (QEMU's TCG: CPUID signature TCGTCGTCGTCG or a \"QEMU TCG\" CPU model): every time measures the emulator translating instructions, not the kernel; memory and counts are real",
    check: |_, _| Check::NotAvailable,
};

/// The phase name of a finding about the whole run.
pub const WHOLE_RUN: &str = "the whole run";

/// One reason the time figures are suspect.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub phase: String,
    /// What was found, in words ("4.1 GiB handed back to the host").
    pub found: String,
}

/// The verdict on a run's time figures.
#[derive(schemars::JsonSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub trustworthy: bool,
    pub findings: Vec<Finding>,
    /// Rules that could not be checked on this host: their sentinel is not available here.
    pub not_checked: Vec<String>,
}

impl Verdict {
    /// One line: "trustworthy" or "suspect: 0.3 s stolen by the hypervisor during spawn; …".
    pub fn line(&self) -> String {
        if self.trustworthy {
            return "trustworthy (no sentinel past its rule)".into();
        }
        let causes: Vec<String> = self
            .findings
            .iter()
            .map(|f| format!("{} during {}", f.found, f.phase))
            .collect();
        format!("suspect: {}", causes.join("; "))
    }

    /// The causes, short, for a table cell ("steal, outside_cpu").
    pub fn cause_ids(&self) -> String {
        let mut ids: Vec<&str> = self.findings.iter().map(|f| f.rule.as_str()).collect();
        ids.dedup();
        ids.join(", ")
    }
}

/// A phase shorter than this is too short to move a time figure: not judged.
const SHORTEST_PHASE_NS: u64 = 10_000_000;

/// Judges a run by every rule, phase by phase.
pub fn judge(evidence: &Evidence) -> Verdict {
    let mut findings = Vec::new();
    let mut not_checked = Vec::new();
    if let Some(emulator) = &evidence.emulator {
        findings.push(Finding {
            rule: EMULATED_CPU.id.into(),
            phase: WHOLE_RUN.into(),
            found: format!("the CPU was emulated ({emulator}): its times are the emulator's"),
        });
    }
    for rule in RULES {
        let mut available = false;
        for p in evidence
            .phases
            .iter()
            .filter(|p| p.wall_ns >= SHORTEST_PHASE_NS)
        {
            match (rule.check)(p, evidence.cpus) {
                Check::NotAvailable => {}
                Check::Clean => available = true,
                Check::Suspect(found) => {
                    available = true;
                    findings.push(Finding {
                        rule: rule.id.into(),
                        phase: p.phase.clone(),
                        found,
                    });
                }
            }
        }
        if !available {
            not_checked.push(rule.id.into());
        }
    }
    Verdict {
        trustworthy: findings.is_empty(),
        findings,
        not_checked,
    }
}

/// A rule's words by its id.
pub fn rule_text(id: &str) -> Option<&'static str> {
    RULES
        .iter()
        .chain([&EMULATED_CPU])
        .find(|r| r.id == id)
        .map(|r| r.rule)
}

/// Bytes in a page, for the balloon's page counts.
const PAGE_BYTES: i64 = 4096;

/// A run's evidence from its sentinels (sentinels.json), phase by phase, with the in-kernel
/// counts of `kernel` where the collector ran: they are exact where the sentinels are samples or
/// include spawnscope's own work.
pub fn evidence(sentinels: &SentinelFigures, kernel: &KernelCounts, cpus: u32) -> Evidence {
    let phases = sentinels
        .per_phase
        .iter()
        .map(|p| {
            // A run without phase marks (a command) is one sentinel window, "run", and one
            // kernel slot, "startup" (everything before a first mark that never came).
            let k = kernel.phase(&p.name).or_else(|| {
                (p.name == "run" && kernel.phases.len() == 1)
                    .then(|| kernel.phases.first())
                    .flatten()
            });
            let (outside_cpu_ns, kernel_threads_cpu_ns) = outside_cpu(p, k);
            PhaseEvidence {
                phase: p.name.clone(),
                wall_ns: p.wall_ns,
                steal_ns: p.steal_ns,
                outside_cpu_ns,
                kernel_threads_cpu_ns,
                outside_cpu_resolution_ns: p.outside_cpu_resolution_ns,
                outside_takers: p.outside_processes_cpu_ns.map(|all| OutsideTakers {
                    processes: p
                        .outside_processes
                        .iter()
                        .map(|s| (s.label(), s.cpu_ns))
                        .collect(),
                    processes_ns: all,
                    softirq_ns: p.softirq_ns,
                }),
                reported_to_host_bytes: p.reported_bytes,
                first_used_bytes: p.first_used_bytes,
                balloon_change_bytes: p.balloon_pages.map(|pages| pages * PAGE_BYTES),
                reclaim_ns: k.and_then(|k| k.reclaim_ns),
                direct_reclaim_stalls: p.direct_reclaim_stalls,
                // vmstat's compact_stall counts allocations that did stall; the tracepoint
                // fires at every direct compaction attempt, skipped ones too.
                compaction_stalls: p.compaction_stalls.or(k.and_then(|k| k.direct_compactions)),
                thp_events: k.and_then(|k| k.thp_collapses).or(p.thp_collapse_alloc),
                freq_khz: p.freq_khz_min.zip(p.freq_khz_max),
                futex_wakes: k.and_then(|k| k.futex_private_wakes),
                futex_waiters_walked: k.and_then(|k| k.futex_waiters_walked),
            }
        })
        .collect();
    Evidence {
        cpus,
        phases,
        emulator: None,
    }
}

/// CPU time outside the run, kernel threads' left out, and the kernel threads' share: the
/// collector's exact on-CPU times where it counted them (its pair, never mixed with the
/// sentinels'), else the sentinels' /proc/stat reading less the kernel threads' /proc times (at
/// most all of it: both are tick-grained).
fn outside_cpu(p: &PhaseSentinels, k: Option<&KernelPhase>) -> (Option<u64>, Option<u64>) {
    if let Some((all, kthreads)) =
        k.and_then(|k| Some((k.outside_oncpu_ns?, k.outside_kthread_oncpu_ns)))
    {
        return (Some(all.saturating_sub(kthreads.unwrap_or(0))), kthreads);
    }
    match (p.outside_cpu_ns, p.kernel_threads_cpu_ns) {
        (Some(all), Some(kthreads)) => {
            let kthreads = kthreads.min(all);
            (Some(all - kthreads), Some(kthreads))
        }
        (all, _) => (all, None),
    }
}

/// What the collector counted in the kernel that bears on a verdict, per phase (by the phase's
/// shown name). A `None` figure was not counted: its probe is not available here.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelPhase {
    pub name: String,
    pub outside_oncpu_ns: Option<u64>,
    /// Of it, kernel threads' (counted by collectors since kernel threads were told apart).
    pub outside_kthread_oncpu_ns: Option<u64>,
    /// Reclaim on the machine: direct reclaim, and reclaim of cgroups at their limit.
    pub reclaim_ns: Option<u64>,
    pub direct_compactions: Option<u64>,
    pub thp_collapses: Option<u64>,
    pub futex_private_wakes: Option<u64>,
    pub futex_waiters_walked: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelCounts {
    pub phases: Vec<KernelPhase>,
}

impl KernelCounts {
    fn phase(&self, name: &str) -> Option<&KernelPhase> {
        self.phases.iter().find(|p| p.name == name)
    }

    /// For a run held to K CPUs (`--cpu-count`): the probes count other tasks' CPU time on every
    /// CPU of the machine, so their figure is left out and the sentinels' reading over the K
    /// CPUs judges (kernel threads included there: /proc/stat cannot tell them apart, and their
    /// /proc times are the whole machine's: analyse::sentinels gives none for such a run).
    pub fn without_outside_cpu(mut self) -> Self {
        for p in &mut self.phases {
            p.outside_oncpu_ns = None;
            p.outside_kthread_oncpu_ns = None;
        }
        self
    }

    /// From collector.json: `phases` are the run's phase names, `startup` first (the counts
    /// before the first phase mark). A metric the collector could not count is absent from its
    /// report, and stays `None` here.
    pub fn from_report(report: &CollectorReport, phases: &[String]) -> Self {
        let at = |name: &str, i: usize| -> Option<u64> {
            let m = report.metric(name)?;
            Some(if i == 0 {
                m.before_first_phase
            } else {
                m.per_phase.get(i - 1).copied().unwrap_or(0)
            })
        };
        // The figures counted here, summed; None when none was.
        let sum = |names: &[&str], i: usize| -> Option<u64> {
            names.iter().filter_map(|n| at(n, i)).reduce(|a, b| a + b)
        };
        let phases = phases
            .iter()
            .enumerate()
            .map(|(i, name)| KernelPhase {
                name: name.clone(),
                outside_oncpu_ns: at("outside_oncpu_ns", i),
                outside_kthread_oncpu_ns: at("outside_kthread_oncpu_ns", i),
                reclaim_ns: sum(&RECLAIM_NS, i),
                direct_compactions: at("machine_direct_compactions", i),
                thp_collapses: at("machine_thp_collapses", i),
                futex_private_wakes: at("futex_private_wakes", i),
                futex_waiters_walked: at("futex_wake_walked_others", i),
            })
            .collect();
        KernelCounts { phases }
    }
}

/// Reclaim time on the machine: allocations that had to reclaim first, and cgroups at their limit.
const RECLAIM_NS: [&str; 2] = ["machine_direct_reclaim_ns", "machine_cgroup_reclaim_ns"];

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(name: &str, wall_ms: u64) -> PhaseEvidence {
        PhaseEvidence {
            phase: name.into(),
            wall_ns: wall_ms * 1_000_000,
            steal_ns: Some(0),
            outside_cpu_ns: Some(0),
            kernel_threads_cpu_ns: Some(0),
            outside_cpu_resolution_ns: None,
            outside_takers: None,
            reported_to_host_bytes: Some(0),
            first_used_bytes: Some(0),
            balloon_change_bytes: None,
            reclaim_ns: Some(0),
            direct_reclaim_stalls: Some(0),
            compaction_stalls: Some(0),
            thp_events: Some(0),
            freq_khz: None,
            futex_wakes: Some(100),
            futex_waiters_walked: Some(100),
        }
    }

    fn evidence(phases: Vec<PhaseEvidence>) -> Evidence {
        Evidence {
            cpus: 2,
            phases,
            emulator: None,
        }
    }

    #[test]
    fn an_emulated_cpu_makes_a_quiet_run_suspect_for_the_whole_run() {
        let mut e = evidence(vec![phase("spawn", 4000), phase("join", 500)]);
        assert!(judge(&e).trustworthy);
        e.emulator = Some("QEMU TCG".into());
        let v = judge(&e);
        assert!(!v.trustworthy);
        assert_eq!(v.cause_ids(), "emulated_cpu");
        assert_eq!(v.findings[0].phase, WHOLE_RUN);
        assert!(v.line().contains("emulated (QEMU TCG)"), "{}", v.line());
        assert!(rule_text("emulated_cpu").is_some_and(|r| r.contains("TCG")));
    }

    #[test]
    fn a_quiet_run_is_trustworthy_and_names_what_it_could_not_check() {
        let v = judge(&evidence(vec![phase("spawn", 4000), phase("join", 500)]));
        assert!(v.trustworthy, "{v:?}");
        assert_eq!(v.not_checked, ["balloon", "cpu_frequency"]);
        assert_eq!(v.line(), "trustworthy (no sentinel past its rule)");
    }

    /// Where every process was read, the finding names who took the CPU, each cause with its
    /// figure past the rule; a figure below the reading's resolution is no finding.
    #[test]
    fn outside_cpu_names_the_processes_that_took_it_each_past_the_rule() {
        let mut p = phase("join", 2000); // capacity 4 CPU-s: the rule's 10 % is 400 ms
        p.outside_cpu_ns = Some(1_300_000_000);
        p.outside_cpu_resolution_ns = Some(50_000_000);
        p.outside_takers = Some(OutsideTakers {
            processes: vec![
                ("stress-ng-cpu (PID 4321)".into(), 900_000_000),
                ("bash (PID 77)".into(), 60_000_000),
                ("cron (PID 12)".into(), 40_000_000),
            ],
            processes_ns: 1_000_000_000,
            softirq_ns: Some(20_000_000),
        });
        let v = judge(&evidence(vec![p.clone()]));
        assert_eq!(
            v.line(),
            "suspect: 1.3 s of CPU outside the run (32 % of the CPUs): stress-ng-cpu (PID 4321) \
             900 ms during join"
        );
        // Nobody past the rule alone: the largest two, with their figures.
        let takers = p.outside_takers.as_mut().unwrap();
        takers.processes = vec![
            ("a (PID 1)".into(), 300_000_000),
            ("b (PID 2)".into(), 300_000_000),
            ("c (PID 3)".into(), 300_000_000),
        ];
        takers.processes_ns = 900_000_000;
        takers.softirq_ns = None;
        let v = judge(&evidence(vec![p.clone()]));
        assert_eq!(
            v.line(),
            "suspect: 1.3 s of CPU outside the run (32 % of the CPUs): other processes together \
             900 ms, unattributed (no process alive at a mark took it: processes that began and \
             ended between two marks unwaited for, kernel work in interrupts) 400 ms during join",
            "the three together are past the rule, and so is what no process took"
        );
        // What no process took is said as unattributed, with its size.
        p.outside_takers.as_mut().unwrap().processes_ns = 0;
        p.outside_takers.as_mut().unwrap().processes.clear();
        let v = judge(&evidence(vec![p.clone()]));
        assert!(
            v.line()
                .contains(": unattributed (no process alive at a mark took it"),
            "{}",
            v.line()
        );
        assert!(v.line().ends_with(") 1.3 s during join"), "{}", v.line());
        // Past 10 % and 100 ms but within the reading's resolution: rounding, no finding.
        let mut small = phase("join", 500); // 10 % = 100 ms
        small.outside_cpu_ns = Some(120_000_000);
        small.outside_cpu_resolution_ns = Some(150_000_000);
        assert!(judge(&evidence(vec![small.clone()])).trustworthy);
        small.outside_cpu_resolution_ns = Some(50_000_000);
        assert!(!judge(&evidence(vec![small])).trustworthy);
    }

    #[test]
    fn each_sentinel_past_its_rule_makes_the_run_suspect_with_its_cause() {
        let mut p = phase("spawn", 4000); // capacity 8 CPU-s
        p.steal_ns = Some(300_000_000); // 3.75 %
        p.outside_cpu_ns = Some(1_200_000_000); // 15 %
        p.reported_to_host_bytes = Some(4 << 30);
        p.first_used_bytes = Some(19 * (128 << 20));
        p.futex_wakes = Some(412);
        p.futex_waiters_walked = Some(412 * 51_234);
        let v = judge(&evidence(vec![p]));
        assert!(!v.trustworthy);
        let rules: Vec<&str> = v.findings.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(
            rules,
            [
                "steal",
                "outside_cpu",
                "first_use",
                "page_reporting",
                "futex_walk"
            ]
        );
        assert_eq!(
            v.line(),
            "suspect: 300 ms stolen by the hypervisor (4 % of the CPUs) during spawn; \
             1.2 s of CPU used by other programs' tasks (15 % of the CPUs) during spawn; \
             2.4 GiB of memory used for the first time since boot during spawn; \
             4.0 GiB handed back to the host during spawn; \
             412 futex wakes walked past 51,234 waiters of other futexes each during spawn"
        );
        assert_eq!(
            v.cause_ids(),
            "steal, outside_cpu, first_use, page_reporting, futex_walk"
        );
    }

    #[test]
    fn just_under_each_threshold_is_clean() {
        let mut p = phase("spawn", 4000);
        p.steal_ns = Some(150_000_000); // 1.9 %
        p.outside_cpu_ns = Some(790_000_000); // 9.9 %
        p.reported_to_host_bytes = Some((1 << 30) - 1);
        p.first_used_bytes = Some((64 << 20) - 1);
        p.reclaim_ns = Some(9_000_000);
        p.thp_events = Some(511);
        p.freq_khz = Some((3_000_000, 3_200_000));
        p.futex_wakes = Some(1000);
        p.futex_waiters_walked = Some(999_000);
        assert!(judge(&evidence(vec![p])).trustworthy);
    }

    #[test]
    fn reclaim_counts_without_times_still_flag() {
        let mut p = phase("spawn", 4000);
        p.reclaim_ns = None;
        p.direct_reclaim_stalls = Some(3);
        let v = judge(&evidence(vec![p]));
        assert_eq!(v.findings[0].found, "3 direct reclaim stalls");
    }

    #[test]
    fn a_sentinel_missing_in_every_phase_is_not_checked_never_clean() {
        let mut p = phase("spawn", 4000);
        p.steal_ns = None;
        let v = judge(&evidence(vec![p]));
        assert!(v.not_checked.contains(&"steal".to_string()));
        // Present in a phase too short to judge: still not checked.
        let mut short = phase("startup", 2);
        short.balloon_change_bytes = Some(1 << 30);
        let v = judge(&evidence(vec![short, phase("spawn", 4000)]));
        assert!(v.trustworthy);
        assert!(v.not_checked.contains(&"balloon".to_string()));
    }

    #[test]
    fn every_rule_has_words() {
        for r in RULES {
            assert_eq!(rule_text(r.id), Some(r.rule));
        }
    }

    use crate::test_support::{collector_report as collector, metric};

    fn sentinels(names: &[&str]) -> SentinelFigures {
        SentinelFigures {
            per_phase: names
                .iter()
                .map(|n| crate::time::sentinels::PhaseSentinels {
                    name: n.to_string(),
                    wall_ns: 4_000_000_000,
                    steal_ns: Some(0),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn direct_and_cgroup_reclaim_both_reach_the_reclaim_rule() {
        let phases = ["startup", "spawn"].map(String::from);
        let direct_only = collector(vec![metric("machine_direct_reclaim_ns", 0, &[30_000_000])]);
        let k = KernelCounts::from_report(&direct_only, &phases);
        assert_eq!(k.phases[1].reclaim_ns, Some(30_000_000));
        let both = collector(vec![
            metric("machine_direct_reclaim_ns", 0, &[4_000_000]),
            metric("machine_cgroup_reclaim_ns", 0, &[8_000_000]),
        ]);
        let k = KernelCounts::from_report(&both, &phases);
        assert_eq!(k.phases[1].reclaim_ns, Some(12_000_000));
        let v = judge(&super::evidence(&sentinels(&["startup", "spawn"]), &k, 2));
        assert_eq!(v.findings[0].rule, "reclaim");
        // Neither counted: not available, never 0.
        let k = KernelCounts::from_report(&collector(vec![]), &phases);
        assert_eq!(k.phases[1].reclaim_ns, None);
    }

    #[test]
    fn a_run_without_phases_takes_the_kernel_counts_of_its_one_slot() {
        // A command: the sentinels' one window is "run", the collector's one slot "startup".
        let report = collector(vec![
            metric("outside_oncpu_ns", 3_000_000_000, &[]),
            metric("futex_private_wakes", 100, &[]),
            metric("futex_wake_walked_others", 500_000, &[]),
        ]);
        let k = KernelCounts::from_report(&report, &["startup".to_string()]);
        let e = super::evidence(&sentinels(&["run"]), &k, 2);
        assert_eq!(e.phases[0].outside_cpu_ns, Some(3_000_000_000));
        assert_eq!(e.phases[0].futex_waiters_walked, Some(500_000));
        let rules: Vec<String> = judge(&e).findings.into_iter().map(|f| f.rule).collect();
        assert_eq!(rules, ["outside_cpu", "futex_walk"]);
    }

    #[test]
    fn a_run_held_to_k_cpus_is_judged_on_the_sentinels_reading_of_those_cpus() {
        // The probes saw 3 s of other programs on the whole machine; over the run's one CPU the
        // sentinels read 10 ms: the machine's other CPU is not the run's business.
        let report = collector(vec![metric("outside_oncpu_ns", 0, &[3_000_000_000])]);
        let phases = ["startup", "spawn"].map(String::from);
        let mut s = sentinels(&["startup", "spawn"]);
        s.per_phase[1].outside_cpu_ns = Some(10_000_000);
        let k = KernelCounts::from_report(&report, &phases);
        let machine_wide = super::evidence(&s, &k, 1);
        assert_eq!(machine_wide.phases[1].outside_cpu_ns, Some(3_000_000_000));
        assert!(!judge(&machine_wide).trustworthy);
        let held = super::evidence(&s, &k.without_outside_cpu(), 1);
        assert_eq!(held.phases[1].outside_cpu_ns, Some(10_000_000));
        assert!(judge(&held).trustworthy, "{:?}", judge(&held).findings);
    }

    #[test]
    fn kernel_threads_cpu_is_told_apart_and_not_judged_as_other_programs() {
        // An exit where kworkers and RCU freed the run's stacks: 0.9 s of kernel threads among
        // 1.0 s outside, in a 4 s phase on 2 CPUs (12.5 % in all, 1.25 % other programs).
        let phases = ["startup", "exit"].map(String::from);
        let report = collector(vec![
            metric("outside_oncpu_ns", 0, &[1_000_000_000]),
            metric("outside_kthread_oncpu_ns", 0, &[900_000_000]),
        ]);
        let k = KernelCounts::from_report(&report, &phases);
        let e = super::evidence(&sentinels(&["startup", "exit"]), &k, 2);
        assert_eq!(e.phases[1].outside_cpu_ns, Some(100_000_000));
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, Some(900_000_000));
        assert!(judge(&e).trustworthy, "{:?}", judge(&e).findings);
        // A collector from before the split counted them all as outside: judged as before.
        let old = collector(vec![metric("outside_oncpu_ns", 0, &[1_000_000_000])]);
        let e = super::evidence(
            &sentinels(&["startup", "exit"]),
            &KernelCounts::from_report(&old, &phases),
            2,
        );
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, None);
        assert_eq!(judge(&e).findings[0].rule, "outside_cpu");
        // Other programs past the rule are still found with kernel threads told apart.
        let busy = collector(vec![
            metric("outside_oncpu_ns", 0, &[2_000_000_000]),
            metric("outside_kthread_oncpu_ns", 0, &[900_000_000]),
        ]);
        let e = super::evidence(
            &sentinels(&["startup", "exit"]),
            &KernelCounts::from_report(&busy, &phases),
            2,
        );
        assert_eq!(e.phases[1].outside_cpu_ns, Some(1_100_000_000));
        assert_eq!(judge(&e).findings[0].rule, "outside_cpu");
    }

    #[test]
    fn an_untraced_run_tells_kernel_threads_apart_by_their_proc_times() {
        // A threads exit of 2 s on 2 CPUs (capacity 4 CPU-s; the rule's 10 % is 400 ms), with
        // 700 ms outside the run by /proc/stat and no collector.
        let untraced = |kthreads_ms: Option<u64>| {
            let mut s = sentinels(&["startup", "exit"]);
            let exit = &mut s.per_phase[1];
            exit.wall_ns = 2_000_000_000;
            exit.outside_cpu_ns = Some(700_000_000);
            exit.kernel_threads_cpu_ns = kthreads_ms.map(|ms| ms * 1_000_000);
            super::evidence(&s, &KernelCounts::default(), 2)
        };
        // 650 ms of it kworkers and RCU freeing the threads: 50 ms of other programs, clean.
        let e = untraced(Some(650));
        assert_eq!(e.phases[1].outside_cpu_ns, Some(50_000_000));
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, Some(650_000_000));
        assert!(judge(&e).trustworthy, "{:?}", judge(&e).findings);
        // 100 ms of kernel threads: 600 ms of other programs is still past the rule.
        let v = judge(&untraced(Some(100)));
        assert_eq!(v.cause_ids(), "outside_cpu");
        assert_eq!(v.findings[0].phase, "exit");
        assert!(v.findings[0]
            .found
            .starts_with("600 ms of CPU used by other programs' tasks"));
        // A record without their /proc times (older, or held to K CPUs): judged as before.
        let e = untraced(None);
        assert_eq!(e.phases[1].outside_cpu_ns, Some(700_000_000));
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, None);
        assert!(!judge(&e).trustworthy);
        // More kernel-thread ticks than busy ticks outside (both rounded to ticks): none left,
        // and the kernel threads' share is at most the whole.
        let e = untraced(Some(710));
        assert_eq!(e.phases[1].outside_cpu_ns, Some(0));
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, Some(700_000_000));
    }

    #[test]
    fn the_collector_s_counts_win_over_the_sentinels_proc_times() {
        // Traced: the collector saw 1.0 s outside, 0.2 s of it kernel threads; the sentinels'
        // /proc times said 0.9 s. The collector's pair judges, never mixed with the sentinels'.
        let phases = ["startup", "exit"].map(String::from);
        let report = collector(vec![
            metric("outside_oncpu_ns", 0, &[1_000_000_000]),
            metric("outside_kthread_oncpu_ns", 0, &[200_000_000]),
        ]);
        let mut s = sentinels(&["startup", "exit"]);
        s.per_phase[1].outside_cpu_ns = Some(1_000_000_000);
        s.per_phase[1].kernel_threads_cpu_ns = Some(900_000_000);
        let e = super::evidence(&s, &KernelCounts::from_report(&report, &phases), 2);
        assert_eq!(e.phases[1].outside_cpu_ns, Some(800_000_000));
        assert_eq!(e.phases[1].kernel_threads_cpu_ns, Some(200_000_000));
    }
}
