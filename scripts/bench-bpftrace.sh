#!/usr/bin/env bash
# Benchmark: what each bpftrace tool in probes/*.bt costs the process it traces. Runs
# `threads hold --n THREADS_N --hold-for 0s` and `goroutines hold --n GOROUTINES_N --hold-for 0s`
# untraced and traced by each tool in turn (the order rotates every repeat, so neither side
# always runs on a machine still freeing the last run's memory), and prints a markdown table of
# wall-time ratios traced/untraced: the median over repeats, with the min and max as spread.
#
# Wall time runs from the release of the workload to its exit. Every run starts the same way: a
# shell waits on a FIFO and then execs the workload, and for a traced run bpftrace is attached to
# that PID before the release. bpftrace's own start-up (compiling, loading, attaching), which
# comes before the release and is not in the wall time, gets a column of its own.
#
# Usage: sudo ./scripts/bench-bpftrace.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 20000 200000 5). Needs root. Changes no sysctl, so THREADS_N must stay
#        within kernel.pid_max and kernel.threads-max as they are; restores nothing.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

bench_args 20000 200000 5 "$@"

is_root || die "bpftrace needs root: sudo $0 $*"
need_command bpftrace
[ -d /sys/kernel/tracing/events ] || die "tracefs is not mounted: mount -t tracefs nodev /sys/kernel/tracing"
need_command jq
need_toolchains
build_workloads

tools=(taskcreate faultbuckets switches)
# switches.bt keeps a few map entries per live thread; bpftrace's default limit is 4096 (named
# BPFTRACE_MAP_KEYS_MAX up to 0.19, BPFTRACE_MAX_MAP_KEYS from 0.20). Sized from THREADS_N.
keys=$((threads_n * 2 + 65536))
export BPFTRACE_MAP_KEYS_MAX=$keys BPFTRACE_MAX_MAP_KEYS=$keys

work=$(mktemp -d)
cleanup() {
  stop_own_jobs
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_us() { echo "${EPOCHREALTIME/./}"; }

# run_once BIN N TOOL: one hold run, traced by probes/TOOL.bt unless TOOL is "none".
# Sets run_wall_us and run_startup_us (0 untraced). Runs in this shell, not a subshell, so that
# whatever it starts stays a job of this shell and the EXIT trap can stop it.
run_once() {
  local bin=$1 n=$2 tool=$3 gate="$work/gate" out="$work/bt.out" wpid bpid="" t_launch startup=0 t0 t1 i
  rm -f "$gate" "$out"
  mkfifo "$gate"
  # Our read-write descriptor (7) keeps the FIFO open from both ends until the workload is done:
  # the shell's open never waits, and "go" stays in the pipe however late the shell opens it.
  exec 7<>"$gate"
  bash -c 'read -r _ <"$0" && exec "$@"' "$gate" "$bin" hold --n "$n" --hold-for 0s </dev/null >"$work/run.jsonl" 2>/dev/null 7>&- &
  wpid=$!
  if [ "$tool" != none ]; then
    t_launch=$(now_us)
    timeout 300 bpftrace "probes/$tool.bt" "$wpid" >"$out" 2>"$work/bt.err" 7>&- &
    bpid=$!
    for ((i = 0; i < 1200; i++)); do
      grep -q '^Tracing' "$out" 2>/dev/null && break
      kill -0 "$bpid" 2>/dev/null || break
      sleep 0.05
    done
    grep -q '^Tracing' "$out" 2>/dev/null || {
      kill "$wpid" 2>/dev/null || true
      die "$tool.bt did not start: $(grep -v RLIMIT_MEMLOCK "$work/bt.err" | head -1)"
    }
    startup=$(($(now_us) - t_launch))
  fi
  t0=$(now_us)
  echo go >&7
  wait "$wpid" || true
  t1=$(now_us)
  exec 7>&-
  if [ -n "$bpid" ]; then
    wait "$bpid" || die "$tool.bt failed: $(grep -v RLIMIT_MEMLOCK "$work/bt.err" | head -1)"
  fi
  local spawned
  spawned=$(workload_result "$work/run.jsonl" .spawned)
  [ "$spawned" = "$n" ] || warn "$(basename "$bin") hold --n $n spawned only $spawned (see its failure)"
  run_wall_us=$((t1 - t0))
  run_startup_us=$startup
}

printf 'runtime\tn\ttool\twall_us\tbpftrace_startup_us\n' >"$work/raw.tsv"
configs=(none "${tools[@]}")
rows=()
for runtime in threads goroutines; do
  n=$threads_n
  [ "$runtime" = goroutines ] && n=$goroutines_n
  declare -A wall=() startup=()
  for ((r = 0; r < repeats; r++)); do
    say "$runtime hold --n $n: repeat $((r + 1)) of $repeats (untraced and each tool, rotating)"
    for ((k = 0; k < ${#configs[@]}; k++)); do
      config=${configs[(k + r) % ${#configs[@]}]}
      run_once "$BIN_DIR/$runtime" "$n" "$config"
      wall[$config,$r]=$run_wall_us
      startup[$config,$r]=$run_startup_us
      printf '%s\t%s\t%s\t%s\t%s\n' "$runtime" "$n" "$config" "$run_wall_us" "$run_startup_us" >>"$work/raw.tsv"
    done
  done
  base=()
  for ((r = 0; r < repeats; r++)); do base+=("${wall[none,$r]}"); done
  base_med=$(median "${base[@]}")
  for tool in "${tools[@]}"; do
    traced=() ratios=() starts=()
    for ((r = 0; r < repeats; r++)); do
      traced+=("${wall[$tool,$r]}")
      # Each traced run is paired with the untraced run of the same repeat.
      ratios+=("$(ratio "${wall[$tool,$r]}" "${wall[none,$r]}")")
      starts+=("${startup[$tool,$r]}")
    done
    ratio_stats=$(stats "${ratios[@]}")
    read -r ratio_med ratio_min ratio_max <<<"$ratio_stats"
    traced_med=$(median "${traced[@]}")
    start_med=$(median "${starts[@]}")
    rows+=("$(awk -v rt="$runtime" -v n="$n" -v tool="$tool" -v b="$base_med" -v t="$traced_med" \
      -v m="$ratio_med" -v lo="$ratio_min" -v hi="$ratio_max" -v s="$start_med" 'BEGIN {
        printf "| %s hold | %d | %s.bt | %.3f | %.3f | %.2f | %.2f – %.2f | %.1f |", rt, n, tool,
          b / 1e6, t / 1e6, m, lo, hi, s / 1e6 }')")
  done
  unset wall startup
done

mkdir -p target/bench
cp "$work/raw.tsv" target/bench/bench-bpftrace.tsv
echo
echo "Wall time of \`hold --n N --hold-for 0s\`, release to exit, median of $repeats runs; ratio = traced / untraced"
echo "within a repeat, median (min – max); start-up = bpftrace launch to its BEGIN line, not in the wall time."
echo
echo "| workload | N | tool | untraced (s) | traced (s) | ratio | ratio min – max | bpftrace start-up (s) |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "(raw runs: target/bench/bench-bpftrace.tsv)"
