//! Embeds the git commit spawnscope was built from (SPAWNSCOPE_GIT_COMMIT: "abc1234", with
//! "-dirty" when the work tree had changes), so machine.json says which conductor measured.
//! "unknown" where there is no git or no repository (a tarball, the Nix build); a packager may
//! set SPAWNSCOPE_GIT_COMMIT in the build's environment instead.
use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=SPAWNSCOPE_GIT_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    // The layer crates are the conductor too: a change there makes the stamp "-dirty". Only this
    // small crate is rebuilt for it (the stamp is handed to host::machine at run time).
    println!("cargo:rerun-if-changed=../crates");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let commit = std::env::var("SPAWNSCOPE_GIT_COMMIT").ok().or_else(|| {
        let hash = git(&["rev-parse", "--short", "HEAD"])?;
        // A new commit or a change staged anywhere in the repository rebuilds the stamp.
        let branch = git(&["rev-parse", "--symbolic-full-name", "HEAD"]).unwrap_or_default();
        for name in ["HEAD", "index", branch.as_str()] {
            if name.is_empty() {
                continue;
            }
            // Relative to this directory, which is where cargo runs the script.
            if let Some(path) = git(&["rev-parse", "--git-path", name]) {
                if Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
        let dirty =
            git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
        Some(if dirty { format!("{hash}-dirty") } else { hash })
    });
    println!(
        "cargo:rustc-env=SPAWNSCOPE_GIT_COMMIT={}",
        commit.unwrap_or_else(|| "unknown".into())
    );
}
