//! Whether a snapshot reads its processes' memory (record/memory.rs), on processes read from this
//! machine's /proc by host::procfs: a real zombie, as an exiting process, has no memory lines.
//! Here because the record is read through the host.

use std::collections::BTreeMap;

use record::memory::Snapshot;
use record::ProcessReading;

#[test]
fn a_moment_a_process_of_the_run_has_let_go_of_its_memory_is_not_readable() {
    // A real zombie: its status has no memory lines, as an exiting process's has not.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let status = |pid: u32| host::procfs::read_key_values(format!("/proc/{pid}/status")).unwrap();
    let (zombie, zombie_status) = loop {
        let reading = host::procfs::read_process(child.id()).unwrap();
        if !reading.status.contains_key("VmRSS") {
            break (reading, status(child.id()));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    child.wait().unwrap();
    let me = host::procfs::read_process(std::process::id()).unwrap();
    // The process started alone: its whole status, as `snapshot` reads it.
    let alone = |status: BTreeMap<String, u64>, tree: &ProcessReading| Snapshot {
        status,
        tree: vec![tree.clone()],
        ..Default::default()
    };
    assert!(alone(status(std::process::id()), &me).reads_its_processes_memory());
    assert!(
        !zombie_status.is_empty(),
        "a zombie's status has its other lines"
    );
    assert!(!alone(zombie_status, &zombie).reads_its_processes_memory());
    // Counted from the run's processes: every one of them has to have its lines.
    let tree = |tree: Vec<ProcessReading>| Snapshot {
        tree,
        ..Default::default()
    };
    assert!(tree(vec![me.clone(), me.clone()]).reads_its_processes_memory());
    assert!(!tree(vec![me, zombie]).reads_its_processes_memory());
}
