//! Loading and attaching the BPF programs: each probe as tp_btf when the kernel's BTF has it, else
//! as a classic tracepoint, else missing — and when the kernel refuses a program at load or attach
//! time, that probe alone falls back and the object is loaded again (libbpf can only load an
//! object once).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use libbpf_rs::btf::types::Typedef;
use libbpf_rs::btf::Btf;
use libbpf_rs::{Link, MapCore, MapHandle, MapType, Object, ObjectBuilder, PrintLevel};

use crate::config::Config;
use crate::cost;
use crate::layout::cfg as cfg_idx;
use crate::maps::{self, Raw};
use crate::model::{Attach, ProbeStatus, ProgramCost, ProgramRates};
use crate::probes::{self, Probe, ARMING_PROBE, OBJECT, PROBES};
use crate::sizing::{page_size, Sizing};

/// Why nothing could be collected.
#[derive(Debug)]
pub enum Error {
    /// BPF is not available to this process: not root (no CAP_BPF/CAP_PERFMON), no BPF syscall,
    /// or the object could not be loaded at all. The message is libbpf's.
    NoBpf(String),
    /// Some probes load, but not the one that starts the counting (sched_process_exec), so
    /// nothing would be counted.
    Unusable(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoBpf(msg) => write!(f, "BPF not available: {msg}"),
            Error::Unusable(msg) => write!(f, "collector unusable: {msg}"),
        }
    }
}

impl std::error::Error for Error {}

/// The loaded object and its links (dropping a link detaches its program).
pub(crate) struct Loaded {
    obj: Object,
    links: Vec<Link>,
    pub probes: Vec<ProbeStatus>,
    pub sizing: Sizing,
    pub kernel: Kernel,
}

/// What the kernel offers the wait figures, found once before loading.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    /// Kernel BTF, so task local storage: the start of each wait, per task.
    pub task_storage: bool,
    /// `mm_struct.futex_phash` exists (6.16+): a process's own futex hash, whose buckets a wake
    /// walks.
    pub futex_phash: bool,
    /// flush_tlb_func's address (/proc/kallsyms, root), 0 when not known: which IPIs are TLB
    /// shootdowns.
    pub tlb_func: u64,
    /// Longs in a cpumask (nr_cpu_ids / 64, rounded up).
    pub cpu_words: u64,
    /// Whether the trace's records are emitted: asked for (Config::trace) and the kernel makes
    /// BPF ring buffers (5.8+); Err says why not.
    pub trace: Result<(), String>,
}

impl Loaded {
    pub fn set_phase_slot(&self, slot: u32) -> Result<(), String> {
        maps::set_phase_slot(&self.obj, slot)
    }

    /// The trace's ring buffer, for its consumer (a descriptor of its own).
    pub fn trace_ring(&self) -> Result<MapHandle, String> {
        let map = self
            .obj
            .maps()
            .find(|m| m.name() == "trace_events")
            .ok_or("no map trace_events in the object")?;
        MapHandle::try_from(&map).map_err(|err| format!("the ring buffer's descriptor: {err}"))
    }

    /// Each loaded program's counts so far (the kernel's run-time statistics).
    pub fn program_totals(&self) -> Result<Vec<cost::ProgramTotals>, String> {
        cost::program_totals(&self.obj)
    }

    /// Detaches every program, then reads the maps and what each program cost (at `rates` where
    /// the kernel timed none of its runs).
    pub fn detach_and_read(
        self,
        finished_ns: u64,
        rates: Option<&ProgramRates>,
    ) -> (Raw, Vec<String>, Vec<ProgramCost>) {
        let Loaded {
            obj, links, sizing, ..
        } = self;
        drop(links);
        let (raw, mut errors) = maps::read(&obj, &sizing, finished_ns);
        let (costs, cost_errors) =
            cost::read_programs(&obj, &raw.prog_runs, &raw.prog_filtered, rates);
        errors.extend(cost_errors);
        (raw, errors, costs)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Use {
    Btf,
    Classic,
    Missing,
    /// Not asked for (Config::net_syscalls off): not loaded, and not listed in the report.
    NotAsked,
}

/// What one probe will be loaded as, and the story of how it got there.
#[derive(Clone, Debug)]
struct Plan {
    using: Use,
    notes: Vec<String>,
}

/// One load at a time in a process: libbpf's log callback is global.
static LOAD_LOCK: Mutex<()> = Mutex::new(());
/// libbpf's warnings during the current attempt.
static LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn capture(level: PrintLevel, msg: String) {
    if std::env::var_os("SPAWNSCOPE_COLLECTOR_DEBUG").is_some() {
        eprint!("libbpf: {msg}");
    }
    if matches!(level, PrintLevel::Warn) {
        LOG.lock().unwrap_or_else(|e| e.into_inner()).push(msg);
    }
}

pub(crate) fn load(cfg: &Config) -> Result<Loaded, Error> {
    let _one_at_a_time = LOAD_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let level = if std::env::var_os("SPAWNSCOPE_COLLECTOR_DEBUG").is_some() {
        PrintLevel::Debug
    } else {
        PrintLevel::Warn
    };
    let previous = libbpf_rs::set_print(Some((level, capture)));
    let result = load_with_fallbacks(cfg);
    libbpf_rs::set_print(previous);
    result
}

fn load_with_fallbacks(cfg: &Config) -> Result<Loaded, Error> {
    let sizing = Sizing::of(cfg);
    let kernel_btf = if cfg.classic_only {
        Err("classic tracepoints asked for (classic_only)".to_string())
    } else {
        Btf::from_vmlinux().map_err(|err| format!("no kernel BTF ({err})"))
    };
    let tracefs = probes::tracefs_root();
    let kernel = Kernel {
        task_storage: kernel_btf.is_ok(),
        futex_phash: kernel_btf.as_ref().is_ok_and(has_futex_phash),
        tlb_func: kallsyms_address("flush_tlb_func").unwrap_or(0),
        cpu_words: possible_cpus().div_ceil(64).max(1),
        trace: match cfg.trace {
            Some(_) if cfg.hide_ring_buffers => {
                Err(format!("{HIDDEN_RING} (hidden: Config::hide_ring_buffers)"))
            }
            Some(_) => ring_buffers(),
            None => Err("not asked for".into()),
        },
    };
    let mut plans: Vec<Plan> = PROBES
        .iter()
        .map(|p| {
            let left_out = cfg
                .only_tracepoints
                .as_ref()
                .is_some_and(|only| p.id() != ARMING_PROBE && !only.iter().any(|t| t == p.id()));
            if left_out || (p.net_only && !cfg.net_syscalls) {
                return Plan {
                    using: Use::NotAsked,
                    notes: Vec::new(),
                };
            }
            if p.trace_only && cfg.trace.is_none() {
                return Plan {
                    using: Use::NotAsked,
                    notes: Vec::new(),
                };
            }
            if let (true, Err(why)) = (p.trace_only, &kernel.trace) {
                return Plan {
                    using: Use::Missing,
                    notes: vec![format!("the trace's ring buffer: {why}")],
                };
            }
            if p.per_thread_only && !cfg.per_thread {
                return Plan {
                    using: Use::Missing,
                    notes: vec![PER_THREAD_ONLY.to_string()],
                };
            }
            if cfg.hide_tracepoint.as_deref() == Some(p.id()) {
                return Plan {
                    using: Use::Missing,
                    notes: vec![HIDDEN.to_string()],
                };
            }
            first_plan(p, kernel_btf.as_ref(), tracefs.as_deref())
        })
        .collect();
    // Without kernel BTF libbpf refuses any object with CO-RE relocations, even when only the
    // classic programs (which have none) are loaded; it is satisfied by a BTF of our own: the
    // object's, whose types are never used since no tp_btf program is loaded.
    let own_btf = match kernel_btf {
        Ok(_) => None,
        Err(_) => Some(TempObject::write().map_err(Error::NoBpf)?),
    };
    for _attempt in 0..=2 * PROBES.len() {
        let arming = PROBES.iter().position(|p| p.id() == ARMING_PROBE).unwrap();
        if plans[arming].using == Use::Missing {
            return Err(Error::Unusable(format!(
                "{} cannot be loaded: {}",
                PROBES[arming].id(),
                plans[arming].notes.join("; ")
            )));
        }
        match attempt(
            cfg,
            &sizing,
            &kernel,
            &plans,
            own_btf.as_ref().map(|t| t.path.as_path()),
        ) {
            Ok((obj, links)) => {
                return Ok(Loaded {
                    obj,
                    links,
                    probes: statuses(&plans),
                    sizing,
                    kernel,
                })
            }
            Err(Failure::Fatal(msg)) => return Err(Error::NoBpf(msg)),
            Err(Failure::Programs(blamed)) => {
                let mut progressed = false;
                for (prog, reason) in &blamed {
                    let refused = PROBES.iter().zip(&plans).position(|(p, plan)| {
                        (plan.using == Use::Btf && *prog == p.btf_prog())
                            || (plan.using == Use::Classic && *prog == p.tp_prog())
                    });
                    if let Some(i) = refused {
                        plans[i] = fall_back(&PROBES[i], &plans[i], reason, tracefs.as_deref());
                        progressed = true;
                    }
                }
                if !progressed {
                    let said: Vec<String> =
                        blamed.iter().map(|(p, r)| format!("{p}: {r}")).collect();
                    return Err(Error::NoBpf(said.join("; ")));
                }
            }
        }
    }
    Err(Error::NoBpf(
        "too many failed attempts to load the probes".into(),
    ))
}

/// Why a probe hidden by the test seams (Config::hide_tracepoint, hide_ring_buffers) is missing.
const HIDDEN: &str = "hidden (Config::hide_tracepoint): as on a kernel without this tracepoint";
const HIDDEN_RING: &str = "this kernel makes no BPF ring buffer";

/// Whether this kernel makes BPF ring buffers (5.8+): one page's, made and dropped.
fn ring_buffers() -> Result<(), String> {
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    MapHandle::create(
        MapType::RingBuf,
        None::<&str>,
        0,
        0,
        page_size() as u32,
        &opts,
    )
    .map(drop)
    .map_err(|err| format!("{HIDDEN_RING} ({err})"))
}

/// Why a probe that serves only per-thread figures is not attached.
pub const PER_THREAD_ONLY: &str =
    "left out: it serves per-thread figures only, which are off (Config::per_thread; spawnscope run --probes full)";

fn first_plan(probe: &Probe, kernel_btf: Result<&Btf, &String>, tracefs: Option<&Path>) -> Plan {
    let mut notes = Vec::new();
    if probe.btf {
        match kernel_btf {
            Ok(btf) => {
                let target = format!("btf_trace_{}", probe.name());
                if btf.type_by_name::<Typedef<'_>>(&target).is_some() {
                    return Plan {
                        using: Use::Btf,
                        notes,
                    };
                }
                notes.push(format!("tp_btf: kernel BTF has no {target}"));
            }
            Err(why) => notes.push(format!("tp_btf: {why}")),
        }
    }
    classic_or_missing(probe, notes, tracefs)
}

/// The classic tracepoint when this kernel's record layout matches the program's, else missing.
fn classic_or_missing(probe: &Probe, mut notes: Vec<String>, tracefs: Option<&Path>) -> Plan {
    if !probe.classic {
        notes.push("tracepoint: no classic program (its figures need task storage, so BTF)".into());
        return Plan {
            using: Use::Missing,
            notes,
        };
    }
    match probes::check_classic(tracefs, probe) {
        Ok(()) => Plan {
            using: Use::Classic,
            notes,
        },
        Err(why) => {
            notes.push(format!("tracepoint: {why}"));
            Plan {
                using: Use::Missing,
                notes,
            }
        }
    }
}

/// The next step down for a probe whose program the kernel refused.
fn fall_back(probe: &Probe, plan: &Plan, reason: &str, tracefs: Option<&Path>) -> Plan {
    let mut notes = plan.notes.clone();
    match plan.using {
        Use::Btf => {
            notes.push(format!("tp_btf: {reason}"));
            classic_or_missing(probe, notes, tracefs)
        }
        Use::Classic | Use::Missing | Use::NotAsked => {
            notes.push(format!("tracepoint: {reason}"));
            Plan {
                using: Use::Missing,
                notes,
            }
        }
    }
}

fn statuses(plans: &[Plan]) -> Vec<ProbeStatus> {
    PROBES
        .iter()
        .zip(plans)
        .filter(|(_, plan)| plan.using != Use::NotAsked)
        .map(|(probe, plan)| ProbeStatus {
            probe: probe.id().to_string(),
            attach: match plan.using {
                Use::Btf => Some(Attach::TpBtf),
                Use::Classic => Some(Attach::Tracepoint),
                Use::Missing | Use::NotAsked => None,
            },
            note: (!plan.notes.is_empty()).then(|| plan.notes.join("; ")),
        })
        .collect()
}

enum Failure {
    /// These programs were refused (name, why): fall back on them and try again.
    Programs(Vec<(String, String)>),
    /// Nothing to fall back on (no permission, no BPF, a map the kernel will not create).
    Fatal(String),
}

fn attempt(
    cfg: &Config,
    sizing: &Sizing,
    kernel: &Kernel,
    plans: &[Plan],
    own_btf: Option<&Path>,
) -> Result<(Object, Vec<Link>), Failure> {
    LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let mut builder = ObjectBuilder::default();
    if let Some(path) = own_btf {
        builder
            .btf_custom_path(path)
            .map_err(|err| Failure::Fatal(err.to_string()))?;
    }
    let mut open = builder
        .open_memory(OBJECT)
        .map_err(|err| Failure::Fatal(format!("opening the BPF object: {err}")))?;

    let mut wanted = 0;
    for mut prog in open.progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let load = PROBES.iter().zip(plans).any(|(probe, plan)| {
            (plan.using == Use::Btf && name == probe.btf_prog())
                || (plan.using == Use::Classic && name == probe.tp_prog())
        });
        prog.set_autoload(load);
        wanted += load as usize;
        if load && cfg.refuse_btf_for.as_ref().map(|tp| format!("btf_{tp}")) == Some(name) {
            // The kernel refuses sleepable tp_btf programs at load time.
            const BPF_F_SLEEPABLE: u32 = 1 << 4;
            prog.set_flags(BPF_F_SLEEPABLE);
        }
    }
    if wanted == 0 {
        return Err(Failure::Fatal(
            "no probe can be loaded on this kernel".into(),
        ));
    }
    for mut map in open.maps_mut() {
        let name = map.name().to_string_lossy().into_owned();
        let sized = match name.as_str() {
            "series" | "rss" => map.set_max_entries(sizing.buckets),
            "tasks" => map.set_max_entries(sizing.tasks),
            "nv_by_tid" => map.set_max_entries(sizing.nv_slots),
            "run_tgids" => map.set_max_entries(sizing.run_processes),
            // Without the trace its emission sits behind cfg SC_CFG_TRACE = 0, which the
            // verifier prunes; where the kernel has no ring buffers the map is not made at all
            // (libbpf poisons the pruned references to it).
            "trace_events" => match kernel.trace {
                Ok(()) => map.set_max_entries(sizing.ring_bytes),
                Err(_) if cfg.trace.is_some() => map.set_autocreate(false),
                Err(_) => map.set_max_entries(page_size() as u32),
            },
            // Without kernel BTF the kernel cannot make task storage: the programs' uses of it
            // sit behind cfg SC_CFG_TASK_STORAGE = 0, which the verifier prunes.
            "waits_by_tid" => map.set_max_entries(if kernel.task_storage {
                sizing.wait_slots
            } else {
                1
            }),
            ".rodata.cfg" => {
                let words = config_words(cfg, sizing, kernel);
                let bytes = map
                    .initial_value_mut()
                    .filter(|b| b.len() == words.len() * 8)
                    .ok_or_else(|| Failure::Fatal(".rodata.cfg has an unexpected size".into()))?;
                for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
                    chunk.copy_from_slice(&word.to_ne_bytes());
                }
                Ok(())
            }
            _ => Ok(()),
        };
        sized.map_err(|err| Failure::Fatal(format!("sizing map {name}: {err}")))?;
    }

    let obj = match open.load() {
        Ok(obj) => obj,
        Err(err) => return Err(blame(&err.to_string())),
    };
    let mut links = Vec::new();
    for prog in obj.progs_mut() {
        if !prog.autoload() {
            continue;
        }
        match prog.attach() {
            Ok(link) => links.push(link),
            Err(err) => {
                let name = prog.name().to_string_lossy().into_owned();
                return Err(Failure::Programs(vec![(name, format!("attach: {err}"))]));
            }
        }
    }
    Ok((obj, links))
}

/// The programs libbpf's warnings name as refused, each with a short reason.
fn blame(error: &str) -> Failure {
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let blamed = blame_in_log(&log);
    if blamed.is_empty() {
        let tail: Vec<&str> = log.iter().rev().take(4).rev().map(|l| l.trim()).collect();
        Failure::Fatal(format!("{error}: {}", tail.join(" | ")))
    } else {
        Failure::Programs(blamed)
    }
}

/// `libbpf: prog 'NAME': <what>` lines (a verifier log arrives as one multi-line message): the
/// first thing said about each program, plus the verifier's last word when there is one.
pub(crate) fn blame_in_log(log: &[String]) -> Vec<(String, String)> {
    let mut blamed: Vec<(String, String)> = Vec::new();
    for msg in log {
        let Some(start) = msg.find("prog '") else {
            continue;
        };
        let rest = &msg[start + 6..];
        let Some(end) = rest.find('\'') else {
            continue;
        };
        let name = rest[..end].to_string();
        let said = rest[end + 1..].trim_start_matches(':').trim();
        let said = if said.contains("BEGIN PROG LOAD LOG") {
            let lines: Vec<&str> = said
                .lines()
                .map(str::trim)
                .filter(|l| {
                    !l.is_empty() && !l.contains("PROG LOAD LOG") && !l.starts_with("processed ")
                })
                .collect();
            let last = &lines[lines.len().saturating_sub(2)..];
            format!("verifier: {}", last.join(" / "))
        } else {
            said.lines().next().unwrap_or("").to_string()
        };
        match blamed.iter_mut().find(|(n, _)| *n == name) {
            Some((_, reason)) if said.starts_with("verifier:") => {
                reason.push_str(" (");
                reason.push_str(&said);
                reason.push(')');
            }
            Some(_) => {}
            None => blamed.push((name, said)),
        }
    }
    for (_, reason) in &mut blamed {
        if reason.len() > 400 {
            let mut cut = 400;
            while !reason.is_char_boundary(cut) {
                cut -= 1;
            }
            reason.truncate(cut);
        }
    }
    blamed
}

fn config_words(cfg: &Config, sizing: &Sizing, kernel: &Kernel) -> Vec<u64> {
    let mut words = vec![0u64; cfg_idx::NR];
    words[cfg_idx::TGID] = cfg.target_pid as u64;
    words[cfg_idx::BUCKET_NS] = sizing.bucket_ns;
    words[cfg_idx::NR_BUCKETS] = sizing.buckets as u64;
    words[cfg_idx::FAULT_KINDS] = cfg.fault_kinds as u64;
    words[cfg_idx::PAGE_SIZE] = page_size();
    words[cfg_idx::PHASES_FROM_STDOUT] = cfg.phases_from_stdout as u64;
    words[cfg_idx::PER_THREAD] = cfg.per_thread as u64;
    words[cfg_idx::TASK_STORAGE] = kernel.task_storage as u64;
    words[cfg_idx::SELF_TGID] = std::process::id() as u64;
    words[cfg_idx::NS_PER_JIFFY] = crate::clock::ns_per_jiffy().unwrap_or(0);
    words[cfg_idx::TLB_FUNC] = kernel.tlb_func;
    words[cfg_idx::CPU_WORDS] = kernel.cpu_words;
    words[cfg_idx::WAIT_SLOTS] = if kernel.task_storage {
        sizing.wait_slots as u64
    } else {
        1
    };
    words[cfg_idx::CGROUP_ID] = cfg.run_cgroup_id.unwrap_or(0);
    words[cfg_idx::TRACE] = if kernel.trace.is_ok() {
        sizing.ring_bytes as u64
    } else {
        0
    };
    words
}

/// Whether the kernel has a process's own futex hash (6.16+: `struct futex_private_hash`, the
/// type of mm_struct's `futex_phash`; the program checks the field itself through CO-RE).
fn has_futex_phash(btf: &Btf) -> bool {
    use libbpf_rs::btf::types::Struct;
    btf.type_by_name::<Struct<'_>>("futex_private_hash")
        .is_some()
}

/// A kernel symbol's address from /proc/kallsyms (zeros without root or with kptr_restrict).
fn kallsyms_address(symbol: &str) -> Option<u64> {
    let text = fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        let (addr, _kind, name) = (parts.next()?, parts.next()?, parts.next()?);
        (name == symbol)
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
            .filter(|&a| a != 0)
    })
}

/// CPUs the kernel may ever have (nr_cpu_ids): the highest in /sys/devices/system/cpu/possible + 1.
fn possible_cpus() -> u64 {
    fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| {
            s.trim()
                .split([',', '-'])
                .filter_map(|n| n.parse::<u64>().ok())
                .max()
        })
        .map_or(1024, |max| max + 1)
}

/// The embedded object written to a file, for libbpf's btf_custom_path; removed when dropped.
struct TempObject {
    path: PathBuf,
}

impl TempObject {
    fn write() -> Result<TempObject, String> {
        let path =
            std::env::temp_dir().join(format!("spawnscope-collector-{}.bpf.o", std::process::id()));
        fs::write(&path, OBJECT).map_err(|err| format!("writing {}: {err}", path.display()))?;
        Ok(TempObject { path })
    }
}

impl Drop for TempObject {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verifier_log_and_the_first_word_make_the_reason() {
        let log = vec![
            "libbpf: prog 'btf_sched_switch': BPF program load failed: Permission denied\n".into(),
            "libbpf: prog 'btf_sched_switch': -- BEGIN PROG LOAD LOG --\n0: R1=ctx()\n\
             1: (79) r2 = *(u64 *)(r1 +8)\ninvalid bpf_context access off=8 size=8\n\
             processed 2 insns\n-- END PROG LOAD LOG --\n"
                .into(),
            "libbpf: prog 'btf_sched_switch': failed to load: -13\n".into(),
            "libbpf: failed to load object 'collector'\n".into(),
        ];
        let blamed = blame_in_log(&log);
        assert_eq!(blamed.len(), 1);
        assert_eq!(blamed[0].0, "btf_sched_switch");
        assert_eq!(
            blamed[0].1,
            "BPF program load failed: Permission denied (verifier: \
             1: (79) r2 = *(u64 *)(r1 +8) / invalid bpf_context access off=8 size=8)"
        );
    }

    #[test]
    fn a_log_naming_no_program_blames_nobody() {
        let log = vec![
            "libbpf: Error in bpf_create_map_xattr(tasks): Operation not permitted(-1)\n".into(),
        ];
        assert!(blame_in_log(&log).is_empty());
    }
}
