#!/usr/bin/env bash
# Benchmark: the floor under every traced run's syscalls. `spawnscope syscall-cost` times a
# getppid() loop untraced, with the lean probes attached and the kernel's BPF run-time statistics
# off, and with them on: what the probes' raw_syscalls pair costs every syscall its programs filter
# out (the tracing slow path, two tracepoint dispatches, two programs' first test, which no
# program's time shows), and what the statistics add to each program run. Untraced and traced
# rounds come before and after the statistics' rounds; each state's figure is its rounds' median.
# docs/manual/probe-cost.md reads these figures against the overhead benchmark's goal.
#
# Writes OUT/syscall-cost.json (every round, the pair's programs' runs, then the figures) before
# printing the figures. OUT defaults to results/bench-syscall-cost-<UTC time>/.
#
# Usage: sudo [OUT=DIR] ./scripts/bench-syscall-cost.sh [ROUNDS [CALLS]]
#        (defaults 15 rounds with the statistics on, 100000 calls a round). Needs root. Changes
#        nothing on the machine (the probes are detached, the statistics off again, at its end).
#        Bad arguments: exit 2.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

script=${0##*/}
rounds=${1:-15}
calls=${2:-100000}
is_count "$rounds" || { echo "$script: ROUNDS must be a positive whole number, not '$rounds'" >&2; exit 2; }
{ is_count "$calls" && [ "$calls" -ge 1000 ]; } ||
  { echo "$script: CALLS must be a whole number of at least 1000, not '$calls'" >&2; exit 2; }
is_root || die "the probes need root: sudo $0 $*"
need_command jq
build_all

out=${OUT:-$REPO_ROOT/results/bench-syscall-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
trap 'give_to_invoker "$out"' EXIT
say "getppid(): $rounds rounds of $calls calls with the statistics on, twice as many untraced and traced (before and after); raw data in $out/"
"$BIN_DIR/spawnscope" syscall-cost --json --rounds "$rounds" --calls "$calls" >"$out/syscall-cost.json"
jq -r '
  def ns: (. * 10 | round / 10 | tostring) + " ns";
  .measured as $m | .figures as $f |
  "kernel \($m.kernel), \($m.cpus) CPUs; median ns a getppid() call:",
  "  untraced:                              \($f.untraced_ns | ns)",
  "  lean probes attached, statistics off:  \($f.traced_ns | ns): the pair costs every syscall \($f.pair_ns_per_syscall | ns)",
  "  the statistics on:                     \($f.statistics_on_ns | ns): they add \($f.statistics_ns_per_run | ns) to each program run",
  ($m.programs[] | select(.timed_ns_per_run != null) |
    "  \(.program) as the statistics time it: \(.timed_ns_per_run | ns) a run (\(.timed_runs) runs timed)")
' "$out/syscall-cost.json"
echo "raw data: $out/syscall-cost.json"
