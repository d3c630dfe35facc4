# shellcheck shell=bash
# Shared by the scripts in scripts/: messages, arguments, OS packages, building what is missing,
# and the jobs and files a script leaves. Statistics live in lib/stats.sh.
# Sourced, never run; callers set -euo pipefail themselves.

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export REPO_ROOT
BIN_DIR="$REPO_ROOT/target/release"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# is_count VALUE: VALUE is a whole number from 1 to 999999999 (no sign, no leading zero; the cap
# keeps every product the scripts form from it within shell arithmetic).
is_count() { [[ "$1" =~ ^[1-9][0-9]{0,8}$ ]]; }

# traced_round REPEATS: the round, of REPEATS + 1, in which trace.sh's main job attaches the
# collector (one traced run per workload, for counts and waits; the other rounds run untraced and
# time it). The middle one: neither the first after the warm-up nor the last, so that whatever a
# stretch of the machine does to one end of the sequence falls on timed runs, never on the traced
# one alone (with REPEATS = 1 there is no middle: the last).
traced_round() { echo $((($1 + 1) / 2 + 1)); }

# run_ended RC WHAT: what a `spawnscope run` that exited RC means for a set of runs (the exit codes:
# docs/reference/exit-codes.md). 4 (the workload failed, hit a limit or was stopped) and 5 (it
# completed but its counts disagree with the kernel's: a cross-check failed) wrote their results:
# said as a warning naming WHAT, and the set goes on, as `compare` goes on past them (status 0).
# Anything else but 0 (failed, refused, a signal) stops the set: status RC.
run_ended() {
  case $1 in
    0) ;;
    4) warn "$2 did not complete (exit 4: the workload failed, hit a limit or was stopped; its results are kept, see its summary.md); going on" ;;
    5) warn "$2 completed but its counts are WRONG (exit 5: a cross-check against the kernel's accounting failed; its summary.md says which); going on" ;;
    *) return "$1" ;;
  esac
}

# worse_exit A B: the stronger of two sets-of-runs exit codes among 0, 4 and 5, as `compare` ends
# with its runs': 4 (a run did not complete) wins over 5 (a run's counts were wrong), 5 over 0.
worse_exit() {
  if [ "$1" -eq 4 ] || [ "$2" -eq 4 ]; then
    echo 4
  elif [ "$1" -eq 5 ] || [ "$2" -eq 5 ]; then
    echo 5
  else
    echo 0
  fi
}

# write_plan FILE REPEATS TRACED_RUNS ARGV... -- CELL...: a set's plan.json as `compare` writes one
# (its command, repeats and cells "RUNTIME WORKLOAD N"; TRACED_RUNS beside the untraced repeats, or
# - when every run is traced), written before the first run so that a set committed under docs/
# says how it was made. elapsed_s and the warm-up's size are added when they are known.
write_plan() {
  local file=$1 repeats=$2 traced=$3 argv=()
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do argv+=("$1"); shift; done
  [ "${1:-}" = -- ] && shift
  [ "$traced" = - ] && traced=null
  jq -n --arg created "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)" --argjson repeats "$repeats" \
    --argjson traced "$traced" --argjson argv "$(jq -n '$ARGS.positional' --args "${argv[@]}")" \
    --args '{schema: 1, created_utc: $created, argv: $argv, reproduce: null, repeats: $repeats}
      + (if $traced == null then {} else {traced_runs: $traced} end)
      + {stopped: null, cells: [$ARGS.positional[] | split(" ") |
          {runtime: .[0], workload: .[1], requested_n: (.[2] | tonumber), n: (.[2] | tonumber), note: null}]}' \
    "$@" >"$file"
}

# bench_args T G R ARGS...: the bench scripts' arguments [THREADS_N [GOROUTINES_N [REPEATS]]],
# defaults T G R, into threads_n, goroutines_n and repeats. Bad arguments: one line saying why
# and how to call the script, exit 2.
bench_args() {
  local script=${0##*/} value
  local usage="usage: $script [THREADS_N [GOROUTINES_N [REPEATS]]] (defaults $1 $2 $3)"
  [ $# -le 6 ] || { echo "$script: at most 3 arguments; $usage" >&2; exit 2; }
  # shellcheck disable=SC2034 # read by the bench scripts
  threads_n=${4:-$1} goroutines_n=${5:-$2} repeats=${6:-$3}
  for value in "${@:4}"; do
    is_count "$value" || { echo "$script: '$value' is not a positive whole number; $usage" >&2; exit 2; }
  done
}

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

# is_installed PKG: dpkg has PKG installed.
is_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# has_candidate: reads `apt-cache policy PKG` on stdin; true when apt can install PKG (a
# `Candidate:` other than `(none)`). Ubuntu has no `linux-perf`, Debian no `linux-tools-*`.
has_candidate() { awk '$1 == "Candidate:" && $2 != "(none)" { found = 1 } END { exit !found }'; }

# apt_updated: `apt-get update` once per script, before the first install.
apt_updated() {
  if [ -z "$APT_UPDATED" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || warn "apt-get update failed"
    APT_UPDATED=1
  fi
}

# pick_package SPEC: SPEC is a package or alternatives `a|b|…` (Debian's name first, then
# Ubuntu's): prints the one installed, else the first apt can install, else nothing.
pick_package() {
  local alt
  local -a alts
  IFS='|' read -r -a alts <<<"$1"
  for alt in "${alts[@]}"; do
    is_installed "$alt" && { echo "$alt"; return 0; }
  done
  for alt in "${alts[@]}"; do
    apt-cache policy "$alt" 2>/dev/null | has_candidate && { echo "$alt"; return 0; }
  done
  return 0
}

# need_packages SPEC...: installs the Debian/Ubuntu packages that are missing, saying which. A
# SPEC `a|b` is satisfied by either (see pick_package). The group goes in one apt-get call; if
# that is refused, each package alone, so one missing name does not keep the others out. Says
# what could not be installed and returns 1 then (also without root or apt-get).
need_packages() {
  local missing=() spec pkg refused=()
  for spec in "$@"; do
    local -a alts
    IFS='|' read -r -a alts <<<"$spec"
    for pkg in "${alts[@]}"; do
      is_installed "$pkg" && continue 2
    done
    missing+=("$spec")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null 2>&1 || ! is_root; then
    warn "missing OS packages: ${missing[*]//|/ or } (install them as root with apt-get)"
    return 1
  fi
  apt_updated
  local install=()
  for spec in "${missing[@]}"; do
    pkg=$(pick_package "$spec")
    if [ -n "$pkg" ]; then install+=("$pkg"); else refused+=("${spec//|/ or } (no such package here)"); fi
  done
  if [ ${#install[@]} -gt 0 ]; then
    say "installing OS packages: ${install[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${install[@]}" >&2; then
      for pkg in "${install[@]}"; do
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$pkg" >&2 ||
          refused+=("$pkg")
      done
    fi
  fi
  if [ ${#refused[@]} -gt 0 ]; then
    warn "could not install: ${refused[*]}"
    return 1
  fi
}

# need_command CMD [PACKAGE]: CMD on PATH, installing PACKAGE (default CMD) when it is not; dies
# when it cannot be had.
need_command() {
  command -v "$1" >/dev/null 2>&1 && return 0
  need_packages "${2:-$1}" || die "$1 is missing"
  command -v "$1" >/dev/null 2>&1 || die "$1 is missing (package ${2:-$1} is installed, but not on PATH)"
}

# The OS packages every part of the project builds or runs with on Debian/Ubuntu (read by the
# scripts that source this file). clang, libelf, zlib, pkg-config: the BPF collector;
# perf: Debian's linux-perf, Ubuntu's linux-tools for the running kernel; bpftrace: the .bt tools;
# jq: trace.sh writes its main job's plan.json with it, and the scripts read JSON with it.
# shellcheck disable=SC2034
BUILD_PACKAGES=(build-essential pkg-config clang libelf-dev zlib1g-dev jq)
# shellcheck disable=SC2034
TRACE_PACKAGES=(bpftrace "linux-perf|linux-tools-$(uname -r)")
# wrk: the load generator of the serve workload (crates/measure/src/loadgen.rs).
# shellcheck disable=SC2034
LOAD_PACKAGES=(wrk)
# The studies' optional programs: g++ and Boost.Context for examples/coroutines (libcopp-2018),
# Maven for examples/kotlin-chain (bench-of-chan; its JDK is the one spawnscope finds).
# shellcheck disable=SC2034
STUDY_PACKAGES=(g++ libboost-context-dev maven)

# need_toolchains: cargo and go on PATH. As root under sudo, cargo and rustup use the invoking
# user's toolchain and cache (root usually has none of its own).
need_toolchains() {
  add_toolchain_paths
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
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust with rustup (https://rustup.rs)"
  if ! command -v go >/dev/null 2>&1; then
    need_packages golang-go || die "go not found: install Go 1.19 or newer"
  fi
}

# The mdBook release the manual is built with (docs/book.toml; mdBook 0.5 builds with Rust 1.88
# or newer).
MDBOOK_VERSION=0.5.4

# need_mdbook: mdbook on PATH, installed from crates.io when it is missing (cargo install, into
# ~/.cargo/bin). Only its `search` feature: `serve` and `watch` (a web server, tokio, a file
# watcher) are half its build and nothing here uses them — 3 min 20 s on 2 busy cores without
# them. Returns 1, saying why, when it cannot be had.
need_mdbook() {
  add_toolchain_paths
  command -v mdbook >/dev/null 2>&1 && return 0
  command -v cargo >/dev/null 2>&1 || { warn "mdbook is missing and cargo is not on PATH to install it"; return 1; }
  say "installing mdbook $MDBOOK_VERSION from crates.io (cargo install mdbook --locked, the search feature only)"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked --quiet \
    --no-default-features --features search >&2 ||
    { warn "cargo install mdbook failed (no access to crates.io?)"; return 1; }
  command -v mdbook >/dev/null 2>&1
}

# give_to_invoker PATH...: as root under sudo, PATH (recursively) back to the user who ran sudo.
give_to_invoker() {
  if is_root && [ -n "${SUDO_UID:-}" ]; then
    chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "$@"
  fi
}

# build_workloads: the four workload binaries, into target/release/.
build_workloads() {
  prebuilt && return 0
  # tokio-sleepers, async-std-sleepers, join-all-sleepers: the 2024 article's Rust programs, for
  # compare --reproduce async-runtimes-2024 (the last two in their own crate, examples/rust-sleepers,
  # so that async-std and futures never reach the workloads).
  say "building the workloads (cargo build --release -p threads -p tokio-tasks -p processes --bins --example tokio-sleepers; -p rust-sleepers --examples; go build goroutines)"
  (cd "$REPO_ROOT" && cargo build --release --quiet -p threads -p tokio-tasks -p processes --bins --example tokio-sleepers)
  (cd "$REPO_ROOT" && cargo build --release --quiet -p rust-sleepers --examples)
  "$REPO_ROOT/scripts/build-goroutines.sh" "$BIN_DIR/goroutines"
  # The Go trace reducer (run --runtime-trace): without a go1.26 toolchain, those runs are refused.
  "$REPO_ROOT/scripts/build-gotrace-reduce.sh" "$BIN_DIR/gotrace-reduce" ||
    warn "gotrace-reduce not built: run --runtime-trace on goroutines will be refused"
  # The tokio workload's hooks build (run --runtime tokio --runtime-trace), in its own target
  # directory (--cfg tokio_unstable): the default tokio-tasks stays as it is.
  "$REPO_ROOT/scripts/build-tokio-hooks.sh" "$BIN_DIR/tokio-tasks-hooks" ||
    warn "tokio-tasks-hooks not built: run --runtime-trace on tokio will be refused"
  build_coroutines || true
}

# build_coroutines: examples/coroutines (the libcopp-2018 study) into target/release/examples/ —
# coroutines-ucontext with a C++ compiler, coroutines-boost when Boost.Context is there too, as
# spawnscope compare --reproduce libcopp-2018 builds them. Returns 77 (saying what is missing) when
# neither can be built.
build_coroutines() {
  local src=$REPO_ROOT/examples/coroutines/coroutines.cc out=$REPO_ROOT/target/release/examples
  if ! command -v c++ >/dev/null 2>&1; then
    warn "examples/coroutines not built: no C++ compiler on PATH (Debian: apt-get install g++)"
    return 77
  fi
  mkdir -p "$out"
  if [ "$out/coroutines-ucontext" -nt "$src" ] && [ "$out/coroutines-boost" -nt "$src" ]; then
    return 0
  fi
  say "building examples/coroutines (c++ -O2: coroutines-ucontext; with -lboost_context: coroutines-boost)"
  c++ -O2 -g -DNDEBUG -o "$out/coroutines-ucontext" "$src" || return 1
  if ! c++ -O2 -g -DNDEBUG -o "$out/coroutines-boost" "$src" -DWITH_BOOST_CONTEXT -lboost_context 2>/dev/null; then
    warn "coroutines-boost not built: no Boost.Context (Debian: apt-get install libboost-context-dev)"
    rm -f "$out/coroutines-boost"
  fi
}

# kotlin_chain_jdk: the home of the JDK spawnscope finds for Kotlin (17+), or a line on stderr
# and 77 when there is none or mvn is missing.
kotlin_chain_jdk() {
  if ! command -v mvn >/dev/null 2>&1; then
    echo "no Kotlin rows: mvn is not on PATH (Debian: apt-get install maven)" >&2
    return 77
  fi
  "$BIN_DIR/spawnscope" check --jdk-home 17 || {
    echo "no Kotlin rows: no JDK 17+ for Maven (above)" >&2
    return 77
  }
}

# build_kotlin_chain: examples/kotlin-chain (bench-of-chan's Kotlin side) with Maven on the JDK
# spawnscope finds, into target/kotlin-chain/ (classes and classpath.txt). 77 when it cannot be.
build_kotlin_chain() {
  local home
  home=$(kotlin_chain_jdk) || return $?
  say "building examples/kotlin-chain (mvn package, JAVA_HOME=$home; Maven Central on the first build)"
  JAVA_HOME=$home mvn -q -B -f "$REPO_ROOT/examples/kotlin-chain/pom.xml" package dependency:build-classpath >&2
}

# kotlin_chain ARGS...: runs the Kotlin chain program built by build_kotlin_chain.
kotlin_chain() {
  local home dir=$REPO_ROOT/target/kotlin-chain
  home=$(kotlin_chain_jdk 2>/dev/null) || return 77
  "$home/bin/java" -cp "$dir/classes:$(cat "$dir/classpath.txt")" ChainKt "$@"
}

# build_all: spawnscope and the workloads; as root under sudo, the build products are given back
# to the invoking user.
# prebuilt: true when SPAWNSCOPE_PREBUILT is set: a read-only checkout (the kernel matrix's VMs
# boot on this one) runs what was built before, and the build steps build nothing.
prebuilt() {
  [ -n "${SPAWNSCOPE_PREBUILT:-}" ] || return 1
  [ -x "$BIN_DIR/spawnscope" ] || die "SPAWNSCOPE_PREBUILT is set but $BIN_DIR/spawnscope was never built"
  say "using the binaries built before (SPAWNSCOPE_PREBUILT): nothing is built"
}

build_all() {
  prebuilt && return 0
  need_toolchains
  say "building spawnscope (cargo build --release -p spawnscope)"
  (cd "$REPO_ROOT" && cargo build --release --quiet -p spawnscope)
  build_workloads
  give_to_invoker "$REPO_ROOT/target"
}

# stop_own_jobs: stops the background jobs this shell started and are still running (never
# anything found by name) and waits for them; for a script's EXIT trap.
stop_own_jobs() {
  local p
  for p in $(jobs -p); do
    kill "$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}

# workload_result FILE JQ: JQ applied to the result event in FILE, a workload's JSON lines.
workload_result() {
  jq -r "select(.event == \"result\") | $2" "$1"
}
