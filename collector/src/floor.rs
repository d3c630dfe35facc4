//! The floor under each hook the lean probes use: probes/floor.bpf.c, one program per hook doing
//! only a per-CPU array increment (tp_btf, or classic where the collector's is: csd_queue_cpu), loaded and attached on its own (the hooks asked
//! for, nothing else) so that `spawnscope probe-cost` can time a loop with it where it times the
//! collector's program.

use libbpf_rs::{Link, MapCore, MapFlags, Object, ObjectBuilder};

use crate::cost::{self, ProgramTotals};

/// The compiled floor object (built from `probes/floor.bpf.c` by build.rs).
const OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/floor.bpf.o"));

/// The hooks the floor has a program for, as `category:name`, in the order of its slots in
/// `floor_runs` (probes/floor.bpf.c declares them in this order).
pub const FLOOR_HOOKS: [&str; 16] = [
    "raw_syscalls:sys_enter",
    "raw_syscalls:sys_exit",
    "sched:sched_switch",
    "sched:sched_wakeup",
    "lock:contention_begin",
    "lock:contention_end",
    "exceptions:page_fault_user",
    "task:task_newtask",
    "sched:sched_wakeup_new",
    "sched:sched_process_exit",
    "signal:signal_deliver",
    "sched:sched_migrate_task",
    "ipi:ipi_send_cpu",
    "tlb:tlb_flush",
    "exceptions:page_fault_kernel",
    "csd:csd_queue_cpu",
];

/// The floor's programs on the hooks asked for, attached while this lives.
pub struct Floor {
    obj: Object,
    _links: Vec<Link>,
}

impl Floor {
    /// Loads the programs of `hooks` (each one of [`FLOOR_HOOKS`]) and attaches them. Root only.
    pub fn attach(hooks: &[&str]) -> Result<Floor, String> {
        if let Some(unknown) = hooks.iter().find(|h| !FLOOR_HOOKS.contains(h)) {
            return Err(format!("the floor has no program on {unknown}"));
        }
        let mut open = ObjectBuilder::default()
            .open_memory(OBJECT)
            .map_err(|err| format!("opening the floor's object: {err}"))?;
        for mut prog in open.progs_mut() {
            let hook = cost::tracepoint_of(&prog.name().to_string_lossy());
            prog.set_autoload(hooks.contains(&hook.as_str()));
        }
        let obj = open
            .load()
            .map_err(|err| format!("loading the floor's programs: {err}"))?;
        let mut links = Vec::new();
        for prog in obj.progs_mut() {
            if !prog.autoload() {
                continue;
            }
            let link = prog.attach().map_err(|err| {
                format!(
                    "attaching the floor's {}: {err}",
                    prog.name().to_string_lossy()
                )
            })?;
            links.push(link);
        }
        Ok(Floor { obj, _links: links })
    }

    /// Each attached program's runs and time so far (the kernel's run-time statistics).
    pub fn program_totals(&self) -> Result<Vec<ProgramTotals>, String> {
        cost::program_totals(&self.obj)
    }

    /// The runs each program counted itself (its per-CPU slot, summed over the CPUs), by hook:
    /// every run, the statistics on or off.
    pub fn runs(&self, hook: &str) -> Result<u64, String> {
        let slot = FLOOR_HOOKS
            .iter()
            .position(|h| *h == hook)
            .ok_or_else(|| format!("the floor has no program on {hook}"))?
            as u32;
        let map = self
            .obj
            .maps()
            .find(|m| m.name() == "floor_runs")
            .ok_or("no map floor_runs in the floor's object")?;
        let per_cpu = map
            .lookup_percpu(&slot.to_ne_bytes(), MapFlags::ANY)
            .map_err(|err| format!("reading floor_runs: {err}"))?
            .unwrap_or_default();
        Ok(per_cpu
            .iter()
            .filter_map(|v| {
                v.get(..8)
                    .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            })
            .sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_floor_hook_has_its_program_in_slot_order() {
        let obj = ObjectBuilder::default()
            .open_memory(OBJECT)
            .expect("opening the object needs no privileges");
        let hooks: Vec<String> = obj
            .progs()
            .map(|p| cost::tracepoint_of(&p.name().to_string_lossy()))
            .collect();
        assert_eq!(hooks, FLOOR_HOOKS.map(String::from).to_vec());
        for prog in obj.progs() {
            let name = prog.name().to_string_lossy().into_owned();
            let hook = name.strip_prefix("floor_").unwrap();
            // Classic where the collector's program is (csd_queue_cpu), tp_btf elsewhere.
            let section = if hook == "csd_queue_cpu" {
                "tracepoint/csd/csd_queue_cpu".to_string()
            } else {
                format!("tp_btf/{hook}")
            };
            assert_eq!(prog.section().to_string_lossy(), section);
        }
    }
}
