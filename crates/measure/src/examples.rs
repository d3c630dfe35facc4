//! The programs of the repository's examples/ that a study runs (each study lists its own:
//! studies/): which of them this host can run, how each is found or built, the command that runs
//! it at N, and why one is skipped. Whether a runtime can run is found when the reproduction
//! starts (its interpreter, compiler or SDK, and its version); one that cannot says what was
//! missing, the version found and what would install it.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use host::{binary, jdk};
use record::{self, Skipped};
use runtime::command::{SweptCommand, N_MARK};
use runtime::TaskKind;

/// How an example runs.
pub enum How {
    /// A script run by an interpreter found on PATH: `interpreter examples/<script> N`.
    Script {
        interpreter: &'static str,
        script: &'static str,
        /// The Debian package that has the interpreter.
        package: &'static str,
    },
    /// A Go program in examples/<dir>, built with `go build` beside spawnscope
    /// (target/release/examples/<binary>), where cargo puts its examples.
    Go {
        dir: &'static str,
        binary: &'static str,
    },
    /// A cargo example, built beside spawnscope by another engineer's crate: used when built.
    Cargo {
        binary: &'static str,
        build: &'static str,
    },
    /// A Java program, examples/<source>, compiled by the `javac` of a JDK of at least
    /// `JAVA_AT_LEAST` found at run time (host/jdk.rs) into examples/java/ beside spawnscope,
    /// and run by that JDK's `java -cp DIR <class> N`, printing the flags its JVM chose.
    Java {
        source: &'static str,
        class: &'static str,
    },
    /// A C# project in examples/<dir>, published NativeAOT (as the article ran it) by the
    /// `dotnet` SDK on PATH into examples/<dir>/ beside spawnscope.
    Dotnet {
        dir: &'static str,
        binary: &'static str,
    },
    /// A C++ program, examples/<source>, compiled by the C++ compiler on PATH (`c++`) with
    /// `flags` into <binary> beside spawnscope (target/release/examples/), as `build_workloads`
    /// builds it, and run as `<binary> <args…> N`. A host without the compiler uses the binary
    /// when it is built.
    Cpp {
        source: &'static str,
        binary: &'static str,
        flags: &'static [&'static str],
        args: &'static [&'static str],
        /// What the flags need that a bare compiler lacks, and what would install it (said when
        /// the compiler fails).
        needs: &'static str,
    },
}

/// The oldest JDK with virtual threads (`Thread.startVirtualThread`, JEP 444).
pub const JAVA_AT_LEAST: u32 = 21;

/// What would install a dotnet SDK.
pub const DOTNET_HINT: &str = "install one: apt-get install dotnet-sdk-9.0 after adding packages.microsoft.com's repository (learn.microsoft.com/dotnet/core/install/linux-debian), or dotnet-install.sh; NativeAOT also needs clang and zlib1g-dev";

/// Where toolchains are looked for: this process's environment, or a test's.
pub struct Toolchains {
    /// PATH, for `dotnet`.
    pub path: Option<OsString>,
    pub jdks: jdk::Search,
}

impl Toolchains {
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        Toolchains {
            path: var("PATH"),
            jdks: jdk::Search::from_vars(var),
        }
    }

    /// A program on this PATH, as a shell would find it.
    fn find(&self, name: &str) -> Option<PathBuf> {
        std::env::split_paths(self.path.as_deref().unwrap_or(OsStr::new("")))
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    }
}

/// One program of a study.
pub struct Example {
    /// Its name in reports (its "runtime"): a program's name, never a runtime's.
    pub label: &'static str,
    /// The row of its study's published table it reproduces.
    pub article: &'static str,
    /// What N counts: tasks of a user-space runtime, or OS threads (counted from outside, and
    /// the kernel limits raised for them).
    pub task_kind: TaskKind,
    /// How long each task lives, where the program fixes it (a sleeping task's sleep).
    pub task_lifetime: Option<Duration>,
    /// The stdout line that marks the moment its memory is measured (`--peak-when`), where it
    /// prints one.
    pub peak_when: Option<&'static str>,
    /// The most N it is run at, and why (larger N are clamped to it, the row saying so).
    pub most_tasks: Option<(u64, &'static str)>,
    pub how: How,
}

impl Example {
    /// Whether its runs are a JVM's (its memory is mostly heap its GC sized).
    pub fn is_jvm(&self) -> bool {
        matches!(self.how, How::Java { .. })
    }
}

/// The directory beside spawnscope where built examples go: target/release/examples/.
fn built_dir() -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.join("examples"))
}

/// The repository's examples/: $SPAWNSCOPE_EXAMPLES_DIR, else two levels above spawnscope
/// (target/release/ in a checkout), else ./examples.
fn source_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SPAWNSCOPE_EXAMPLES_DIR") {
        return Some(PathBuf::from(dir));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.join("examples")));
    beside
        .into_iter()
        .chain([PathBuf::from("examples")])
        .find(|d| d.join("README.md").is_file())
        .and_then(|d| d.canonicalize().ok())
}

/// The first line a `--version` prints (on stdout or stderr).
fn version_of(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = [out.stdout, out.stderr].concat();
    let line = String::from_utf8_lossy(&text)
        .lines()
        .next()?
        .trim()
        .to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// Makes a directory for built examples (given to the user who ran sudo when made here).
fn make_dir(dir: &Path) -> Result<(), String> {
    let made = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    if made {
        // cargo writes its examples here too, as the user who ran sudo.
        record::give_to_invoking_user(dir);
    }
    Ok(())
}

/// The first line of a failed tool's stderr that says something (else its first line).
fn first_error(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .find(|l| l.contains("error"))
        .or_else(|| text.lines().next())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Builds the Go example beside spawnscope; Err: why it could not be.
fn go_build(go: &Path, source: &Path, out: &Path) -> Result<(), String> {
    if let Some(dir) = out.parent() {
        make_dir(dir)?;
    }
    let built = Command::new(go)
        .args(["build", "-trimpath", "-o"])
        .arg(out)
        .arg(".")
        .current_dir(source)
        .output()
        .map_err(|e| format!("running go build: {e}"))?;
    if !built.status.success() {
        let why = String::from_utf8_lossy(&built.stderr);
        return Err(format!(
            "go build in {} failed: {}",
            source.display(),
            why.lines().next().unwrap_or("")
        ));
    }
    record::give_to_invoking_user(out);
    Ok(())
}

/// Compiles a Java example with the JDK's `javac` into `out`; Err: why it could not be.
fn javac(jdk: &jdk::Jdk, source: &Path, out: &Path) -> Result<(), String> {
    make_dir(out)?;
    let built = Command::new(jdk.javac())
        .arg("-d")
        .arg(out)
        .arg(source)
        .output()
        .map_err(|e| format!("running {}: {e}", jdk.javac().display()))?;
    if !built.status.success() {
        return Err(format!(
            "{} -d {} {} failed: {}",
            jdk.javac().display(),
            out.display(),
            source.display(),
            first_error(&built.stderr)
        ));
    }
    record::give_to_invoking_user(out);
    Ok(())
}

/// The flag every Java example runs with: the JVM prints the flags it chose (heap sizes, the
/// GC) on stdout as it starts, kept in each run's command.stdout.
pub const JVM_PRINT_FLAGS: &str = "-XX:+PrintCommandLineFlags";

/// Of the flags a JVM prints (`-XX:+PrintCommandLineFlags`), those that size its memory: the
/// heap's bounds and the collector.
pub fn jvm_memory_flags(printed: &str) -> Option<String> {
    let kept: Vec<&str> = printed
        .split_whitespace()
        .filter(|f| {
            f.starts_with("-XX:InitialHeapSize=")
                || f.starts_with("-XX:MaxHeapSize=")
                || f.starts_with("-XX:ThreadStackSize=")
                || (f.starts_with("-XX:+Use") && f.ends_with("GC"))
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join(" "))
}

/// The heap and collector this host's JVM chooses by itself (its ergonomics, outside any cgroup:
/// `java -XX:+PrintCommandLineFlags -version`). Passed explicitly to every run, so that each N
/// runs with the same heap whatever memory limit its cgroup has (a JVM sizes its heap from that
/// limit when there is one).
fn jvm_ergonomics(jdk: &jdk::Jdk) -> Option<String> {
    let out = Command::new(jdk.java())
        .args([JVM_PRINT_FLAGS, "-version"])
        .output()
        .ok()?;
    jvm_memory_flags(&String::from_utf8_lossy(&out.stdout))
}

/// What the example's JVM says of itself: its version line, where it was found, and the memory
/// flags it runs with.
fn jvm_version(jdk: &jdk::Jdk, flags: Option<&str>) -> String {
    let version = version_of(&jdk.java(), &["-version"])
        .unwrap_or_else(|| format!("JDK {} (javac)", jdk.version));
    let found = match jdk.source {
        jdk::Source::JavaHome => "JAVA_HOME",
        jdk::Source::Path => "PATH",
        jdk::Source::JvmDir => "the highest installed",
    };
    format!(
        "{version}, {} ({found}); JVM memory flags: {}",
        jdk.home.display(),
        flags.map_or_else(
            || "the JVM's own (not printed)".to_string(),
            |f| format!("{f} (this host's ergonomics, passed to every run)")
        )
    )
}

/// Compiles a C++ example (-O2, as the article's benchmarks were) into `out`; Err: why it
/// could not be.
fn cxx_build(cxx: &Path, source: &Path, flags: &[&str], out: &Path) -> Result<(), String> {
    if let Some(dir) = out.parent() {
        make_dir(dir)?;
    }
    let built = Command::new(cxx)
        .args(["-O2", "-g", "-DNDEBUG", "-o"])
        .arg(out)
        .arg(source)
        .args(flags)
        .output()
        .map_err(|e| format!("running {}: {e}", cxx.display()))?;
    if !built.status.success() {
        return Err(format!(
            "{} {} {} failed: {}",
            cxx.display(),
            source.display(),
            flags.join(" "),
            first_error(&built.stderr)
        ));
    }
    record::give_to_invoking_user(out);
    Ok(())
}

/// The highest SDK `dotnet --list-sdks` lists ("9.0.100 [/usr/share/dotnet/sdk]" → "9.0.100").
pub fn highest_dotnet_sdk(listed: &str) -> Option<String> {
    listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .max_by_key(|v| {
            v.split(|c: char| !c.is_ascii_digit())
                .map(|p| p.parse::<u32>().unwrap_or(0))
                .collect::<Vec<_>>()
        })
        .map(str::to_string)
}

/// Publishes the C# example NativeAOT into `out` for the SDK's own framework
/// (`net<major>.0`); Err: why it could not be.
fn dotnet_publish(dotnet: &Path, sdk: &str, project: &Path, out: &Path) -> Result<(), String> {
    make_dir(out)?;
    let major = sdk.split('.').next().unwrap_or("9");
    let built = Command::new(dotnet)
        .args(["publish", "-c", "Release", "--nologo"])
        .arg(format!("-p:TargetFramework=net{major}.0"))
        .arg("-o")
        .arg(out)
        .current_dir(project)
        .output()
        .map_err(|e| format!("running dotnet publish: {e}"))?;
    if !built.status.success() {
        return Err(format!(
            "dotnet publish (SDK {sdk}) in {} failed: {}",
            project.display(),
            first_error(&[built.stdout, built.stderr].concat())
        ));
    }
    record::give_to_invoking_user(out);
    Ok(())
}

/// One example as a command, or why this host cannot run it.
pub fn prepare_one(
    ex: &Example,
    source: Option<&Path>,
    built: Option<&Path>,
    tools: &Toolchains,
) -> Result<SweptCommand, String> {
    let source_missing = || {
        "the repository's examples/ was not found (run spawnscope from the repository, or set SPAWNSCOPE_EXAMPLES_DIR)".to_string()
    };
    let (words, version) = match &ex.how {
        How::Script {
            interpreter,
            script,
            package,
        } => {
            let program = binary::resolve_program(interpreter).ok_or_else(|| {
                format!("{interpreter} is not on PATH (Debian: apt-get install {package})")
            })?;
            let script = source.ok_or_else(source_missing)?.join(script);
            if !script.is_file() {
                return Err(format!("{} is missing", script.display()));
            }
            let words = vec![
                interpreter.to_string(),
                script.display().to_string(),
                N_MARK.into(),
            ];
            (words, version_of(&program, &["--version"]))
        }
        How::Go { dir, binary: name } => {
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(name);
            match (binary::resolve_program("go"), source) {
                (Some(go), Some(source)) => go_build(&go, &source.join(dir), &out)?,
                _ if out.is_file() => {}
                (None, _) => {
                    return Err(format!(
                        "go is not on PATH (Debian: apt-get install golang-go) and {} is not built",
                        out.display()
                    ))
                }
                (_, None) => return Err(source_missing()),
            }
            let words = vec![out.display().to_string(), N_MARK.into()];
            (words, binary::go_version(&out))
        }
        How::Cargo {
            binary: name,
            build,
        } => {
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(name);
            if !out.is_file() {
                return Err(format!("{} is not built (`{build}`)", out.display()));
            }
            let words = vec![out.display().to_string(), N_MARK.into()];
            (words, binary::rust_version(&out))
        }
        How::Java {
            source: file,
            class,
        } => {
            // The JDK first: what is missing on most hosts, and what the row must name.
            let jdk = tools.jdks.find(JAVA_AT_LEAST)?;
            let file = source.ok_or_else(source_missing)?.join(file);
            if !file.is_file() {
                return Err(format!("{} is missing", file.display()));
            }
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join("java");
            javac(&jdk, &file, &out)?;
            let flags = jvm_ergonomics(&jdk);
            let mut words = vec![jdk.java().display().to_string()];
            words.extend(
                flags
                    .iter()
                    .flat_map(|f| f.split_whitespace())
                    .map(str::to_string),
            );
            words.extend([
                JVM_PRINT_FLAGS.into(),
                "-cp".into(),
                out.display().to_string(),
                class.to_string(),
                N_MARK.into(),
            ]);
            (words, Some(jvm_version(&jdk, flags.as_deref())))
        }
        How::Dotnet { dir, binary: name } => {
            let dotnet = tools.find("dotnet").ok_or_else(|| {
                format!("no dotnet SDK on PATH (dotnet is not on PATH; {DOTNET_HINT})")
            })?;
            let listed = Command::new(&dotnet)
                .arg("--list-sdks")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            let sdk = highest_dotnet_sdk(&listed).ok_or_else(|| {
                format!(
                    "no dotnet SDK on PATH ({} runs programs but `dotnet --list-sdks` lists no SDK; {DOTNET_HINT})",
                    dotnet.display()
                )
            })?;
            let project = source.ok_or_else(source_missing)?.join(dir);
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(dir);
            dotnet_publish(&dotnet, &sdk, &project, &out)?;
            let words = vec![out.join(name).display().to_string(), N_MARK.into()];
            (words, Some(format!("dotnet SDK {sdk}, NativeAOT")))
        }
        How::Cpp {
            source: file,
            binary: name,
            flags,
            args,
            needs,
        } => {
            let out = built
                .ok_or("spawnscope's own directory is unknown")?
                .join(name);
            match (tools.find("c++"), source) {
                (Some(cxx), Some(source)) => cxx_build(&cxx, &source.join(file), flags, &out)
                    .map_err(|why| format!("{why} ({needs})"))?,
                _ if out.is_file() => {}
                (None, _) => {
                    return Err(format!(
                        "no C++ compiler on PATH (c++; Debian: apt-get install g++) and {} is not built",
                        out.display()
                    ))
                }
                (_, None) => return Err(source_missing()),
            }
            let mut words = vec![out.display().to_string()];
            words.extend(args.iter().map(|a| a.to_string()));
            words.push(N_MARK.into());
            let version = version_of(&out, &["--version"]);
            (words, version)
        }
    };
    Ok(SweptCommand {
        label: ex.label.into(),
        words,
        task_kind: ex.task_kind,
        task_lifetime: ex.task_lifetime,
        peak_when: ex.peak_when.map(str::to_string),
        most_tasks: ex.most_tasks.map(|(n, why)| (n, why.to_string())),
        version,
    })
}

/// The examples this host can run, as commands, and those it cannot, with why.
pub fn prepare(examples: &[Example]) -> (Vec<SweptCommand>, Vec<Skipped>) {
    prepare_with(
        examples,
        source_dir().as_deref(),
        built_dir().as_deref(),
        &Toolchains::from_env(),
    )
}

/// The same, from given directories and toolchains.
pub fn prepare_with(
    examples: &[Example],
    source: Option<&Path>,
    built: Option<&Path>,
    tools: &Toolchains,
) -> (Vec<SweptCommand>, Vec<Skipped>) {
    let mut commands = Vec::new();
    let mut skipped = Vec::new();
    for ex in examples {
        match prepare_one(ex, source, built, tools) {
            Ok(command) => commands.push(command),
            Err(why) => skipped.push(Skipped {
                label: ex.label.into(),
                why,
            }),
        }
    }
    (commands, skipped)
}

/// What would install Maven, which builds the Kotlin example (examples/kotlin-chain).
const MAVEN_HINT: &str = "Debian: apt-get install maven";

/// A C++ compiler's Boost version (`BOOST_LIB_VERSION`, "1_74"), from its own include path.
fn boost_version(cxx: &Path) -> Option<String> {
    use std::io::Write;
    let mut child = Command::new(cxx)
        .args(["-E", "-P", "-x", "c++", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(
        b"#include <boost/version.hpp>\n#include <boost/context/detail/fcontext.hpp>\nspawnscope_boost BOOST_LIB_VERSION\n",
    ).ok()?;
    let out = child.wait_with_output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("spawnscope_boost "))?;
    out.status.success().then(|| {
        line["spawnscope_boost ".len()..]
            .trim()
            .trim_matches('"')
            .replace('_', ".")
    })
}

/// Each optional runtime the studies' programs need, as found on this host: its version and
/// where, or what is missing and what would install it (`spawnscope check`).
pub fn optional_runtimes(tools: &Toolchains) -> Vec<(&'static str, Result<String, String>)> {
    let program = |name: &str, arg: &str, package: &str| match tools.find(name) {
        Some(path) => Ok(format!(
            "{} ({})",
            version_of(&path, &[arg]).unwrap_or_else(|| "version not printed".into()),
            path.display()
        )),
        None => Err(format!(
            "{name} is not on PATH (Debian: apt-get install {package})"
        )),
    };
    let jdk = tools
        .jdks
        .find(JAVA_AT_LEAST)
        .map(|j| format!("JDK {} ({}), {}", j.major, j.version, j.home.display()));
    let dotnet = match tools.find("dotnet") {
        None => Err(format!("dotnet is not on PATH ({DOTNET_HINT})")),
        Some(dotnet) => {
            let listed = Command::new(&dotnet)
                .arg("--list-sdks")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            highest_dotnet_sdk(&listed)
                .map(|sdk| format!("SDK {sdk} ({})", dotnet.display()))
                .ok_or_else(|| format!("{} lists no SDK ({DOTNET_HINT})", dotnet.display()))
        }
    };
    let boost = match tools.find("c++") {
        None => Err("no C++ compiler on PATH (c++; Debian: apt-get install g++)".to_string()),
        Some(cxx) => {
            let compiler = version_of(&cxx, &["--version"]).unwrap_or_default();
            match boost_version(&cxx) {
                Some(v) => Ok(format!("{compiler}; Boost.Context {v}")),
                None => Err(format!(
                    "{compiler}, but no Boost.Context headers (Debian: apt-get install libboost-context-dev)"
                )),
            }
        }
    };
    vec![
        ("JDK", jdk.map_err(|why| why.to_string())),
        ("dotnet", dotnet),
        ("node", program("node", "--version", "nodejs")),
        ("python3", program("python3", "--version", "python3")),
        (
            "Maven",
            match tools.find("mvn") {
                Some(mvn) => Ok(format!(
                    "{} ({})",
                    version_of(&mvn, &["--version"])
                        .map(|v| v.replace("\u{1b}[1m", "").replace("\u{1b}[m", ""))
                        .unwrap_or_default(),
                    mvn.display()
                )),
                None => Err(format!("mvn is not on PATH ({MAVEN_HINT})")),
            },
        ),
        ("C++ and Boost.Context", boost),
    ]
}
