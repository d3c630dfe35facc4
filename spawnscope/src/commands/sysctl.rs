//! `spawnscope sysctl`: show, raise and restore the kernel limits a run of many threads needs.

use std::process::ExitCode;

use crate::cli::SysctlAction;
use host::{procfs, sysctl};

/// `spawnscope sysctl show|apply|restore`
pub fn command(action: SysctlAction) -> ExitCode {
    let store = sysctl::SysctlStore::system();
    let tasks_on_host = procfs::tasks_on_host().unwrap_or(0);
    let result = match action {
        SysctlAction::Show { n } => (|| -> anyhow::Result<()> {
            let needs = n
                .map(|n| sysctl::needs_for_threads(n, tasks_on_host))
                .transpose()?
                .unwrap_or_default();
            for key in sysctl::MANAGED {
                let current = store.read(key)?;
                let need = needs.iter().find(|nd| nd.key == key);
                match need {
                    Some(need) if current < need.min => println!(
                        "{key} = {current}   (needs {} for {} threads)",
                        need.min,
                        n.unwrap_or(0)
                    ),
                    _ => println!("{key} = {current}"),
                }
            }
            for entry in store.entries()? {
                println!(
                    "raised: {}={} (was {}) by {:?}",
                    entry.key, entry.applied, entry.original, entry.owner
                );
            }
            Ok(())
        })(),
        SysctlAction::Apply { n } => (|| -> anyhow::Result<()> {
            let changes = store.plan(&sysctl::needs_for_threads(n, tasks_on_host)?)?;
            store.apply(&changes, &sysctl::Owner::Manual)?;
            for c in &changes {
                println!("{} {} -> {}  ({})", c.key, c.from, c.to, c.why);
            }
            if changes.is_empty() {
                println!("nothing to raise: every limit already fits {n} threads");
            } else {
                println!(
                    "recorded in {}; `spawnscope sysctl restore` puts the originals back",
                    store.state_path().display()
                );
            }
            Ok(())
        })(),
        SysctlAction::Restore => (|| -> anyhow::Result<()> {
            let restored = store.restore_all()?;
            for e in &restored {
                println!("{} = {} (restored from {})", e.key, e.original, e.applied);
            }
            if restored.is_empty() {
                println!("nothing to restore");
            }
            Ok(())
        })(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("spawnscope: {err:#}");
            ExitCode::from(1)
        }
    }
}
