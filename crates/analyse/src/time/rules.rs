//! Which category a perf sample belongs to: kernel samples by their kernel entry path, user samples
//! by whose code ran. The rules are data, attribution-rules.tsv, explained at its top; the
//! deepest matching frame decides, and where none matches, `root` rules name the stack by its
//! outermost frame.

use std::sync::OnceLock;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use record::perf::{is_kernel_frame, Stack};

const RULES_TSV: &str = include_str!("attribution-rules.tsv");

#[derive(
    schemars::JsonSchema, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Kernel,
    User,
}

impl Mode {
    pub fn of(stack: &Stack) -> Mode {
        if stack.kernel_mode() {
            Mode::Kernel
        } else {
            Mode::User
        }
    }
}

/// Every category, in the order tables show them: (id, label, mode). The last of each mode is
/// where samples no rule matches go.
pub const CATEGORIES: &[(&str, &str, Mode)] = &[
    ("page_faults", "page faults", Mode::Kernel),
    (
        "thread_creation",
        "thread creation (clone → copy_process)",
        Mode::Kernel,
    ),
    (
        "thread_exit",
        "thread exit & teardown (do_exit)",
        Mode::Kernel,
    ),
    (
        "memory_syscalls",
        "memory syscalls (mmap, mprotect, munmap, madvise)",
        Mode::Kernel,
    ),
    ("futex_sched", "futex, sleep & scheduler", Mode::Kernel),
    ("other_syscalls", "other syscalls & signals", Mode::Kernel),
    ("interrupts", "interrupts & IPIs", Mode::Kernel),
    (
        "tracing",
        "tracing itself (perf side-band, BPF)",
        Mode::Kernel,
    ),
    ("kernel_other", "kernel, unclassified", Mode::Kernel),
    ("runtime_scheduler", "runtime scheduler", Mode::User),
    ("gc", "garbage collector", Mode::User),
    ("allocation", "allocation & task creation", Mode::User),
    ("workload", "the workload's own code", Mode::User),
    ("user_other", "user, unclassified", Mode::User),
];

pub const KERNEL_OTHER: &str = "kernel_other";
pub const USER_OTHER: &str = "user_other";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Match {
    /// Only where no other rule matched any frame: the stack's outermost frame, exactly.
    Root,
    // Declared from the least to the most specific: a frame's most specific rule wins.
    Contains,
    Prefix,
    Exact,
}

#[derive(Clone, Debug)]
struct Rule {
    category: &'static str,
    mode: Mode,
    kind: Match,
    pattern: String,
}

impl Rule {
    fn matches(&self, name: &str) -> bool {
        match self.kind {
            Match::Exact | Match::Root => name == self.pattern,
            Match::Prefix => name.starts_with(&self.pattern),
            Match::Contains => name.contains(&self.pattern),
        }
    }
}

/// The classification rules (attribution-rules.tsv).
pub struct Rules(Vec<Rule>);

impl Rules {
    pub fn parse(text: &str) -> Result<Self> {
        let mut rules = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let cols: Vec<&str> = line.split('\t').filter(|c| !c.is_empty()).collect();
            let [category, mode, kind, pattern] = cols[..] else {
                bail!("rules line {}: want 4 tab-separated columns: {line}", i + 1);
            };
            let Some(&(id, _, category_mode)) = CATEGORIES.iter().find(|c| c.0 == category) else {
                bail!("rules line {}: unknown category {category}", i + 1);
            };
            let mode = match mode {
                "kernel" => Mode::Kernel,
                "user" => Mode::User,
                _ => bail!("rules line {}: mode is kernel or user, not {mode}", i + 1),
            };
            if mode != category_mode {
                bail!(
                    "rules line {}: {category} is a {category_mode:?} category",
                    i + 1
                );
            }
            let kind = match kind {
                "exact" => Match::Exact,
                "prefix" => Match::Prefix,
                "contains" => Match::Contains,
                "root" => Match::Root,
                _ => bail!(
                    "rules line {}: match is exact, prefix, contains or root, not {kind}",
                    i + 1
                ),
            };
            rules.push(Rule {
                category: id,
                mode,
                kind,
                pattern: pattern.to_string(),
            });
        }
        Ok(Rules(rules))
    }

    /// The rules compiled into spawnscope.
    pub fn builtin() -> &'static Rules {
        static RULES: OnceLock<Rules> = OnceLock::new();
        RULES.get_or_init(|| Rules::parse(RULES_TSV).expect("attribution-rules.tsv is valid"))
    }

    /// The most specific rule for one frame name, if any (`root` rules aside).
    fn best(&self, mode: Mode, name: &str) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        let candidates = self
            .0
            .iter()
            .filter(|r| r.mode == mode && r.kind != Match::Root && r.matches(name));
        for rule in candidates {
            let key = |r: &Rule| (r.kind, r.pattern.len());
            if best.is_none_or(|b| key(rule) > key(b)) {
                best = Some(rule);
            }
        }
        best
    }

    /// A stack's category and the index of the frame that decided it (None: no rule matched).
    pub fn classify(&self, stack: &Stack) -> (&'static str, Option<usize>) {
        let mode = Mode::of(stack);
        // Leaf first: the deepest entry (kernel) or the innermost owner (user) decides.
        for (i, frame) in stack.frames.iter().enumerate().rev() {
            if is_kernel_frame(frame) != (mode == Mode::Kernel) {
                continue;
            }
            if let Some(rule) = self.best(mode, &rule_name(frame)) {
                return (rule.category, Some(i));
            }
        }
        // No frame named: where the stack starts (a thread's clone3 in a libc without symbols).
        let root = stack
            .frames
            .iter()
            .position(|f| is_kernel_frame(f) == (mode == Mode::Kernel));
        if let Some(i) = root {
            let name = rule_name(&stack.frames[i]);
            let by_root = self
                .0
                .iter()
                .find(|r| r.mode == mode && r.kind == Match::Root && r.matches(&name));
            if let Some(rule) = by_root {
                return (rule.category, Some(i));
            }
        }
        let other = match mode {
            Mode::Kernel => KERNEL_OTHER,
            Mode::User => USER_OTHER,
        };
        (other, None)
    }
}

/// The name rules compare: kernel frames without `_[k]` and without a compiler suffix
/// (`account_kernel_stack.isra.0` → `account_kernel_stack`); user frames as perf names them.
pub fn symbol(frame: &str) -> String {
    match frame.strip_suffix("_[k]") {
        Some(kernel) => kernel.split('.').next().unwrap_or(kernel).to_string(),
        None => frame.to_string(),
    }
}

/// The name rules compare: `symbol`, and for user frames without the symbol version perf adds
/// when libc's symbols come from its debug file (`pthread_create@@GLIBC_2.34`,
/// `cfree@GLIBC_2.2.5`) and without glibc's internal-alias prefix (`__GI___clone3` is `__clone3`,
/// `__GI___nptl_deallocate_stack` is `__nptl_deallocate_stack`): the same function is named
/// either way, depending on the release and on whether debug symbols are installed.
fn rule_name(frame: &str) -> String {
    if is_kernel_frame(frame) {
        return symbol(frame);
    }
    let name = frame
        .split_once('@')
        .filter(|(name, version)| {
            let version = version.trim_start_matches('@');
            !name.is_empty()
                && !version.is_empty()
                && version
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
        .map_or(frame, |(name, _)| name);
    name.strip_prefix("__GI_").unwrap_or(name).to_string()
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A one-sample stack in phase `spawn` (the attribution's tests build on it too).
    pub fn stack(frames: &[&str]) -> Stack {
        Stack {
            phase: "spawn".into(),
            comm: "x".into(),
            frames: frames.iter().map(|f| f.to_string()).collect(),
            count: 1,
        }
    }

    fn category(frames: &[&str]) -> &'static str {
        Rules::builtin().classify(&stack(frames)).0
    }

    #[test]
    fn the_rules_table_parses_and_every_category_is_known() {
        let rules = Rules::builtin();
        assert!(rules.0.len() > 100, "{}", rules.0.len());
        assert!(
            Rules::parse("page_faults\tuser\texact\tx\n").is_err(),
            "mode mismatch"
        );
        assert!(Rules::parse("nope\tkernel\texact\tx\n").is_err());
        assert!(Rules::parse("page_faults\tkernel\tregex\tx\n").is_err());
        assert!(
            Rules::parse("page_faults\t\tkernel\t\texact\tx\n").is_ok(),
            "tabs align"
        );
    }

    #[test]
    fn the_deepest_entry_decides_a_kernel_sample() {
        let clone = [
            "clone3",
            "entry_SYSCALL_64_after_hwframe_[k]",
            "do_syscall_64_[k]",
            "__do_sys_clone3_[k]",
            "kernel_clone_[k]",
            "copy_process_[k]",
            "memcg_charge_kernel_stack.part.0_[k]",
        ];
        assert_eq!(category(&clone), "thread_creation");
        let mut faulting = clone.to_vec();
        faulting.extend([
            "asm_exc_page_fault_[k]",
            "exc_page_fault_[k]",
            "handle_mm_fault_[k]",
        ]);
        assert_eq!(category(&faulting), "page_faults", "a fault inside clone3");
        let mut interrupted = faulting.clone();
        interrupted.extend(["asm_sysvec_call_function_single_[k]", "flush_tlb_func_[k]"]);
        assert_eq!(category(&interrupted), "interrupts");
        assert_eq!(
            category(&[
                "__madvise",
                "entry_SYSCALL_64_after_hwframe_[k]",
                "__x64_sys_madvise_[k]",
                "do_madvise_[k]",
                "down_write_killable_[k]",
                "rwsem_down_write_slowpath_[k]",
                "schedule_[k]",
            ]),
            "memory_syscalls",
            "mmap_lock contention inside madvise belongs to madvise"
        );
        assert_eq!(
            category(&[
                "entry_SYSCALL_64_after_hwframe_[k]",
                "__x64_sys_exit_[k]",
                "do_exit_[k]",
                "exit_mm_[k]",
                "mmput_[k]",
                "exit_mmap_[k]",
                "flush_tlb_mm_range_[k]",
            ]),
            "thread_exit"
        );
        assert_eq!(
            category(&["do_exit.isra.0_[k]", "release_task_[k]"]),
            "thread_exit"
        );
        assert_eq!(
            category(&[
                "do_syscall_64_[k]",
                "exit_to_user_mode_loop_[k]",
                "schedule_[k]"
            ]),
            "futex_sched"
        );
        assert_eq!(
            category(&[
                "entry_SYSCALL_64_after_hwframe_[k]",
                "__x64_sys_openat_[k]",
                "path_openat_[k]"
            ]),
            "other_syscalls"
        );
        assert_eq!(
            category(&[
                "__x64_sys_mmap_[k]",
                "vm_mmap_pgoff_[k]",
                "perf_event_mmap_[k]",
                "d_path_[k]"
            ]),
            "tracing",
            "perf's own record of a new mapping is perf's cost, not mmap's"
        );
        assert_eq!(category(&["some_kthread_fn_[k]"]), "kernel_other");
    }

    #[test]
    fn the_innermost_owner_decides_a_user_sample() {
        assert_eq!(
            category(&[
                "runtime.goexit.abi0",
                "main.hold.func1",
                "runtime.newproc",
                "runtime.systemstack",
                "runtime.newproc1",
                "runtime.malg",
                "runtime.memclrNoHeapPointers"
            ]),
            "allocation"
        );
        assert_eq!(
            category(&[
                "runtime.mallocgc",
                "runtime.gcAssistAlloc",
                "runtime.gcDrainN",
                "runtime.scanobject"
            ]),
            "gc",
            "a GC assist is GC work"
        );
        assert_eq!(
            category(&[
                "runtime.mstart",
                "runtime.schedule",
                "runtime.findRunnable",
                "runtime.lock2"
            ]),
            "runtime_scheduler"
        );
        assert_eq!(
            category(&[
                "_start",
                "main",
                "threads::main",
                "threads::workloads::sleep",
                "<std::sys::thread::unix::Thread>::new",
                "pthread_create@GLIBC_2.2.5"
            ]),
            "allocation"
        );
        assert_eq!(
            category(&[
                "clone3",
                "start_thread",
                "std::thread::sleep",
                "clock_nanosleep@GLIBC_2.2.5"
            ]),
            "workload",
            "an exact rule beats a prefix rule on the same frame"
        );
        assert_eq!(category(&["threads::harness::Harness::spawn"]), "workload");
        assert_eq!(category(&["[unknown]"]), "user_other");
    }

    #[test]
    fn glibc_names_hold_across_releases_and_without_debug_symbols() {
        // perf's names for one function, by release and by whether libc6-dbg is there.
        for clone3 in ["clone3", "__GI___clone3", "__clone3_internal"] {
            assert_eq!(category(&[clone3]), "allocation", "{clone3}");
        }
        for create in [
            "pthread_create@GLIBC_2.2.5",
            "pthread_create@@GLIBC_2.34",
            "pthread_create",
        ] {
            assert_eq!(
                category(&["threads::main", create]),
                "allocation",
                "{create}"
            );
        }
        assert_eq!(rule_name("cfree@GLIBC_2.2.5"), "cfree");
        assert_eq!(
            rule_name("__GI___nptl_deallocate_stack"),
            "__nptl_deallocate_stack"
        );
        assert_eq!(rule_name("a@b c"), "a@b c", "not a symbol version");
        assert_eq!(rule_name("@@GLIBC_2.34"), "@@GLIBC_2.34");
        assert_eq!(
            rule_name("__GI___clone3_[k]"),
            "__GI___clone3",
            "kernel frames as they are"
        );
        assert_eq!(
            category(&[
                "threads::harness::Harness::emit",
                "cfree@GLIBC_2.2.5",
                "_int_free_chunk"
            ]),
            "allocation"
        );

        // glibc as shipped (2.39 on Ubuntu 24.04, 2.41 on Debian 13): a new thread's own work in
        // libc, no frame named but for an exported function or two.
        let thread_exit = [
            "[libc.so.6]",
            "[libc.so.6]",
            "[libc.so.6]",
            "__lll_lock_wait_private",
        ];
        assert_eq!(category(&thread_exit), "allocation");
        assert_eq!(
            Rules::builtin().classify(&stack(&thread_exit)).1,
            Some(0),
            "decided by the root"
        );
        assert_eq!(category(&["[libc.so.6]"]), "allocation");
        // A named frame decides first; the root only where none is.
        assert_eq!(
            category(&[
                "[libc.so.6]",
                "[libc.so.6]",
                "<std::sys::thread::unix::Thread>::new::thread_start",
                "core::ops::function::FnOnce::call_once{{vtable.shim}}",
                "std::thread::functions::sleep",
                "clock_nanosleep",
                "[libc.so.6]",
            ]),
            "workload"
        );
        // libc's unnamed frames elsewhere than at the root are nobody's.
        assert_eq!(
            category(&[
                "_start",
                "__libc_start_main",
                "[libc.so.6]",
                "main",
                "[libc.so.6]"
            ]),
            "user_other"
        );
        assert_eq!(category(&["[ld-linux-x86-64.so.2]"]), "user_other");
        // Root rules name no frame but the root, and kernel samples never by a user root.
        assert!(Rules::parse("allocation\tuser\troot\t[libc.so.6]\n").is_ok());
        assert_eq!(
            category(&["[libc.so.6]", "some_kthread_fn_[k]"]),
            "kernel_other"
        );
    }
}
