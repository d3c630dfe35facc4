#!/usr/bin/env bash
# Benchmark: what the eBPF collector costs the workload it traces. Alternates `spawnscope run`
# with and without the collector (--no-probes) on the same workload — 100,000 threads and
# 1,000,000 goroutines in `hold` — and prints the ratios traced/untraced of the workload's wall
# time (release to reap, run.json's wall_ns) and of its CPU time (wait4 user + sys: the probes run
# in the traced tasks' context, so their cost is charged there): the median over repeats, with min
# and max as spread, and every run's figures so the machine's noise is in view. Goal: 1.03x or
# less. Then it runs scripts/bench-bpftrace.sh for the bpftrace tools' overhead (expected to be
# much higher), on GOROUTINES_N goroutines and BPFTRACE_THREADS_N threads (default 20000):
# switches.bt slows 100,000 threads by more than ten times (over 3 minutes a run on 2 cores).
#
# Usage: sudo ./scripts/bench-overhead.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 100000 1000000 5). Needs root. Raises the sysctls THREADS_N threads need with
#        `spawnscope sysctl apply` and restores them on every exit.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

bench_args 100000 1000000 5 "$@"
is_root || die "the collector needs root: sudo $0 $*"
need_command jq
build_all
spawnscope="$BIN_DIR/spawnscope"

work=$(mktemp -d)
restore() {
  "$spawnscope" sysctl restore >/dev/null || warn "sysctl restore failed: run spawnscope sysctl restore"
  rm -rf "$work"
}
trap restore EXIT
trap 'exit 130' INT TERM
"$spawnscope" sysctl apply --n "$threads_n" >/dev/null

# measure RUNTIME N KIND R: one run; prints its workload wall time and CPU time in seconds.
measure() {
  local out="$work/$1-$4-$3" extra=()
  [ "$3" = untraced ] && extra=(--no-probes)
  "$spawnscope" run --runtime "$1" --workload hold --n "$2" --out "$out" "${extra[@]}" >"$out.log" 2>&1 ||
    die "spawnscope run failed: $(tail -3 "$out.log")"
  jq -r '"\(.wall_ns / 1e9) \((.rusage.user_us + .rusage.sys_us) / 1e6)"' "$out"/*/run.json
}

# median3 NUM...: the median to 3 decimals. spread3 NUM...: "median (min – max)" to 3 decimals.
median3() {
  local m
  m=$(median "$@") || return 1
  awk -v m="$m" 'BEGIN { printf "%.3f", m }'
}
spread3() {
  local s
  s=$(stats "$@") || return 1
  awk -v s="$s" 'BEGIN { split(s, v, " "); printf "%.3f (%.3f – %.3f)", v[1], v[2], v[3] }'
}

rows=()
for runtime in threads goroutines; do
  n=$threads_n
  [ "$runtime" = goroutines ] && n=$goroutines_n
  u_walls=() t_walls=() wall_ratios=() u_cpus=() t_cpus=() cpu_ratios=()
  for ((r = 1; r <= repeats; r++)); do
    say "$runtime hold --n $n: repeat $r of $repeats"
    # Alternate which goes first, so neither always runs on a machine freeing the last run.
    if ((r % 2)); then
      read -r u_wall u_cpu < <(measure "$runtime" "$n" untraced "$r")
      read -r t_wall t_cpu < <(measure "$runtime" "$n" traced "$r")
    else
      read -r t_wall t_cpu < <(measure "$runtime" "$n" traced "$r")
      read -r u_wall u_cpu < <(measure "$runtime" "$n" untraced "$r")
    fi
    printf '  untraced %.3f s wall, %.3f s CPU; traced %.3f s wall, %.3f s CPU\n' \
      "$u_wall" "$u_cpu" "$t_wall" "$t_cpu"
    u_walls+=("$u_wall") t_walls+=("$t_wall") u_cpus+=("$u_cpu") t_cpus+=("$t_cpu")
    wall_ratios+=("$(ratio "$t_wall" "$u_wall")")
    cpu_ratios+=("$(ratio "$t_cpu" "$u_cpu")")
  done
  # One command substitution per assignment, so that set -e stops the script if one fails.
  med_u_wall=$(median3 "${u_walls[@]}")
  med_t_wall=$(median3 "${t_walls[@]}")
  wall_spread=$(spread3 "${wall_ratios[@]}")
  med_u_cpu=$(median3 "${u_cpus[@]}")
  med_t_cpu=$(median3 "${t_cpus[@]}")
  cpu_spread=$(spread3 "${cpu_ratios[@]}")
  rows+=("| $runtime hold | $n | $med_u_wall | $med_t_wall | $wall_spread | $med_u_cpu | $med_t_cpu | $cpu_spread |")
done

echo
echo "eBPF collector overhead: the workload's wall and CPU time, median of $repeats alternating pairs"
echo
echo "| workload | N | untraced wall (s) | traced wall (s) | wall ratio (min – max) | untraced CPU (s) | traced CPU (s) | CPU ratio (min – max) |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
bpftrace_threads_n=${BPFTRACE_THREADS_N:-20000}
say "bpftrace tools: $bpftrace_threads_n threads, $goroutines_n goroutines"
./scripts/bench-bpftrace.sh "$bpftrace_threads_n" "$goroutines_n" "$repeats"
