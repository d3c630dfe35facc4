#!/usr/bin/env bash
# Benchmark: what one task costs in `hold` (all tasks alive at once) — RSS per task and spawn time
# per task — for 100k threads and 1M goroutines and tokio tasks, beside the same figures from a bare
# program that does nothing but hold N tasks (scripts/bench/bare-*, and tokio-rs/examples/bare-tokio.rs,
# a cargo example because it needs the tokio crate). The ratio says whether the workloads add
# anything to what the runtime itself costs. Per-task RSS is the slope between N and N/100, so
# fixed costs (binary, runtime, heap arenas) cancel out.
#
# Usage: sudo ./scripts/bench-workloads.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 100000 1000000 5; tokio runs GOROUTINES_N tasks too). Root raises vm.max_map_count and kernel.pid_max for the
#        threads run and restores them on every exit; without root the threads N is capped by them.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

bench_args 100000 1000000 5 "$@"

need_toolchains
need_command jq
build_workloads
bench_dir="$REPO_ROOT/target/bench"
mkdir -p "$bench_dir"
rustc -O --edition 2021 -o "$bench_dir/bare-threads" scripts/bench/bare-threads.rs
go build -o "$bench_dir/bare-goroutines" scripts/bench/bare-goroutines.go
cargo build --release --quiet -p tokio-tasks --example bare-tokio
cp target/release/examples/bare-tokio "$bench_dir/bare-tokio"

# Raise the two sysctls 100k threads need, and put them back however the script ends.
saved_sysctls=()
restore_sysctls() {
  local entry
  for entry in "${saved_sysctls[@]}"; do
    sysctl -q -w "$entry"
  done
}
raise_sysctl() { # KEY MIN
  local current
  current=$(sysctl -n "$1")
  if [ "$current" -lt "$2" ]; then
    saved_sysctls+=("$1=$current")
    sysctl -q -w "$1=$2"
  fi
}
trap restore_sysctls EXIT
trap 'exit 130' INT TERM
if is_root; then
  raise_sysctl vm.max_map_count $((threads_n * 4 + 65536))
  raise_sysctl kernel.pid_max $((threads_n + 65536 > 4194304 ? 4194304 : threads_n + 65536))
else
  warn "not root: sysctls stay as they are, so the threads run may stop early (see its failure)"
fi

# ours BIN N: "rss_kb spawn_ns alive" from a hold run's peak event and result.
ours() {
  local out
  out=$("$1" hold --n "$2" --hold-for 0s 2>/dev/null || true)
  jq -rs '(map(select(.event == "peak"))[0]) as $p | (map(select(.event == "result"))[0]) as $r
          | "\($p.status.vm_rss_kb) \($r.spawn_ns_per_task | floor) \($p.alive)"' <<<"$out"
}
# bare BIN N: "rss_kb spawn_ns"
bare() {
  "$1" "$2" | sed -E 's/rss_kb=([0-9]+) spawn_ns=([0-9]+)/\1 \2/'
}

results=()
# The medians, also as CSV (what a page of the manual quotes): results/bench-workloads-<UTC>/.
out="$REPO_ROOT/results/bench-workloads-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
csv="$out/workloads.csv"
echo "runtime,n,repeats,rss_bytes_ours,rss_bytes_bare,rss_ratio,spawn_ns_ours,spawn_ns_bare,spawn_ratio" >"$csv"
for runtime in threads goroutines tokio; do
  n=$goroutines_n binary=$runtime
  [ "$runtime" = threads ] && n=$threads_n
  [ "$runtime" = tokio ] && binary=tokio-tasks
  small=$((n / 100 > 0 ? n / 100 : 1))
  ours_rss=() bare_rss=() ours_ns=() bare_ns=()
  for ((r = 1; r <= repeats; r++)); do
    # Alternate which program goes first: the machine's state after a big run (memory being
    # freed, caches) must not favour one side.
    say "$runtime: run $r of $repeats (hold, N=$n and N=$small, ours and bare in turn)"
    if ((r % 2)); then
      read -r big_kb spawn_ns alive < <(ours "$BIN_DIR/$binary" "$n")
      read -r bare_big_kb bare_spawn_ns < <(bare "$bench_dir/bare-$runtime" "$n")
    else
      read -r bare_big_kb bare_spawn_ns < <(bare "$bench_dir/bare-$runtime" "$n")
      read -r big_kb spawn_ns alive < <(ours "$BIN_DIR/$binary" "$n")
    fi
    [ "$alive" = "$n" ] || die "$runtime hold reached $alive of $n alive: raise the limits (run as root)"
    read -r small_kb _ _ < <(ours "$BIN_DIR/$binary" "$small")
    read -r bare_small_kb _ < <(bare "$bench_dir/bare-$runtime" "$small")
    ours_rss+=("$(( (big_kb - small_kb) * 1024 / (n - small) ))")
    bare_rss+=("$(( (bare_big_kb - bare_small_kb) * 1024 / (n - small) ))")
    ours_ns+=("$spawn_ns")
    bare_ns+=("$bare_spawn_ns")
  done
  m_ours_rss=$(median "${ours_rss[@]}")
  m_bare_rss=$(median "${bare_rss[@]}")
  m_ours_ns=$(median "${ours_ns[@]}")
  m_bare_ns=$(median "${bare_ns[@]}")
  rss_ratio=$(ratio "$m_ours_rss" "$m_bare_rss")
  ns_ratio=$(ratio "$m_ours_ns" "$m_bare_ns")
  echo "$runtime,$n,$repeats,$m_ours_rss,$m_bare_rss,$rss_ratio,$m_ours_ns,$m_bare_ns,$ns_ratio" >>"$csv"
  results+=("$(awk -v rt="$runtime" -v n="$n" -v orss="$m_ours_rss" -v brss="$m_bare_rss" -v rr="$rss_ratio" \
    -v ons="$m_ours_ns" -v bns="$m_bare_ns" -v nr="$ns_ratio" 'BEGIN {
      printf "| %s | %d | %d | %d | %.3f | %d | %d | %.3f |", rt, n, orss, brss, rr, ons, bns, nr }')")
done

echo
echo "hold, median of $repeats runs; RSS per task = slope between N and N/100 (bytes)"
echo
echo "| runtime | N | RSS/task ours | RSS/task bare | ratio | spawn ns/task ours | bare | ratio |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${results[@]}"
give_to_invoker "$REPO_ROOT/results"
echo
echo "CSV: ${csv#"$REPO_ROOT"/} ($(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%d))"
