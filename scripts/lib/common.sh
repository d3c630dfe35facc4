# shellcheck shell=bash
# Shared by the scripts in scripts/: messages, OS packages, and building what is missing.
# Sourced, never run; callers set -euo pipefail themselves.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export REPO_ROOT
BIN_DIR="$REPO_ROOT/target/release"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# Where cargo and go live when the shell's PATH lacks them (rustup and the Go tarball install
# there; sudo resets PATH).
add_toolchain_paths() {
  local home_dir
  for home_dir in "${HOME:-/root}" "$(getent passwd "${SUDO_USER:-}" 2>/dev/null | cut -d: -f6)"; do
    [ -n "$home_dir" ] && [ -d "$home_dir/.cargo/bin" ] && PATH="$PATH:$home_dir/.cargo/bin"
  done
  [ -d /usr/local/go/bin ] && PATH="$PATH:/usr/local/go/bin"
  export PATH
}

APT_UPDATED=""

# need_packages PKG...: installs the Debian/Ubuntu packages that are missing, saying which.
# Without root or apt-get it names them and returns 1.
need_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1 || ! is_root; then
    warn "missing OS packages: ${missing[*]} (install them as root with apt-get)"
    return 1
  fi
  say "installing OS packages: ${missing[*]}"
  if [ -z "$APT_UPDATED" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# The OS packages every part of the project builds or runs with on Debian/Ubuntu (read by the
# scripts that source this file). clang, libelf, zlib, pkg-config: the BPF collector;
# linux-perf: perf; bpftrace: the .bt tools.
# shellcheck disable=SC2034
BUILD_PACKAGES=(build-essential pkg-config clang libelf-dev zlib1g-dev)
# shellcheck disable=SC2034
TRACE_PACKAGES=(bpftrace linux-perf)

need_toolchains() {
  add_toolchain_paths
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs)"
  if ! command -v go >/dev/null 2>&1; then
    need_packages golang-go || die "go not found: install Go 1.22 or newer"
  fi
}

# build_workloads: the two workload binaries, into target/release/.
build_workloads() {
  say "building the workloads (cargo build --release -p threads; go build goroutines)"
  (cd "$REPO_ROOT" && cargo build --release --quiet -p threads)
  (cd "$REPO_ROOT/goroutines-go" && go build -trimpath -o "$BIN_DIR/goroutines" .)
}

# build_all: spawnscope and the workloads. As root under sudo, cargo and rustup use the invoking
# user's toolchain and cache, and the build products are given back to that user.
build_all() {
  need_toolchains
  if is_root && [ -n "${SUDO_USER:-}" ]; then
    local user_home
    user_home=$(getent passwd "$SUDO_USER" | cut -d: -f6)
    if [ -d "$user_home/.rustup" ] && [ ! -d "${HOME:-/root}/.rustup" ]; then
      export RUSTUP_HOME="$user_home/.rustup"
    fi
    if [ -d "$user_home/.cargo" ] && [ ! -d "${HOME:-/root}/.cargo/registry" ]; then
      export CARGO_HOME="$user_home/.cargo"
    fi
  fi
  say "building spawnscope (cargo build --release -p spawnscope)"
  (cd "$REPO_ROOT" && cargo build --release --quiet -p spawnscope)
  build_workloads
  if is_root && [ -n "${SUDO_UID:-}" ]; then
    chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$REPO_ROOT/target"
  fi
}
