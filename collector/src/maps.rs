//! The maps, raw: every value is an array of u64 laid out as probes/collector.h says. Read once
//! at the end (per-CPU maps summed over CPUs) into [`Raw`]; written only to switch the phase.

use libbpf_rs::{Map, MapCore, MapFlags, Object};

use crate::layout::{
    counter, ctl, cut, faddr, fbucket, hist, prog, rss, series, state, sys, trace_cpu,
};
use crate::layout::{CUT_EPOCHS, ERRNO_SLOTS, FUTEX_BUCKETS, HIST_SLOTS, PHASE_SLOTS};
use crate::sizing::Sizing;

/// The maps' contents, as plain numbers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Raw {
    /// [phase slot][counter]
    pub phase: Vec<Vec<u64>>,
    /// [getrusage epoch][cut counter]
    pub cut: Vec<Vec<u64>>,
    /// [time bucket][series counter], only the buckets up to the end of the run
    pub series: Vec<Vec<u64>>,
    /// [time bucket][rss member]: bytes + 1, 0 = no change seen in the bucket
    pub rss: Vec<Vec<u64>>,
    /// [histogram][slot]
    pub hists: Vec<Vec<u64>>,
    /// [syscall kind][errno]
    pub errnos: Vec<Vec<u64>>,
    /// [state word]
    pub state: Vec<u64>,
    /// [phase event]: when the kernel saw it written
    pub phase_seen_ns: Vec<u64>,
    /// Entries still in the per-thread map (threads alive at the end).
    pub tasks_left: u64,
    /// [bucket][fbucket word] of the target's private futex hash, the buckets ever used only.
    pub futex_buckets: Vec<(u32, Vec<u64>)>,
    /// (futex address, [faddr word]).
    pub futex_addrs: Vec<(u64, Vec<u64>)>,
    /// [enum sc_prog]: how often each tracepoint's program ran, counted by the program.
    pub prog_runs: Vec<u64>,
    /// [enum sc_prog]: of those, the runs that were another task's, filtered out (the programs
    /// that count them: the raw_syscalls pair), counted by the program.
    pub prog_filtered: Vec<u64>,
    /// [enum sc_trace_cpu], summed over CPUs: the trace's records emitted and lost.
    pub trace_cpu: Vec<u64>,
}

impl Raw {
    /// All zeros, shaped like a real read of `buckets` buckets.
    pub fn zeroed(buckets: usize) -> Raw {
        Raw {
            phase: vec![vec![0; counter::NR]; PHASE_SLOTS],
            cut: vec![vec![0; cut::NR]; CUT_EPOCHS],
            series: vec![vec![0; series::NR]; buckets],
            rss: vec![vec![0; rss::NR]; buckets],
            hists: vec![vec![0; HIST_SLOTS]; hist::NR],
            errnos: vec![vec![0; ERRNO_SLOTS]; sys::NR],
            state: vec![0; state::NR],
            phase_seen_ns: vec![0; PHASE_SLOTS],
            tasks_left: 0,
            futex_buckets: Vec::new(),
            futex_addrs: Vec::new(),
            prog_runs: vec![0; prog::NR],
            prog_filtered: vec![0; prog::NR],
            trace_cpu: vec![0; trace_cpu::NR],
        }
    }
}

/// Switches the kernel side's counters to phase slot `slot` (the `.data.ctl` word).
pub(crate) fn set_phase_slot(obj: &Object, slot: u32) -> Result<(), String> {
    let map = map(obj, ".data.ctl")?;
    let mut value = vec![0u8; map.value_size() as usize];
    let at = ctl::PHASE_SLOT * 8;
    value[at..at + 8].copy_from_slice(&(slot as u64).to_ne_bytes());
    map.update(&0u32.to_ne_bytes(), &value, MapFlags::ANY)
        .map_err(|err| err.to_string())
}

/// The map called `name` (internal maps are called by their section, e.g. `.data.state`).
fn map<'a>(obj: &'a Object, name: &str) -> Result<Map<'a>, String> {
    obj.maps()
        .find(|m| m.name() == name)
        .ok_or_else(|| format!("no map {name} in the object"))
}

/// Every map's contents, and what could not be read.
pub(crate) fn read(obj: &Object, sizing: &Sizing, finished_ns: u64) -> (Raw, Vec<String>) {
    let mut errors = Vec::new();
    let mut raw = Raw::zeroed(0);
    let mut keep = |result: Result<(), String>| {
        if let Err(err) = result {
            errors.push(err);
        }
    };
    keep(plain(obj, ".data.state", 0, state::NR).map(|w| raw.state = w));
    keep(plain(obj, ".data.phases", 0, PHASE_SLOTS).map(|w| raw.phase_seen_ns = w));
    let t0 = raw.state[state::T0_NS];
    let buckets = if raw.state[state::ARMED] == 0 || finished_ns < t0 {
        0
    } else {
        ((finished_ns - t0) / sizing.bucket_ns + 1).min(sizing.buckets as u64) as u32
    };
    for (slot, row) in raw.phase.iter_mut().enumerate() {
        keep(percpu(obj, "phase_counters", slot as u32, counter::NR).map(|w| *row = w));
    }
    for (epoch, row) in raw.cut.iter_mut().enumerate() {
        keep(percpu(obj, "cut_counters", epoch as u32, cut::NR).map(|w| *row = w));
    }
    for bucket in 0..buckets {
        let mut row = vec![0; series::NR];
        keep(percpu(obj, "series", bucket, series::NR).map(|w| row = w));
        raw.series.push(row);
        let mut row = vec![0; rss::NR];
        keep(plain(obj, "rss", bucket, rss::NR).map(|w| row = w));
        raw.rss.push(row);
    }
    for (h, row) in raw.hists.iter_mut().enumerate() {
        for (slot, count) in row.iter_mut().enumerate() {
            let key = (h * HIST_SLOTS + slot) as u32;
            keep(percpu(obj, "hists", key, 1).map(|w| *count = w[0]));
        }
    }
    for (kind, row) in raw.errnos.iter_mut().enumerate() {
        for (errno, count) in row.iter_mut().enumerate() {
            let key = (kind * ERRNO_SLOTS + errno) as u32;
            keep(plain(obj, "errnos", key, 1).map(|w| *count = w[0]));
        }
    }
    keep(map(obj, "tasks").map(|m| raw.tasks_left = m.keys().count() as u64));
    for bucket in 0..FUTEX_BUCKETS as u32 {
        keep(plain(obj, "futex_buckets", bucket, fbucket::NR).map(|w| {
            if w.iter().any(|&v| v != 0) {
                raw.futex_buckets.push((bucket, w));
            }
        }));
    }
    keep(futex_addrs(obj).map(|a| raw.futex_addrs = a));
    for (p, runs) in raw.prog_runs.iter_mut().enumerate() {
        keep(percpu(obj, "prog_runs", p as u32, 1).map(|w| *runs = w[0]));
    }
    for (p, runs) in raw.prog_filtered.iter_mut().enumerate() {
        keep(percpu(obj, "prog_filtered", p as u32, 1).map(|w| *runs = w[0]));
    }
    keep(percpu(obj, "trace_cpu", 0, trace_cpu::NR).map(|w| raw.trace_cpu = w));
    errors.dedup();
    (raw, errors)
}

/// Every futex address the kernel side followed, with its words.
fn futex_addrs(obj: &Object) -> Result<Vec<(u64, Vec<u64>)>, String> {
    let m = map(obj, "futex_addrs")?;
    let mut out = Vec::new();
    for key in m.keys() {
        let Ok(k) = <[u8; 8]>::try_from(key.as_slice()) else {
            continue;
        };
        if let Ok(Some(v)) = m.lookup(&key, MapFlags::ANY) {
            out.push((u64::from_ne_bytes(k), words(&v, faddr::NR)));
        }
    }
    Ok(out)
}

fn words(bytes: &[u8], n: usize) -> Vec<u64> {
    let mut out: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    out.resize(n, 0);
    out
}

fn plain(obj: &Object, name: &str, key: u32, n: usize) -> Result<Vec<u64>, String> {
    let value = map(obj, name)?
        .lookup(&key.to_ne_bytes(), MapFlags::ANY)
        .map_err(|err| format!("reading {name}[{key}]: {err}"))?;
    Ok(value.map(|v| words(&v, n)).unwrap_or_else(|| vec![0; n]))
}

fn percpu(obj: &Object, name: &str, key: u32, n: usize) -> Result<Vec<u64>, String> {
    let values = map(obj, name)?
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .map_err(|err| format!("reading {name}[{key}]: {err}"))?;
    let mut sum = vec![0u64; n];
    for cpu in values.unwrap_or_default() {
        for (s, w) in sum.iter_mut().zip(words(&cpu, n)) {
            *s = s.wrapping_add(w);
        }
    }
    Ok(sum)
}
