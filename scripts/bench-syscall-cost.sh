#!/usr/bin/env bash
# Benchmark: the floor under every traced run's syscalls. `spawnscope syscall-cost` times a
# getppid() loop untraced, with the lean probes attached and the kernel's BPF run-time statistics
# off, and with them on: what the probes' raw_syscalls pair costs every syscall its programs filter
# out (the tracing slow path, two tracepoint dispatches, two programs' first test, which no
# program's time shows), and what the statistics add to each program run. Each cycle times a
# round untraced, traced, with the statistics on and traced again (one more untraced round ends
# the last), so the machine's drift falls on every state; each state's figure is its median.
# docs/manual/probe-cost.md reads these figures against the overhead benchmark's goal.
#
# Writes OUT/syscall-cost.json (every round, the pair's programs' runs, then the figures; only once
# complete) before printing the figures. OUT defaults to results/bench-syscall-cost-<UTC time>/.
#
# Usage: sudo [OUT=DIR] ./scripts/bench-syscall-cost.sh [CYCLES [CALLS]]
#        (defaults 15 cycles, 100000 calls a round; at most 1000 and 100000000). Needs root, and
#        the statistics off to begin with. Changes nothing on the machine (the probes are detached
#        and the statistics off again at its end). Bad arguments: exit 2.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

script=${0##*/}
[ $# -le 2 ] || { echo "$script: at most two arguments, CYCLES and CALLS, not $#" >&2; exit 2; }
cycles=${1:-15}
calls=${2:-100000}
{ is_count "$cycles" && [ "$cycles" -le 1000 ]; } ||
  { echo "$script: CYCLES must be a whole number from 1 to 1000, not '$cycles'" >&2; exit 2; }
{ is_count "$calls" && [ "$calls" -ge 1000 ] && [ "$calls" -le 100000000 ]; } ||
  { echo "$script: CALLS must be a whole number from 1000 to 100000000, not '$calls'" >&2; exit 2; }
is_root || die "the probes need root: sudo $0 $*"
need_command jq
build_all

out=${OUT:-$REPO_ROOT/results/bench-syscall-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
# A failed measurement prints nothing to keep: its partial file goes.
trap 'rm -f "$out/syscall-cost.json.partial"; give_to_invoker "$out"' EXIT
say "getppid(): $cycles cycles of a round of $calls calls untraced, traced, statistics on, traced; raw data in $out/"
"$BIN_DIR/spawnscope" syscall-cost --json --cycles "$cycles" --calls "$calls" >"$out/syscall-cost.json.partial"
mv "$out/syscall-cost.json.partial" "$out/syscall-cost.json"
jq -r '
  def ns: (. * 10 | round / 10 | tostring) + " ns";
  .measured as $m | .figures as $f |
  "kernel \($m.kernel), \($m.cpus) CPUs; median ns a getppid() call:",
  "  untraced:                              \($f.untraced_ns | ns)",
  "  lean probes attached, statistics off:  \($f.traced_ns | ns): the pair costs every syscall \($f.pair_ns_per_syscall | ns)",
  "  the statistics on:                     \($f.statistics_on_ns | ns): they add \($f.statistics_ns_per_run | ns) to each program run",
  ($f.timed[] | "  \(.program) as the statistics time it: \(.ns_per_run | ns) a run")
' "$out/syscall-cost.json"
echo "raw data: $out/syscall-cost.json"
