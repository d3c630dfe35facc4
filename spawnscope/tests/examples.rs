//! The examples' preparation (measure/examples.rs) on the 2024 study's own examples: a missing
//! interpreter, JDK or SDK is a skip with what to do; the Java examples compile and run on the
//! JDK found. An integration test: the examples are measure's, their list the study's.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use host::jdk;
use measure::examples::*;
use runtime::TaskKind;
use studies::async_runtimes_2024::{EXAMPLES, TASK_SLEEP};

#[test]
fn a_missing_interpreter_or_build_is_skipped_with_what_to_do() {
    let script = Example {
        label: "x-sleepers",
        article: "X",
        task_kind: TaskKind::Task,
        task_lifetime: Some(TASK_SLEEP),
        peak_when: None,
        most_tasks: None,
        how: How::Script {
            interpreter: "spawnscope-no-such-interpreter",
            script: "x/sleepers.x",
            package: "x-lang",
        },
    };
    let why = prepare_one(&script, None, None, &Toolchains::from_env()).unwrap_err();
    assert_eq!(
        why,
        "spawnscope-no-such-interpreter is not on PATH (Debian: apt-get install x-lang)"
    );
    let tmp = std::env::temp_dir().join(format!("spawnscope-examples-{}", std::process::id()));
    let cargo = Example {
        label: "y-sleepers",
        article: "Y",
        task_kind: TaskKind::Task,
        task_lifetime: Some(TASK_SLEEP),
        peak_when: None,
        most_tasks: None,
        how: How::Cargo {
            binary: "y-sleepers",
            build: "cargo build --example y-sleepers",
        },
    };
    let why = prepare_one(&cargo, None, Some(&tmp), &Toolchains::from_env()).unwrap_err();
    assert!(
        why.ends_with("y-sleepers is not built (`cargo build --example y-sleepers`)"),
        "{why}"
    );
}

#[test]
fn a_script_runs_under_its_interpreter_with_n_last_and_its_sleep_declared() {
    // `sh` stands in for an interpreter every host has.
    let tmp = std::env::temp_dir().join(format!("spawnscope-examples-sh-{}", std::process::id()));
    std::fs::create_dir_all(tmp.join("sh")).unwrap();
    std::fs::write(tmp.join("sh/sleepers.sh"), "").unwrap();
    let ex = Example {
        label: "sh-sleepers",
        article: "sh",
        task_kind: TaskKind::Task,
        task_lifetime: Some(TASK_SLEEP),
        peak_when: None,
        most_tasks: None,
        how: How::Script {
            interpreter: "sh",
            script: "sh/sleepers.sh",
            package: "dash",
        },
    };
    let command = prepare_one(&ex, Some(&tmp), None, &Toolchains::from_env()).unwrap();
    assert_eq!(
        command.argv(10_000),
        [
            "sh",
            &tmp.join("sh/sleepers.sh").display().to_string(),
            "10000"
        ]
    );
    assert_eq!(command.task_kind, TaskKind::Task);
    assert_eq!(command.task_lifetime, Some(Duration::from_secs(10)));
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn every_example_has_its_own_label_and_is_no_runtime() {
    for (i, ex) in EXAMPLES.iter().enumerate() {
        assert!(
            runtime::command::SweptCommand::parse("x {n}", Some(ex.label)).is_ok(),
            "{}",
            ex.label
        );
        assert!(EXAMPLES[..i].iter().all(|e| e.label != ex.label));
    }
}

fn example(label: &str) -> &'static Example {
    EXAMPLES.iter().find(|e| e.label == label).unwrap()
}

/// An executable shell script at `path`.
fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Toolchains found only under `root`: its bin/ as PATH, its jvm/ as the installed JDKs.
fn tools_under(root: &Path, java_home: Option<&Path>) -> Toolchains {
    let (bin, jvm) = (root.join("bin"), root.join("jvm"));
    let java_home = java_home.map(|h| h.as_os_str().to_owned());
    Toolchains::from_vars(|name| match name {
        "PATH" => Some(bin.clone().into_os_string()),
        "SPAWNSCOPE_JVM_DIR" => Some(jvm.clone().into_os_string()),
        "JAVA_HOME" => java_home.clone(),
        _ => None,
    })
}

#[test]
fn java_without_a_recent_jdk_names_the_one_found_and_what_would_install_one() {
    let tmp = tempfile::tempdir().unwrap();
    let j17 = tmp.path().join("jvm/java-17-openjdk-amd64");
    script(&j17.join("bin/javac"), "echo 'javac 17.0.15'");
    let tools = tools_under(tmp.path(), Some(&j17));
    for label in ["java-virtual-threads", "java-platform-threads"] {
        let why = prepare_one(example(label), None, None, &tools).unwrap_err();
        assert_eq!(
            why,
            format!(
                "no JDK 21+ found, only JAVA_HOME {} (javac 17.0.15): {}",
                j17.display(),
                jdk::install_hint(21)
            ),
            "{label}"
        );
    }
}

#[test]
fn java_runs_on_the_jdk_found_with_its_flags_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("jvm/temurin-25-jdk-amd64");
    // A fake JDK: javac copies the source into -d; java prints what a JVM prints.
    script(
        &home.join("bin/javac"),
        r#"[ "$1" = -version ] && { echo 'javac 25.0.3'; exit 0; }; cp "$3" "$2/""#,
    );
    script(
        &home.join("bin/java"),
        r#"case "$1" in -version) echo 'openjdk version "25.0.3" 2026-04-21 LTS' >&2;; -XX:+PrintCommandLineFlags) echo '-XX:ConcGCThreads=1 -XX:InitialHeapSize=394945472 -XX:MaxHeapSize=6319127552 -XX:+PrintCommandLineFlags -XX:+UseCompressedOops -XX:+UseG1GC';; esac"#,
    );
    let source = tmp.path().join("examples");
    std::fs::create_dir_all(source.join("java")).unwrap();
    std::fs::write(
        source.join("java/VirtualThreads.java"),
        "class VirtualThreads {}",
    )
    .unwrap();
    let built = tmp.path().join("built");
    let tools = tools_under(tmp.path(), None);
    let command = prepare_one(
        example("java-virtual-threads"),
        Some(&source),
        Some(&built),
        &tools,
    )
    .unwrap();
    let java = home.join("bin/java").display().to_string();
    let classes = built.join("java").display().to_string();
    assert_eq!(
        command.argv(1_000),
        [
            java.as_str(),
            "-XX:InitialHeapSize=394945472",
            "-XX:MaxHeapSize=6319127552",
            "-XX:+UseG1GC",
            "-XX:+PrintCommandLineFlags",
            "-cp",
            &classes,
            "VirtualThreads",
            "1000"
        ]
    );
    assert!(
        built.join("java/VirtualThreads.java").is_file(),
        "javac -d ran"
    );
    assert_eq!(
        command.version.as_deref(),
        Some(
            format!(
                "openjdk version \"25.0.3\" 2026-04-21 LTS, {} (the highest installed); JVM memory flags: -XX:InitialHeapSize=394945472 -XX:MaxHeapSize=6319127552 -XX:+UseG1GC (this host's ergonomics, passed to every run)",
                home.display()
            )
            .as_str()
        )
    );
    assert_eq!(command.task_kind, TaskKind::Task);
    assert_eq!(command.task_lifetime, Some(TASK_SLEEP));
    // Platform threads are OS threads: counted from outside.
    std::fs::write(source.join("java/PlatformThreads.java"), "").unwrap();
    let platform = prepare_one(
        example("java-platform-threads"),
        Some(&source),
        Some(&built),
        &tools,
    )
    .unwrap();
    assert_eq!(platform.task_kind, TaskKind::Thread);
    // Its study clamps it (a million took 26 min here), and the command carries why.
    let (most, why) = platform.most_tasks.clone().unwrap();
    assert_eq!(most, studies::async_runtimes_2024::PLATFORM_THREADS_MOST);
    assert!(why.contains("26 min"), "{why}");
    assert_eq!(command.most_tasks, None);
    assert_eq!(platform.argv(5)[7], "PlatformThreads");
    assert!(example("java-platform-threads").is_jvm() && !example("go-sleepers").is_jvm());
}

#[test]
fn csharp_without_a_dotnet_sdk_says_so_and_what_would_install_one() {
    let tmp = tempfile::tempdir().unwrap();
    let tools = tools_under(tmp.path(), None);
    let why = prepare_one(example("csharp-sleepers"), None, None, &tools).unwrap_err();
    assert_eq!(
        why,
        format!("no dotnet SDK on PATH (dotnet is not on PATH; {DOTNET_HINT})")
    );
    // A dotnet with runtimes only.
    script(&tmp.path().join("bin/dotnet"), "exit 0");
    let why = prepare_one(example("csharp-sleepers"), None, None, &tools).unwrap_err();
    assert!(
        why.starts_with("no dotnet SDK on PATH (")
            && why.contains("`dotnet --list-sdks` lists no SDK"),
        "{why}"
    );
    assert_eq!(
        highest_dotnet_sdk(
            "8.0.404 [/usr/share/dotnet/sdk]\n9.0.100 [/usr/share/dotnet/sdk]\n9.0.9 [/x]\n"
        ),
        Some("9.0.100".into())
    );
}

#[test]
fn the_heap_and_collector_are_kept_of_the_flags_a_jvm_prints() {
    let printed = "-XX:-AOTInvokeDynamicLinking -XX:ConcGCThreads=1 -XX:G1ConcRefinementThreads=2 -XX:InitialHeapSize=394945472 -XX:MarkStackSize=4194304 -XX:MaxHeapSize=6319127552 -XX:MinHeapSize=6815736 -XX:+PrintCommandLineFlags -XX:ReservedCodeCacheSize=251658240 -XX:+SegmentedCodeCache -XX:+UseCompressedOops -XX:+UseG1GC \n";
    assert_eq!(
        jvm_memory_flags(printed).as_deref(),
        Some("-XX:InitialHeapSize=394945472 -XX:MaxHeapSize=6319127552 -XX:+UseG1GC")
    );
    assert_eq!(
        jvm_memory_flags("-XX:MaxHeapSize=1g -XX:ThreadStackSize=256 -XX:+UseSerialGC").as_deref(),
        Some("-XX:MaxHeapSize=1g -XX:ThreadStackSize=256 -XX:+UseSerialGC")
    );
    assert_eq!(jvm_memory_flags("openjdk version \"25\""), None);
}

/// The Java examples compiled by this host's JDK and run at 1,000 tasks (each sleeps its
/// 10 s: the programs have no knob). Skipped, saying why, where no JDK 21+ is found.
#[test]
fn the_java_examples_compile_and_run_on_this_hosts_jdk() {
    let tools = Toolchains::from_env();
    if let Err(why) = tools.jdks.find(JAVA_AT_LEAST) {
        eprintln!("skipped: {why}");
        return;
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let built = tempfile::tempdir().unwrap();
    let runs: Vec<_> = ["java-virtual-threads", "java-platform-threads"]
        .into_iter()
        .map(|label| {
            let command = prepare_one(example(label), Some(&source), Some(built.path()), &tools)
                .unwrap_or_else(|why| panic!("{label}: {why}"));
            let version = command.version.clone().unwrap_or_default();
            assert!(version.contains("-XX:MaxHeapSize="), "{label}: {version}");
            let argv = command.argv(1_000);
            let started = std::time::Instant::now();
            let child = Command::new(&argv[0])
                .args(&argv[1..])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (label, started, child)
        })
        .collect();
    for (label, started, child) in runs {
        let out = child.wait_with_output().unwrap();
        let wall = started.elapsed();
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            wall >= TASK_SLEEP && wall < TASK_SLEEP * 12,
            "{label}: 1,000 tasks sleeping 10 s took {wall:?}"
        );
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            jvm_memory_flags(&printed).is_some_and(|f| f.contains("GC")),
            "{label} printed no flags: {printed}"
        );
    }
}
