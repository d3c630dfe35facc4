//! Programs on this machine: where a command's program is (as a shell finds it), and what a
//! workload binary says about its own toolchain, read from the file (no toolchain needed on this
//! machine): the Go version in a Go binary's build info, the Rust version in an ELF's `.comment`
//! section.

use std::fs;
use std::path::{Path, PathBuf};

/// Resolves a command name the way a shell would: a path as it is, else the first PATH entry
/// that has it.
pub fn resolve_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The start of a Go binary's build info (`.go.buildinfo`), 16-byte aligned.
const GO_BUILDINFO_MAGIC: &[u8; 14] = b"\xff Go buildinf:";
/// Magic, pointer size, flags, then two pointers' room: the inline strings start after 32 bytes.
const GO_BUILDINFO_HEADER: usize = 32;
/// Go 1.18+: version and module info are inline, varint-length strings after the header.
const GO_FLAG_INLINE_STRINGS: u8 = 0x2;

fn u16_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as u64)
}

fn u32_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as u64)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The bytes of a section of a 64-bit little-endian ELF file, by name.
pub fn elf_section<'a>(elf: &'a [u8], name: &str) -> Option<&'a [u8]> {
    // ELFCLASS64, ELFDATA2LSB: what x86_64 and aarch64 Linux run.
    if elf.get(0..4)? != b"\x7fELF" || elf.get(4)? != &2 || elf.get(5)? != &1 {
        return None;
    }
    let shoff = u64_at(elf, 0x28)? as usize;
    let shentsize = u16_at(elf, 0x3a)? as usize;
    let shnum = u16_at(elf, 0x3c)? as usize;
    let shstrndx = u16_at(elf, 0x3e)? as usize;
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let body = |h: usize| -> Option<&'a [u8]> {
        let offset = u64_at(elf, h + 24)? as usize;
        let size = u64_at(elf, h + 32)? as usize;
        elf.get(offset..offset.checked_add(size)?)
    };
    let names = body(header(shstrndx)?)?;
    (0..shnum).find_map(|i| {
        let h = header(i)?;
        let start = u32_at(elf, h)? as usize;
        let end = start + names.get(start..)?.iter().position(|&c| c == 0)?;
        (names.get(start..end)? == name.as_bytes())
            .then(|| body(h))
            .flatten()
    })
}

/// Go's unsigned varint (LEB128): the value and how many bytes it took.
fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// The Go version ("go1.26.8") in build info that starts with the magic. None for the pre-1.18
/// layout (pointers into the data segment instead of inline strings).
pub fn parse_go_buildinfo(info: &[u8]) -> Option<String> {
    if info.get(..GO_BUILDINFO_MAGIC.len())? != GO_BUILDINFO_MAGIC {
        return None;
    }
    let flags = *info.get(15)?;
    if flags & GO_FLAG_INLINE_STRINGS == 0 {
        return None;
    }
    let rest = info.get(GO_BUILDINFO_HEADER..)?;
    let (len, used) = uvarint(rest)?;
    let version = rest.get(used..used.checked_add(len as usize)?)?;
    let version = std::str::from_utf8(version).ok()?;
    version.starts_with("go").then(|| version.to_string())
}

/// The Go version a binary was built with: its `.go.buildinfo` section, else the magic wherever
/// it sits 16-byte aligned (a binary whose section headers were stripped).
pub fn go_version_of_bytes(binary: &[u8]) -> Option<String> {
    if let Some(version) = elf_section(binary, ".go.buildinfo").and_then(parse_go_buildinfo) {
        return Some(version);
    }
    (0..binary.len())
        .step_by(16)
        .filter(|&at| binary[at..].starts_with(GO_BUILDINFO_MAGIC))
        .find_map(|at| parse_go_buildinfo(&binary[at..]))
}

pub fn go_version(binary: &Path) -> Option<String> {
    go_version_of_bytes(&fs::read(binary).ok()?)
}

/// The rustc that built an ELF binary: its `.comment` has "rustc version 1.95.0 (… …)", given
/// back as `rustc --version` prints it ("rustc 1.95.0 (… …)").
pub fn rust_version_of_bytes(binary: &[u8]) -> Option<String> {
    let comment = elf_section(binary, ".comment")?;
    comment
        .split(|&c| c == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
        .find_map(|s| s.strip_prefix("rustc version "))
        .map(|v| format!("rustc {v}"))
}

/// Reads at most the first 256 MiB: a workload binary is a few MiB, but the section headers sit
/// at the end of the file, and the conductor's own test binary (which the tests read) passed
/// 64 MiB with its line tables.
pub fn rust_version(binary: &Path) -> Option<String> {
    let bytes = fs::read(binary).ok()?;
    rust_version_of_bytes(&bytes[..bytes.len().min(256 << 20)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A Go 1.18+ build info block: magic, pointer size 8, flags (inline strings), padding to 32
    /// bytes, then the varint-length version and module info.
    fn crafted(version: &str, flags: u8) -> Vec<u8> {
        let mut b = GO_BUILDINFO_MAGIC.to_vec();
        b.push(8);
        b.push(flags);
        b.resize(GO_BUILDINFO_HEADER, 0);
        b.push(version.len() as u8);
        b.extend_from_slice(version.as_bytes());
        let modinfo = "path\tspawnscope/goroutines\n";
        b.push(modinfo.len() as u8);
        b.extend_from_slice(modinfo.as_bytes());
        b
    }

    #[test]
    fn go_buildinfo_from_crafted_bytes() {
        assert_eq!(
            parse_go_buildinfo(&crafted("go1.22.5", 0x2)).as_deref(),
            Some("go1.22.5")
        );
        // Big-endian flag beside the inline one changes nothing for the strings.
        assert_eq!(
            parse_go_buildinfo(&crafted("go1.26.8", 0x3)).as_deref(),
            Some("go1.26.8")
        );
        assert_eq!(
            parse_go_buildinfo(&crafted("go1.17", 0x0)),
            None,
            "pre-1.18 layout"
        );
        assert_eq!(parse_go_buildinfo(b"\xff Go buildinf"), None, "truncated");
        // Found by its magic at a 16-byte boundary in a file that is not ELF.
        let mut file = vec![0u8; 48];
        file.extend(crafted("go1.21.0", 0x2));
        assert_eq!(go_version_of_bytes(&file).as_deref(), Some("go1.21.0"));
        // A length past the end is no version.
        let mut bad = crafted("go1.21.0", 0x2);
        bad[GO_BUILDINFO_HEADER] = 200;
        assert_eq!(parse_go_buildinfo(&bad[..60]), None);
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
    }

    /// The goroutines binary the tests use: $SPAWNSCOPE_GOROUTINES_BIN, else beside the test's
    /// target dir (built by ensure_workloads / scripts/lib/common.sh), else skipped.
    fn goroutines_bin() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("SPAWNSCOPE_GOROUTINES_BIN") {
            return Some(PathBuf::from(p));
        }
        let exe = std::env::current_exe().ok()?;
        // target/release/deps/spawnscope-… → target/release/goroutines
        let p = exe.parent()?.parent()?.join("goroutines");
        p.is_file().then_some(p)
    }

    #[test]
    fn go_version_of_the_real_goroutines_binary() {
        let Some(bin) = goroutines_bin() else {
            eprintln!("SKIP: no goroutines binary (go build it into target/release)");
            return;
        };
        let version = go_version(&bin).expect("a Go binary has build info");
        assert!(version.starts_with("go1."), "{version}");
        assert!(
            elf_section(&fs::read(&bin).unwrap(), ".go.buildinfo").is_some(),
            "found through its section"
        );
        // What the binary says at run time is what `runtime.Version()` prints: compare with the
        // toolchain that built it when there is one here.
        if let Ok(out) = std::process::Command::new("go")
            .arg("env")
            .arg("GOVERSION")
            .output()
        {
            let toolchain = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if out.status.success() && !toolchain.is_empty() {
                eprintln!("binary {version}, toolchain {toolchain}");
            }
        }
    }

    #[test]
    fn rust_version_of_this_test_binary() {
        let me = std::env::current_exe().unwrap();
        let version = rust_version(&me).expect("rustc writes .comment");
        assert!(version.starts_with("rustc 1."), "{version}");
        assert_eq!(go_version(&me), None, "not a Go binary");
        assert_eq!(elf_section(b"not an ELF", ".comment"), None);
    }
}
