//! The JDKs on this machine: where one is (`JAVA_HOME`, then `javac` on PATH, then
//! `/usr/lib/jvm/*`, highest version first), which version it is (read from its own
//! `javac -version`), and, when none is recent enough, what was found and what would install one.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where JDKs are looked for: this process's environment, or a test's (`from_vars`).
#[derive(Clone, Debug, Default)]
pub struct Search {
    /// `JAVA_HOME`.
    pub java_home: Option<OsString>,
    /// `PATH`, searched for `javac`.
    pub path: Option<OsString>,
    /// The directory holding installed JDKs: `$SPAWNSCOPE_JVM_DIR`, else `/usr/lib/jvm`.
    pub jvm_dir: PathBuf,
}

/// Where a JDK was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    JavaHome,
    Path,
    JvmDir,
}

/// One JDK: its home (with `bin/javac` and `bin/java`) and its version.
#[derive(Clone, Debug, PartialEq)]
pub struct Jdk {
    pub home: PathBuf,
    /// The feature release: 25 for "25.0.3", 8 for "1.8.0_392".
    pub major: u32,
    /// As `javac -version` says it ("25.0.3").
    pub version: String,
    pub source: Source,
}

impl Jdk {
    pub fn javac(&self) -> PathBuf {
        self.home.join("bin/javac")
    }

    pub fn java(&self) -> PathBuf {
        self.home.join("bin/java")
    }
}

/// What would install a JDK of at least `major` here (Debian 12 packages 17 only).
pub fn install_hint(major: u32) -> String {
    format!(
        "install a JDK {major} or later: apt-get install openjdk-{major}-jdk-headless (Debian 13, Ubuntu 24.04), or temurin-{major}-jdk from Adoptium's apt repository (Debian 12), or point JAVA_HOME at one"
    )
}

impl Search {
    /// From a lookup of environment variables (`std::env::var_os`, or a test's).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        Search {
            java_home: var("JAVA_HOME").filter(|v| !v.is_empty()),
            path: var("PATH"),
            jvm_dir: var("SPAWNSCOPE_JVM_DIR")
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from("/usr/lib/jvm"), PathBuf::from),
        }
    }

    /// Every JDK home found, in the order they are preferred: `JAVA_HOME`, PATH's `javac` (its
    /// links followed to the JDK it belongs to), then `jvm_dir`'s by version, highest first. Each
    /// home once; a directory without `bin/javac` is no JDK.
    pub fn candidates(&self) -> Vec<(PathBuf, Source)> {
        let mut out: Vec<(PathBuf, Source)> = Vec::new();
        let mut add = |home: PathBuf, source: Source| {
            let key = home.canonicalize().unwrap_or_else(|_| home.clone());
            let known = out
                .iter()
                .any(|(h, _)| h.canonicalize().unwrap_or_else(|_| h.clone()) == key);
            if !known && home.join("bin/javac").is_file() {
                out.push((home, source));
            }
        };
        if let Some(home) = &self.java_home {
            add(PathBuf::from(home), Source::JavaHome);
        }
        if let Some(path) = &self.path {
            let javac = std::env::split_paths(path)
                .map(|d| d.join("javac"))
                .find(|p| p.is_file());
            // /usr/bin/javac → /etc/alternatives/javac → /usr/lib/jvm/<jdk>/bin/javac.
            if let Some(home) = javac
                .and_then(|j| j.canonicalize().ok())
                .and_then(|j| Some(j.parent()?.parent()?.to_path_buf()))
            {
                add(home, Source::Path);
            }
        }
        let mut installed: Vec<PathBuf> = std::fs::read_dir(&self.jvm_dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        installed.sort();
        for home in installed {
            add(home, Source::JvmDir);
        }
        out
    }

    /// The JDK to use: the first of `JAVA_HOME` and PATH's that is at least `at_least`, else the
    /// highest of `jvm_dir`'s that is. Err: one line naming every JDK found and its version (or
    /// that none was), and what would install one.
    pub fn find(&self, at_least: u32) -> Result<Jdk, String> {
        let mut found: Vec<Jdk> = Vec::new();
        let mut unreadable: Vec<String> = Vec::new();
        for (home, source) in self.candidates() {
            match javac_version(&home.join("bin/javac")) {
                Some((major, version)) => found.push(Jdk {
                    home,
                    major,
                    version,
                    source,
                }),
                None => unreadable.push(format!(
                    "{} (`javac -version` said no version)",
                    home.display()
                )),
            }
        }
        let first = found
            .iter()
            .find(|j| j.source != Source::JvmDir && j.major >= at_least)
            .or_else(|| {
                found
                    .iter()
                    .filter(|j| j.source == Source::JvmDir && j.major >= at_least)
                    .max_by(|a, b| version_key(&a.version).cmp(&version_key(&b.version)))
            });
        if let Some(jdk) = first {
            return Ok(jdk.clone());
        }
        let mut seen: Vec<String> = found
            .iter()
            .map(|j| {
                let from = match j.source {
                    Source::JavaHome => "JAVA_HOME ",
                    Source::Path => "PATH's javac, ",
                    Source::JvmDir => "",
                };
                format!("{from}{} (javac {})", j.home.display(), j.version)
            })
            .collect();
        seen.extend(unreadable);
        let searched = format!(
            "JAVA_HOME {}, PATH, {}",
            self.java_home
                .as_ref()
                .map_or("unset".into(), |h| Path::new(h).display().to_string()),
            self.jvm_dir.display()
        );
        let what = if seen.is_empty() {
            format!("no JDK found ({searched})")
        } else {
            format!("no JDK {at_least}+ found, only {}", seen.join("; "))
        };
        Err(format!("{what}: {}", install_hint(at_least)))
    }
}

/// The numbers of a version, for ordering: "25.0.3" → [25, 0, 3]; "1.8.0_392" → [8, 0, 392].
fn version_key(version: &str) -> Vec<u32> {
    let v = version.strip_prefix("1.").unwrap_or(version);
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// The feature release and version in what `javac -version`, `java -version` or
/// `java --version` print: "javac 25.0.3", "openjdk version \"21.0.5\" 2024-10-15",
/// "java version \"1.8.0_392\"", "openjdk 23 2024-09-17" (and "-ea" or "+36" builds).
pub fn parse_version(output: &str) -> Option<(u32, String)> {
    output.lines().find_map(|line| {
        let line = line.trim();
        let rest = [
            "javac ",
            "openjdk version ",
            "java version ",
            "openjdk ",
            "java ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p))?;
        let word = rest.split_whitespace().next()?.trim_matches('"');
        let version: String = word
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '_')
            .collect();
        let key = version_key(&version);
        let major = *key.first()?;
        (major > 0).then_some((major, version))
    })
}

/// A `javac`'s version, from its `-version` (stdout since JDK 9, stderr before).
fn javac_version(javac: &Path) -> Option<(u32, String)> {
    let out = Command::new(javac).arg("-version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&[out.stdout, out.stderr].concat()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    // What real JDKs print (17: Debian's; 21: Temurin's; 25: Temurin's; 8: the old form).
    const JAVA_17: &str = "openjdk version \"17.0.15\" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6-Debian-1deb12u1)\nOpenJDK 64-Bit Server VM (build 17.0.15+6-Debian-1deb12u1, mixed mode, sharing)\n";
    const JAVA_21: &str = "openjdk version \"21.0.5\" 2024-10-15 LTS\nOpenJDK Runtime Environment Temurin-21.0.5+11 (build 21.0.5+11-LTS)\nOpenJDK 64-Bit Server VM Temurin-21.0.5+11 (build 21.0.5+11-LTS, mixed mode, sharing)\n";
    const JAVA_25: &str = "openjdk version \"25.0.3\" 2026-04-21 LTS\nOpenJDK Runtime Environment Temurin-25.0.3+9 (build 25.0.3+9-LTS)\nOpenJDK 64-Bit Server VM Temurin-25.0.3+9 (build 25.0.3+9-LTS, mixed mode, sharing)\n";

    #[test]
    fn versions_are_read_from_what_real_jdks_print() {
        for (text, major, version) in [
            (JAVA_17, 17, "17.0.15"),
            (JAVA_21, 21, "21.0.5"),
            (JAVA_25, 25, "25.0.3"),
            ("javac 25.0.3\n", 25, "25.0.3"),
            ("javac 21.0.5\n", 21, "21.0.5"),
            ("javac 17.0.15\n", 17, "17.0.15"),
            ("openjdk version \"23\" 2024-09-17\n", 23, "23"),
            (
                "openjdk 23.0.1 2024-10-15\nOpenJDK Runtime Environment\n",
                23,
                "23.0.1",
            ),
            ("java version \"1.8.0_392\"\n", 8, "1.8.0_392"),
            ("javac 1.8.0_392\n", 8, "1.8.0_392"),
            (
                "Picked up JAVA_TOOL_OPTIONS: -Xss1m\njavac 21.0.5\n",
                21,
                "21.0.5",
            ),
        ] {
            assert_eq!(
                parse_version(text),
                Some((major, version.to_string())),
                "{text}"
            );
        }
        for text in ["", "javac\n", "bash: javac: command not found\n"] {
            assert_eq!(parse_version(text), None, "{text}");
        }
        assert!(version_key("21.0.10") > version_key("21.0.9"));
        assert!(version_key("25") > version_key("21.0.9"));
        assert!(version_key("1.8.0_392") < version_key("17"));
    }

    /// A fake JDK home under `root`: a `bin/javac` that prints `javac VERSION`.
    fn fake_jdk(root: &Path, name: &str, version: &str) -> PathBuf {
        let home = root.join(name);
        std::fs::create_dir_all(home.join("bin")).unwrap();
        let javac = home.join("bin/javac");
        std::fs::write(&javac, format!("#!/bin/sh\necho 'javac {version}'\n")).unwrap();
        std::fs::set_permissions(&javac, std::fs::Permissions::from_mode(0o755)).unwrap();
        home
    }

    fn search(java_home: Option<&Path>, path: Option<&Path>, jvm_dir: &Path) -> Search {
        Search {
            java_home: java_home.map(|p| p.as_os_str().to_owned()),
            path: path.map(|p| p.as_os_str().to_owned()),
            jvm_dir: jvm_dir.to_path_buf(),
        }
    }

    #[test]
    fn the_highest_installed_jdk_wins_and_java_home_comes_first() {
        let tmp = tempfile::tempdir().unwrap();
        let jvm = tmp.path().join("jvm");
        let j17 = fake_jdk(&jvm, "java-17-openjdk-amd64", "17.0.15");
        let j21 = fake_jdk(&jvm, "temurin-21-jdk-amd64", "21.0.9");
        let j21b = fake_jdk(&jvm, "openjdk-21.0.10", "21.0.10");
        let j25 = fake_jdk(&jvm, "temurin-25-jdk-amd64", "25.0.3");
        std::fs::create_dir_all(jvm.join("not-a-jdk")).unwrap();
        let empty = tmp.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();

        // Highest version first, whatever the names' order.
        let jdk = search(None, Some(&empty), &jvm).find(21).unwrap();
        assert_eq!((jdk.home.clone(), jdk.major), (j25.clone(), 25));
        assert_eq!(jdk.source, Source::JvmDir);
        assert_eq!(jdk.java(), j25.join("bin/java"));
        std::fs::remove_dir_all(&j25).unwrap();
        let jdk = search(None, Some(&empty), &jvm).find(21).unwrap();
        assert_eq!(jdk.home, j21b, "21.0.10 above 21.0.9");

        // JAVA_HOME first, though an installed one is newer.
        let j25 = fake_jdk(&jvm, "temurin-25-jdk-amd64", "25.0.3");
        let jdk = search(Some(&j21), Some(&empty), &jvm).find(21).unwrap();
        assert_eq!((jdk.home, jdk.source), (j21.clone(), Source::JavaHome));
        // …unless it is too old: then the newest installed.
        let jdk = search(Some(&j17), Some(&empty), &jvm).find(21).unwrap();
        assert_eq!(jdk.home, j25);

        // PATH's javac (a link into a JDK, as Debian's alternatives make it) before jvm_dir's.
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(j21.join("bin/javac"), bin.join("javac")).unwrap();
        let jdk = search(None, Some(&bin), &jvm).find(21).unwrap();
        assert_eq!(
            (jdk.home.canonicalize().unwrap(), jdk.source),
            (j21.canonicalize().unwrap(), Source::Path)
        );
        // JAVA_HOME before PATH.
        let jdk = search(Some(&j25), Some(&bin), &jvm).find(21).unwrap();
        assert_eq!(jdk.source, Source::JavaHome);
    }

    #[test]
    fn no_recent_jdk_says_what_was_found_and_what_would_install_one() {
        let tmp = tempfile::tempdir().unwrap();
        let jvm = tmp.path().join("jvm");
        let j17 = fake_jdk(&jvm, "java-17-openjdk-amd64", "17.0.15");
        let why = search(Some(&j17), None, &jvm).find(21).unwrap_err();
        assert_eq!(
            why,
            format!(
                "no JDK 21+ found, only JAVA_HOME {} (javac 17.0.15): {}",
                j17.display(),
                install_hint(21)
            )
        );
        assert!(
            why.contains("apt-get install openjdk-21-jdk-headless"),
            "{why}"
        );
        let nothing = tmp.path().join("nothing");
        let why = search(None, Some(&nothing), &nothing).find(21).unwrap_err();
        assert!(
            why.starts_with(&format!(
                "no JDK found (JAVA_HOME unset, PATH, {})",
                nothing.display()
            )),
            "{why}"
        );
    }

    #[test]
    fn the_environment_names_where_to_look() {
        let vars = |name: &str| match name {
            "JAVA_HOME" => Some(OsString::from("/opt/jdk")),
            "PATH" => Some(OsString::from("/x/bin")),
            "SPAWNSCOPE_JVM_DIR" => Some(OsString::from("/y/jvm")),
            _ => None,
        };
        let s = Search::from_vars(vars);
        assert_eq!(s.java_home, Some(OsString::from("/opt/jdk")));
        assert_eq!(s.jvm_dir, PathBuf::from("/y/jvm"));
        let s = Search::from_vars(|name| (name == "JAVA_HOME").then(|| OsString::from("")));
        assert_eq!(
            (s.java_home, s.jvm_dir),
            (None, PathBuf::from("/usr/lib/jvm"))
        );
    }
}
