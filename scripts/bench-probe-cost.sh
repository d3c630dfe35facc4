#!/usr/bin/env bash
# Benchmark: what each probe program costs an event of its hook, against the floor of that hook.
# `spawnscope probe-cost` times, for every hook the lean probes use, a loop that fires it (getppid
# for the raw_syscalls pair, two threads on one CPU handing a byte through pipes for sched_switch
# and sched_wakeup, reads of one shared file for the lock pair, fresh pages for user faults,
# threads started and joined for task_newtask, sched_wakeup_new and sched_process_exit, a signal to
# itself for signal_deliver, a move to the other CPU for sched_migrate_task, the ping-pong across
# two CPUs for ipi_send_cpu and csd_queue_cpu, a page mapped and unmapped for tlb_flush):
# untraced, with the floor's program (one per-CPU array increment, probes/floor.bpf.c), with the
# collector's filtering out another run's events, for the loop's own run (lean: judged), with the
# full probes' and with the trace's (listed); each attached state with the kernel's BPF run-time
# statistics off (the loop's time) and on (each program's ns a run); then the floor and the lean
# program cold (the caches emptied before each event, the statistics on); in interleaved cycles.
# docs/manual/probe-cost.md reads the figures.
#
# Writes OUT/probe-cost.json (every round first, then the figures; only once complete) and
# OUT/probe-cost.md (the terminal's tables), with the machine's load before and after.
# OUT defaults to results/bench-probe-cost-<UTC time>/.
#
# Usage: sudo [OUT=DIR] ./scripts/bench-probe-cost.sh [ROUNDS [SECONDS]]
#        (defaults 5 cycles and 60 s of rounds, about two minutes with the loading; at most 1000
#        cycles and 3600 s). Needs root, and the statistics off to begin with. Changes nothing on
#        the machine (the programs are detached and the statistics off again at its end). Bad
#        arguments: exit 2.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

script=${0##*/}
[ $# -le 2 ] || { echo "$script: at most two arguments, ROUNDS and SECONDS, not $#" >&2; exit 2; }
rounds=${1:-5}
seconds=${2:-60}
{ is_count "$rounds" && [ "$rounds" -ge 1 ] && [ "$rounds" -le 1000 ]; } ||
  { echo "$script: ROUNDS must be a whole number from 1 to 1000, not '$rounds'" >&2; exit 2; }
{ is_count "$seconds" && [ "$seconds" -ge 1 ] && [ "$seconds" -le 3600 ]; } ||
  { echo "$script: SECONDS must be a whole number from 1 to 3600, not '$seconds'" >&2; exit 2; }
is_root || die "the probes need root: sudo $0 $*"
need_command jq
build_all

out=${OUT:-$REPO_ROOT/results/bench-probe-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
# A failed measurement leaves nothing to keep: its partial file goes.
trap 'rm -f "$out/probe-cost.json.partial"; give_to_invoker "$out"' EXIT
say "probe-cost: $rounds cycles, about $seconds s of rounds; raw data in $out/"
"$BIN_DIR/spawnscope" probe-cost --json --rounds "$rounds" --seconds "$seconds" >"$out/probe-cost.json.partial"
mv "$out/probe-cost.json.partial" "$out/probe-cost.json"
jq -r '
  def ns: if . == null then "–" else (. * 10 | round / 10 | tostring) end;
  .measured as $m |
  "kernel \($m.kernel), \($m.cpus) CPUs, load \($m.load_before) before, \($m.load_after) after; ns a run (the statistics), lean against the floor:",
  (.figures.hooks[] | "  \(.hook): \(.judged.ours_ns | ns) against \(.judged.floor_ns | ns) (\(.judged.times_floor * 100 | round / 100)×)\(if .judged.within then "" else ", over 2×" end); cold \(.cold.ours_ns | ns) against \(.cold.floor_ns | ns)")
' "$out/probe-cost.json" | tee "$out/probe-cost.md"
echo "raw data: $out/probe-cost.json"
