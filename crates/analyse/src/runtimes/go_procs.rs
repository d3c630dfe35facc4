//! The Go runtime's Ps and Ms in a runtime-traced run, from the reducer's P records
//! (record/go_procs.rs): per P, the time an M held it (running Go code or in a syscall) and the
//! time it sat idle, how often it changed hands (a handoff: taken by another M than the one that
//! held it last) and how often it was stolen (taken from an M in a syscall by sysmon or a
//! stop-the-world); per M, the time it held a P, which Ps, and the time it went without one
//! between its first and last P event. The one walk ([`walk`]) also yields the edges the
//! Perfetto trace draws (render/traces/perfetto_procs.rs): a P's slice "M <tid>" while an M holds it, a
//! steal as an instant, and the M's "P" slice on its own thread.

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use serde::{Deserialize, Serialize};

use record::go_procs::{ProcChange, ProcChangeKind, ProcState};

const METHOD: &str = "the Go execution trace's P state changes (x/exp/trace ProcStatus, ProcStart, ProcStop, ProcSteal) reduced by gotrace-reduce to one record each with the M that made it and the M that held the P; a P is held from the change that makes it Running to the one that makes it Idle; a steal is a Running P made Idle by another M than its holder (sysmon's retake or a stop-the-world taking the P of an M in a syscall); times from each P's first record to the trace's last";

/// The Ps and Ms in a run's summary (summary.json's `go_procs`).
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GoProcsFigures {
    pub method: String,
    pub records: u64,
    /// The window the shares are of: the first P record to the trace's last event (ns).
    pub window_ns: u64,
    pub ps: Vec<ProcRow>,
    pub ms: Vec<MRow>,
    /// Ps taken from the M that held them (all Ps).
    pub steals: u64,
    /// Of those, steals whose holder the parser had lost (Idle → Idle).
    pub steals_holder_unknown: u64,
    /// Ps taken by another M than the one that held them last (all Ps).
    pub handoffs: u64,
    pub notes: Vec<String>,
}

/// One P.
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProcRow {
    pub proc: u32,
    /// Held by an M (running Go code, or in a syscall), ns.
    pub held_ns: u64,
    pub idle_ns: u64,
    /// Before its first record: its state unknown (a P first seen later than the window's
    /// start), ns.
    pub unknown_ns: u64,
    /// Times an M took it.
    pub holds: u64,
    /// The distinct Ms that held it.
    pub ms: u64,
    pub handoffs: u64,
    pub steals: u64,
}

/// One M (an OS thread of the runtime).
#[derive(schemars::JsonSchema, Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct MRow {
    pub tid: u32,
    /// Holding a P, ns.
    pub holding_ns: u64,
    /// Between its first and last P event, not holding a P (in a blocked syscall, spinning,
    /// parked, or sysmon), ns.
    pub without_p_ns: u64,
    /// Its first to its last P event, ns.
    pub span_ns: u64,
    /// The Ps it held.
    pub ps: Vec<u32>,
    pub holds: u64,
    /// Ps stolen from it (it was in a syscall); and Ps it stole (sysmon, or a stop-the-world).
    pub stolen_from: u64,
    pub stole: u64,
}

/// One edge of the Perfetto trace's P slices, on CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEdge {
    /// M `m` takes P `proc`.
    Begin { ts_ns: u64, proc: u32, m: u32 },
    /// M `m` no longer holds P `proc`.
    End { ts_ns: u64, proc: u32, m: u32 },
    /// P `proc` taken from `from` by `by`.
    Steal {
        ts_ns: u64,
        proc: u32,
        from: Option<u32>,
        by: Option<u32>,
    },
}

#[derive(Default)]
struct PAcc {
    first: u64,
    held_ns: u64,
    idle_ns: u64,
    /// The state now and since when; the M holding it.
    running: Option<(u32, u64)>,
    idle_since: Option<u64>,
    last_m: Option<u32>,
    holds: u64,
    ms: BTreeSet<u32>,
    handoffs: u64,
    steals: u64,
}

#[derive(Default)]
struct MAcc {
    first: u64,
    last: u64,
    holding_ns: u64,
    ps: BTreeSet<u32>,
    holds: u64,
    stolen_from: u64,
    stole: u64,
}

/// Walks the records once: the figures, and each edge given to `edge` in the records' order
/// (intervals still open at the end are closed at `end_ns`, the trace's last event, or the last
/// record where that is earlier).
pub fn walk(
    changes: impl Iterator<Item = io::Result<ProcChange>>,
    end_ns: u64,
    mut edge: impl FnMut(ProcEdge),
) -> io::Result<GoProcsFigures> {
    let mut ps: BTreeMap<u32, PAcc> = BTreeMap::new();
    let mut ms: BTreeMap<u32, MAcc> = BTreeMap::new();
    let mut records = 0u64;
    let mut first_ns = None;
    let mut last_ns = 0u64;
    let mut steals_holder_unknown = 0;
    let mut notes = Vec::new();
    let touch = |ms: &mut BTreeMap<u32, MAcc>, m: u32, ts: u64| {
        let acc = ms.entry(m).or_insert_with(|| MAcc {
            first: ts,
            ..Default::default()
        });
        acc.last = acc.last.max(ts);
    };
    for c in changes {
        let c = c?;
        records += 1;
        // Time never goes back (the parser's order; a moved time is its own + 1 ns).
        let ts = c.ts_ns.max(last_ns);
        first_ns.get_or_insert(ts);
        last_ns = ts;
        for m in [c.tid, c.holder].into_iter().flatten() {
            touch(&mut ms, m, ts);
        }
        let p = ps.entry(c.proc).or_insert_with(|| PAcc {
            first: ts,
            ..Default::default()
        });
        // Leaving Running: the holder's interval ends.
        if let Some((m, since)) = p.running.take() {
            if c.to != ProcState::Running || c.kind != ProcChangeKind::Status {
                p.held_ns += ts - since;
                let acc = ms
                    .get_mut(&m)
                    .expect("a holder is touched when it takes a P");
                acc.holding_ns += ts - since;
                edge(ProcEdge::End {
                    ts_ns: ts,
                    proc: c.proc,
                    m,
                });
            } else {
                p.running = Some((m, since));
            }
        }
        if let Some(since) = p.idle_since.take() {
            p.idle_ns += ts - since;
        }
        if c.kind == ProcChangeKind::Steal {
            p.steals += 1;
            if c.holder.is_none() {
                steals_holder_unknown += 1;
            }
            if let Some(m) = c.holder {
                ms.get_mut(&m).unwrap().stolen_from += 1;
            }
            if let Some(m) = c.tid {
                ms.get_mut(&m).unwrap().stole += 1;
            }
            edge(ProcEdge::Steal {
                ts_ns: ts,
                proc: c.proc,
                from: c.holder,
                by: c.tid,
            });
        }
        match (c.to, c.tid) {
            (ProcState::Running, Some(m)) if p.running.is_none() => {
                p.running = Some((m, ts));
                p.holds += 1;
                p.ms.insert(m);
                if p.last_m.is_some_and(|last| last != m) {
                    p.handoffs += 1;
                }
                p.last_m = Some(m);
                let acc = ms.get_mut(&m).unwrap();
                acc.ps.insert(c.proc);
                acc.holds += 1;
                edge(ProcEdge::Begin {
                    ts_ns: ts,
                    proc: c.proc,
                    m,
                });
            }
            (ProcState::Running, None) => {
                notes.push(format!("P {} ran with no M at {} ns", c.proc, ts));
            }
            (ProcState::Idle, _) => p.idle_since = Some(ts),
            _ => {}
        }
    }
    let end = end_ns.max(last_ns);
    let Some(start) = first_ns else {
        return Ok(GoProcsFigures {
            method: METHOD.into(),
            records,
            window_ns: 0,
            ps: Vec::new(),
            ms: Vec::new(),
            steals: 0,
            steals_holder_unknown: 0,
            handoffs: 0,
            notes: vec!["the trace holds no P state change".into()],
        });
    };
    let mut rows = Vec::new();
    for (&proc, p) in ps.iter_mut() {
        if let Some((m, since)) = p.running.take() {
            p.held_ns += end - since;
            ms.get_mut(&m).unwrap().holding_ns += end - since;
            ms.get_mut(&m).unwrap().last = end;
            edge(ProcEdge::End {
                ts_ns: end,
                proc,
                m,
            });
        }
        if let Some(since) = p.idle_since.take() {
            p.idle_ns += end - since;
        }
        rows.push(ProcRow {
            proc,
            held_ns: p.held_ns,
            idle_ns: p.idle_ns,
            unknown_ns: p.first - start,
            holds: p.holds,
            ms: p.ms.len() as u64,
            handoffs: p.handoffs,
            steals: p.steals,
        });
    }
    let m_rows = ms
        .into_iter()
        .map(|(tid, m)| {
            let span = m.last - m.first;
            MRow {
                tid,
                holding_ns: m.holding_ns,
                without_p_ns: span.saturating_sub(m.holding_ns),
                span_ns: span,
                ps: m.ps.into_iter().collect(),
                holds: m.holds,
                stolen_from: m.stolen_from,
                stole: m.stole,
            }
        })
        .collect();
    notes.truncate(10);
    Ok(GoProcsFigures {
        method: METHOD.into(),
        records,
        window_ns: end - start,
        steals: rows.iter().map(|r| r.steals).sum(),
        steals_holder_unknown,
        handoffs: rows.iter().map(|r| r.handoffs).sum(),
        ps: rows,
        ms: m_rows,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProcChangeKind::*;
    use ProcState::*;

    fn change(
        ts_ns: u64,
        proc: u32,
        from: ProcState,
        to: ProcState,
        kind: ProcChangeKind,
        tid: Option<u32>,
        holder: Option<u32>,
    ) -> io::Result<ProcChange> {
        Ok(ProcChange {
            ts_ns,
            tid,
            holder,
            proc,
            from,
            to,
            kind,
            time_moved: false,
        })
    }

    /// Two Ps: P0 held by M 10, stolen by sysmon (M 30) while M 10 is in a syscall, taken by
    /// M 20 (a handoff), stopped by it; P1 idle, then taken by M 10 after its syscall, open at
    /// the end.
    #[test]
    fn holds_idles_handoffs_and_steals() {
        let changes = vec![
            change(1_000, 0, Undetermined, Running, Status, Some(10), None),
            change(1_000, 1, Undetermined, Idle, Status, Some(10), None),
            change(3_000, 0, Running, Idle, Steal, Some(30), Some(10)),
            change(3_500, 0, Idle, Running, Start, Some(20), None),
            change(4_000, 1, Idle, Running, Start, Some(10), None),
            change(6_000, 0, Running, Idle, Stop, Some(20), Some(20)),
        ];
        let mut edges = Vec::new();
        let f = walk(changes.into_iter(), 9_000, |e| edges.push(e)).unwrap();
        assert_eq!(f.window_ns, 8_000);
        let p0 = &f.ps[0];
        assert_eq!(
            (
                p0.held_ns,
                p0.idle_ns,
                p0.holds,
                p0.ms,
                p0.handoffs,
                p0.steals
            ),
            (2_000 + 2_500, 500 + 3_000, 2, 2, 1, 1)
        );
        let p1 = &f.ps[1];
        assert_eq!((p1.held_ns, p1.idle_ns, p1.handoffs), (5_000, 3_000, 0));
        assert_eq!((f.steals, f.handoffs), (1, 1));
        let m10 = f.ms.iter().find(|m| m.tid == 10).unwrap();
        // Held P0 1000–3000 and P1 4000–9000; without a P 3000–4000.
        assert_eq!(
            (
                m10.holding_ns,
                m10.without_p_ns,
                m10.ps.clone(),
                m10.stolen_from
            ),
            (7_000, 1_000, vec![0, 1], 1)
        );
        let m30 = f.ms.iter().find(|m| m.tid == 30).unwrap();
        assert_eq!((m30.holding_ns, m30.stole, m30.holds), (0, 1, 0));
        assert_eq!(
            edges,
            vec![
                ProcEdge::Begin {
                    ts_ns: 1_000,
                    proc: 0,
                    m: 10
                },
                ProcEdge::End {
                    ts_ns: 3_000,
                    proc: 0,
                    m: 10
                },
                ProcEdge::Steal {
                    ts_ns: 3_000,
                    proc: 0,
                    from: Some(10),
                    by: Some(30)
                },
                ProcEdge::Begin {
                    ts_ns: 3_500,
                    proc: 0,
                    m: 20
                },
                ProcEdge::Begin {
                    ts_ns: 4_000,
                    proc: 1,
                    m: 10
                },
                ProcEdge::End {
                    ts_ns: 6_000,
                    proc: 0,
                    m: 20
                },
                ProcEdge::End {
                    ts_ns: 9_000,
                    proc: 1,
                    m: 10
                },
            ]
        );
        for p in &f.ps {
            assert_eq!(p.held_ns + p.idle_ns + p.unknown_ns, f.window_ns);
        }
    }

    /// A P first seen late is unknown before; a steal whose holder was lost is counted apart.
    #[test]
    fn a_late_p_and_a_lost_holder() {
        let changes = vec![
            change(0, 0, Undetermined, Idle, Status, Some(1), None),
            change(400, 1, NotExist, Running, Status, Some(2), None),
            change(700, 1, Idle, Idle, Steal, Some(3), None),
        ];
        let f = walk(changes.into_iter(), 0, |_| {}).unwrap();
        assert_eq!(f.window_ns, 700);
        assert_eq!(
            (f.ps[1].unknown_ns, f.ps[1].held_ns, f.ps[1].idle_ns),
            (400, 300, 0)
        );
        assert_eq!((f.steals, f.steals_holder_unknown), (1, 1));
        let f = walk(std::iter::empty(), 10, |_| {}).unwrap();
        assert!(f.ps.is_empty() && !f.notes.is_empty());
    }
}
