#!/usr/bin/env bash
# Benchmark: what the eBPF collector costs the workload it traces. Alternates `spawnscope run`
# with and without the collector (--no-probes) on the same workload — 100,000 threads and
# 1,000,000 goroutines in `hold` — and prints the ratio traced/untraced of the workload's wall
# time (release to reap, run.json's wall_ns): the median over repeats, with min and max as spread.
# Goal: 1.03x or less. Then it runs scripts/bench-bpftrace.sh on the same sizes, for the
# bpftrace tools' overhead (expected to be much higher).
#
# Usage: sudo ./scripts/bench-overhead.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 100000 1000000 5). Needs root. Raises the sysctls THREADS_N threads need with
#        `spawnscope sysctl apply` and restores them on every exit.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

usage="usage: bench-overhead.sh [THREADS_N [GOROUTINES_N [REPEATS]]] (defaults 100000 1000000 5)"
[ $# -le 3 ] || { echo "bench-overhead.sh: at most 3 arguments; $usage" >&2; exit 2; }
threads_n=${1:-100000}
goroutines_n=${2:-1000000}
repeats=${3:-5}
for value in "$threads_n" "$goroutines_n" "$repeats"; do
  [[ "$value" =~ ^[1-9][0-9]{0,8}$ ]] || {
    echo "bench-overhead.sh: '$value' is not a positive whole number; $usage" >&2
    exit 2
  }
done
is_root || die "the collector needs root: sudo $0 $*"
command -v jq >/dev/null 2>&1 || need_packages jq || die "jq is missing"
need_toolchains
say "building spawnscope and the workloads"
cargo build --release --quiet -p spawnscope
build_workloads
spawnscope="$BIN_DIR/spawnscope"

work=$(mktemp -d)
restore() {
  "$spawnscope" sysctl restore >/dev/null || warn "sysctl restore failed: run spawnscope sysctl restore"
  rm -rf "$work"
}
trap restore EXIT
trap 'exit 130' INT TERM
"$spawnscope" sysctl apply --n "$threads_n" >/dev/null

# wall RUNTIME N KIND R: one run; prints its workload wall time in seconds.
wall() {
  local out="$work/$1-$4-$3" extra=()
  [ "$3" = untraced ] && extra=(--no-probes)
  "$spawnscope" run --runtime "$1" --workload hold --n "$2" --out "$out" "${extra[@]}" >"$out.log" 2>&1 ||
    die "spawnscope run failed: $(tail -3 "$out.log")"
  jq -r '.wall_ns / 1e9' "$out"/*/run.json
}

stats() { sort -g | awk '{v[NR]=$1} END {printf "%.3f %.3f %.3f\n", v[int((NR+1)/2)], v[1], v[NR]}'; }

rows=()
for runtime in threads goroutines; do
  n=$threads_n
  [ "$runtime" = goroutines ] && n=$goroutines_n
  traced=() untraced=() ratios=()
  for ((r = 1; r <= repeats; r++)); do
    say "$runtime hold --n $n: repeat $r of $repeats"
    # Alternate which goes first, so neither always runs on a machine freeing the last run.
    if ((r % 2)); then
      u=$(wall "$runtime" "$n" untraced "$r")
      t=$(wall "$runtime" "$n" traced "$r")
    else
      t=$(wall "$runtime" "$n" traced "$r")
      u=$(wall "$runtime" "$n" untraced "$r")
    fi
    untraced+=("$u")
    traced+=("$t")
    ratios+=("$(awk -v t="$t" -v u="$u" 'BEGIN {printf "%.4f", t / u}')")
  done
  read -r u_med _ _ < <(printf '%s\n' "${untraced[@]}" | stats)
  read -r t_med _ _ < <(printf '%s\n' "${traced[@]}" | stats)
  read -r r_med r_min r_max < <(printf '%s\n' "${ratios[@]}" | stats)
  rows+=("| $runtime hold | $n | $u_med | $t_med | $r_med | $r_min – $r_max |")
done

echo
echo "eBPF collector overhead: workload wall time, median of $repeats alternating runs"
echo
echo "| workload | N | untraced (s) | traced (s) | ratio | ratio min – max |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
say "bpftrace tools on the same sizes"
./scripts/bench-bpftrace.sh "$threads_n" "$goroutines_n" "$repeats"
