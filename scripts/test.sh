#!/usr/bin/env bash
# Runs every test of the project: lint (shellcheck, clippy, go vet, gofmt), the scripts' shared
# helpers, the Rust and Go test suites (workloads, contract, conductor) and the checks of the other
# parts; and the v2 paths under another kernel: Debian's 6.12 with cgroup v2 booted in a VM
# (scripts/test-kernels.sh --suite ci 6.12: the memory modes and the leash). Installs the OS
# packages it needs on Debian/Ubuntu when run as root (CI is), and says so. A step that cannot
# run on this host at all (the VM without root or QEMU) is counted as skipped, with its reason.
# Usage: ./scripts/test.sh            Exit status: 0 when every step passed.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

need_toolchains
need_packages "${BUILD_PACKAGES[@]}" "${LOAD_PACKAGES[@]}" "${STUDY_PACKAGES[@]}" shellcheck chromium stress-ng || warn "some steps will fail or skip for lack of packages"

passed=0
failed=0
skipped=0
failed_steps=()
skipped_steps=()

# step NAME CMD...: runs one step, keeps going when it fails, counts it.
step() {
  local name=$1
  shift
  say "$name"
  local rc=0 started=$SECONDS
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
  elif [ "$rc" -eq 77 ]; then
    # 77: the step cannot run on this host (it printed why); counted apart, never as passed.
    skipped=$((skipped + 1))
    skipped_steps+=("$name")
  else
    failed=$((failed + 1))
    failed_steps+=("$name")
  fi
  [ $((SECONDS - started)) -lt 60 ] || say "$name: $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s"
}

lint_shell() {
  local scripts
  mapfile -t scripts < <(git ls-files -co --exclude-standard -- '*.sh' '*.bash' .ci/run)
  shellcheck -x "${scripts[@]}"
}
lint_gofmt() {
  local unformatted
  unformatted=$(gofmt -l goroutines-go gotrace-reduce spawnscope/tests/programs examples/go)
  [ -z "$unformatted" ] || { echo "not gofmt-clean: $unformatted"; return 1; }
}
in_go_module() { (cd goroutines-go && "$@"); }
in_reducer_module() { (cd gotrace-reduce && "$@"); }
# The Go programs the conductor runs as commands (tests/programs/*, examples/go: one module each).
vet_test_programs() {
  local module
  for module in spawnscope/tests/programs/*/go.mod examples/go/go.mod; do
    (cd "$(dirname "$module")" && go vet ./...) || return 1
  done
}

step "shellcheck" lint_shell
step "script helpers (median, min, max, ratio, arguments)" ./scripts/test-lib.sh
step "rustfmt" cargo fmt --all --check
step "clippy" cargo clippy --release --workspace --all-targets --quiet -- -D warnings
step "gofmt" lint_gofmt
step "go vet" in_go_module go vet ./...
step "go vet (test programs, examples/go)" vet_test_programs
step "go test (goroutines)" in_go_module go test -count=1 ./...
step "go vet (gotrace-reduce)" in_reducer_module go vet ./...
step "go test (gotrace-reduce)" in_reducer_module go test -count=1 ./...
# --no-fail-fast: one failing suite must not hide the results of the others.
step "cargo test (workloads, contract, collector, conductor)" cargo test --release --workspace --no-fail-fast
# the_manual: the mdBook in docs/ builds, and no page links to a page or anchor that is not
# there. The figures, the man page and the reference pages are checked by cargo test (tests/docs.rs).
the_manual() {
  if ! need_mdbook; then
    echo "SKIP: mdbook is not installed and could not be (cargo install mdbook --locked needs crates.io)"
    return 77
  fi
  mdbook build docs && "$BIN_DIR/spawnscope" docs links target/book
}
step "the manual (mdbook build docs, dead internal links)" the_manual
step "nix flake (offline)" ./scripts/test-nix.sh
step "bpftrace tools" ./scripts/test-bpftrace-tools.sh

# hold_smoke BIN: a real hold run at N=2000 must report 2000 alive at its peak.
hold_smoke() {
  local peak
  peak=$("$1" hold --n 2000 </dev/null | grep '^{"event":"peak"')
  echo "$peak"
  grep -q '"alive":2000,"expected":2000,' <<<"$peak"
}
step "build the workloads" build_workloads
step "hold 2000 threads" hold_smoke "$BIN_DIR/threads"
step "hold 2000 goroutines" hold_smoke "$BIN_DIR/goroutines"
step "hold 2000 tokio tasks" hold_smoke "$BIN_DIR/tokio-tasks"
# The cgroup v2 paths (sleep's, command mode's, the leash's), which this host's v1 never takes:
# one kernel in a VM, CI's suite (7 min 42 s measured under QEMU's emulation, the kernel cached;
# the whole matrix is ./scripts/test-kernels.sh). Exit 77 from it: no VM possible here, said why.
step "kernel 6.12, cgroup v2, in a VM (memory modes, the leash)" ./scripts/test-kernels.sh --suite ci 6.12

# sleepers_smoke: the 2024 article's Rust programs (cargo examples) at 1,000 tasks, together: each
# must exit 0 after its tasks' 10 s sleep. (The Java ones run in cargo test where a JDK 21+ is.)
sleepers_smoke() {
  local dir=$REPO_ROOT/target/release/examples name pid pids=() start took rc=0
  start=$(date +%s)
  for name in tokio-sleepers async-std-sleepers join-all-sleepers; do
    "$dir/$name" 1000 </dev/null &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || rc=1
  done
  took=$(($(date +%s) - start))
  echo "3 programs × 1,000 tasks sleeping 10 s: ${took} s, exit ${rc}"
  [ "$rc" -eq 0 ] && [ "$took" -ge 10 ]
}
step "the 2024 article's Rust programs at 1,000 tasks" sleepers_smoke

# coroutines_smoke: examples/coroutines (libcopp-2018) at 100 coroutines, each backend fresh and
# pooled: a result line whose create and switch are figures, one page fault per fresh create and
# none on a pooled stack reused. 77 (said why) without a C++ compiler.
coroutines_smoke() {
  build_coroutines || return $?
  local dir=$REPO_ROOT/target/release/examples run backend=() out
  for run in "coroutines-ucontext ucontext" "coroutines-ucontext ucontext --pool" \
    "coroutines-boost fcontext" "coroutines-boost fcontext --pool"; do
    read -r -a backend <<<"$run"
    if [ ! -x "$dir/${backend[0]}" ]; then
      echo "skipped ${run}: ${backend[0]} not built (above)"
      continue
    fi
    out=$("$dir/${backend[0]}" "${backend[@]:1}" --switches 10 100 | jq -c 'select(.event == "result")') || return 1
    echo "$run 100: $out"
    jq -e '.create_ns > 0 and .switch_ns > 0 and .minflt_per_create >= 1 and .spawned == 100' <<<"$out" >/dev/null || return 1
    case $run in
      *--pool) jq -e '.minflt_per_create_later_rounds == 0' <<<"$out" >/dev/null || return 1 ;;
    esac
  done
  "$dir/coroutines-ucontext" ucontext 0 2>/dev/null && return 1
  [ $? -eq 2 ]
}
step "examples/coroutines at 100 coroutines (ucontext, Boost.Context; fresh and pooled)" coroutines_smoke

# kotlin_chain_smoke: bench-of-chan's Kotlin program, built with Maven on the JDK spawnscope
# finds, at 100 workers × 1,000 events: one CSV line in the article's shape. 77 (said why)
# without mvn or a JDK 17+.
kotlin_chain_smoke() {
  build_kotlin_chain || return $?
  local line
  line=$(kotlin_chain -w 100 -e 1000 -q 256 -t str_ptr) || return 1
  echo "$line"
  [[ $line =~ ^kotlin,str_ptr,100,1000,[0-9.]+,[0-9]+$ ]]
}
step "examples/kotlin-chain at 100 workers (Maven, kotlinx.coroutines)" kotlin_chain_smoke

echo
if [ "$failed" -gt 0 ]; then
  printf 'failed: %s\n' "${failed_steps[@]}"
fi
if [ "$skipped" -gt 0 ]; then
  printf 'skipped (could not run on this host; the reason is above): %s\n' "${skipped_steps[@]}"
fi
echo "test.sh: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
