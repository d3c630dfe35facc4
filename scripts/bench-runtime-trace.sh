#!/usr/bin/env bash
# Benchmark: what the Go execution tracer (runtime/trace: `goroutines --go-trace`, what
# `run --runtime-trace` turns on) costs, per event. Each cell — a goroutines workload at one size —
# runs in pairs, once with --go-trace and once without, the order inside a pair alternating
# (untraced first in odd pairs, traced first in even ones), so that neither kind always runs on a
# machine still freeing the last run.
#
# What is fair. The workload binary runs directly, with no conductor and no eBPF probes on either
# side (as `run --no-probes` would, without its sampler reading /proc under the program's
# mmap_lock every 100 ms): the two runs of a pair differ by --go-trace alone. The trace is written
# to a file on the same disk as a run directory (under OUT), so its writes are paid as a run pays
# them. Each run is timed by bash's `time` (wall, user and system CPU of the process and its
# threads, ms) around GNU time, which gives its peak RSS (wait4's ru_maxrss).
#
# Per traced run, its events: gotrace-reduce's records (one per goroutine state change: created,
# started, blocked, unblocked, syscall, destroyed…; the trace's other events — Ps, Ms, GC, clock
# snapshots — are not counted, so the cost per event is an upper bound per goroutine event).
# Per cell, over its pairs:
#   - the CPU and wall ratios traced/untraced and the CPU difference traced − untraced: the mean
#     of the per-pair values with its 95 % t-interval (`spawnscope pairs`; bpf_s is 0, no probes
#     running, so its time per "program run" with --programs is the CPU difference per event);
#   - CPU ns per event (that interval), wall ns per event (median, min–max of the pairs);
#   - peak RSS traced − untraced, MiB, and per goroutine the workload spawned, bytes (median,
#     min–max; the issue's 15–54 MB a million is 15–54 B each): at small N the tracer's fixed
#     buffers are all of it, at large N the runtime's heap sizing moves peak RSS by more than the
#     difference from one run to the next;
#   - trace bytes per event.
# Nothing here is asserted: timing belongs in benchmarks.
#
# Raw data first: every pair is appended to OUT/pairs.csv as soon as it is measured (columns
# workload (the cell), pair, first, untraced_wall_s, untraced_cpu_s, traced_wall_s, traced_cpu_s,
# bpf_s (0), untraced_maxrss_kb, traced_maxrss_kb, spawned, trace_bytes, events), and each
# traced run's events to OUT/events.csv (programs.csv's columns, one "go-tracer" row per pair, for
# `spawnscope pairs --programs`). Then OUT/figures.json (per cell, with the machine: kernel, CPUs,
# load before and after, Go version) and OUT/table.md. OUT defaults to
# results/bench-runtime-trace-<UTC time>/.
#
# Usage: [OUT=DIR] [CELLS="..."] ./scripts/bench-runtime-trace.sh [PAIRS]
#        PAIRS default 10. CELLS: space-separated cells, `hold:N` (hold --n N --hold-for 0s) or
#        `pingpong:N:ROUNDS` (pingpong --n N --rounds ROUNDS); default
#        "hold:100000 hold:200000 pingpong:100:3000 pingpong:3000:100". No root needed; changes
#        nothing on the machine. Needs Go 1.26 for gotrace-reduce (else exit 77, said). Bad
#        arguments: exit 2.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

script=${0##*/}
[ $# -le 1 ] || { echo "$script: at most one argument, PAIRS, not $#" >&2; exit 2; }
pairs=${1:-10}
{ is_count "$pairs" && [ "$pairs" -le 1000 ]; } ||
  { echo "$script: PAIRS must be a whole number from 1 to 1000, not '$pairs'" >&2; exit 2; }
read -r -a cells <<<"${CELLS:-hold:100000 hold:200000 pingpong:100:3000 pingpong:3000:100}"
[ ${#cells[@]} -gt 0 ] || { echo "$script: CELLS names no cell" >&2; exit 2; }
# cell_args CELL: the workload's arguments for CELL, or status 1.
cell_args() {
  local kind n rounds extra
  IFS=: read -r kind n rounds extra <<<"$1"
  case $kind in
    hold) [ -z "$rounds$extra" ] && is_count "$n" && echo "hold --n $n --hold-for 0s" ;;
    pingpong) [ -z "$extra" ] && is_count "$n" && is_count "${rounds:-}" && echo "pingpong --n $n --rounds $rounds" ;;
    *) return 1 ;;
  esac
}
# cell_name CELL: the cell as the CSV's workload column (hold-n100000, pingpong-n100-r3000).
cell_name() {
  local kind n rounds
  IFS=: read -r kind n rounds <<<"$1"
  echo "$kind-n$n${rounds:+-r$rounds}"
}
for cell in "${cells[@]}"; do
  cell_args "$cell" >/dev/null ||
    { echo "$script: '$cell' is not a cell: hold:N or pingpong:N:ROUNDS, N and ROUNDS positive whole numbers" >&2; exit 2; }
done
need_command jq
need_command /usr/bin/time time

if ! prebuilt; then
  need_toolchains
  say "building spawnscope (for \`spawnscope pairs\`), goroutines and gotrace-reduce"
  cargo build --release --quiet -p spawnscope
  scripts/build-goroutines.sh "$BIN_DIR/goroutines"
  rc=0
  scripts/build-gotrace-reduce.sh "$BIN_DIR/gotrace-reduce" || rc=$?
  [ $rc -eq 3 ] && { echo "SKIP $script: gotrace-reduce needs Go 1.26 (above) to count the trace's events" >&2; exit 77; }
  [ $rc -eq 0 ] || exit $rc
fi
goroutines=$BIN_DIR/goroutines reducer=$BIN_DIR/gotrace-reduce spawnscope=$BIN_DIR/spawnscope

out=${OUT:-$REPO_ROOT/results/bench-runtime-trace-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
work=$(mktemp -d "$out/work.XXXXXX")
trap 'rm -rf "$work"; give_to_invoker "$out"' EXIT
trap 'exit 130' INT TERM
pairs_csv=$out/pairs.csv events_csv=$out/events.csv
echo "workload,pair,first,untraced_wall_s,untraced_cpu_s,traced_wall_s,traced_cpu_s,bpf_s,untraced_maxrss_kb,traced_maxrss_kb,spawned,trace_bytes,events" >"$pairs_csv"
echo "workload,pair,program,tracepoint,events,total_ns" >"$events_csv"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# measure KIND ARGS...: one run of the workload (KIND traced adds --go-trace); prints
# "wall_s cpu_s maxrss_kb spawned trace_bytes events" (trace_bytes and events 0 untraced).
measure() {
  local kind=$1 timing rss spawned bytes=0 events=0 trace=$work/go.trace
  shift
  local args=("$@")
  rm -f "$trace"
  [ "$kind" = traced ] && args+=(--go-trace "$trace")
  timing=$({
    TIMEFORMAT='%3R %3U %3S'
    time /usr/bin/time -f %M -o "$work/rss" "$goroutines" "${args[@]}" </dev/null >"$work/events" 2>"$work/stderr"
  } 2>&1) || die "goroutines ${args[*]} failed: $(tail -3 "$work/stderr")"
  rss=$(tail -1 "$work/rss")
  spawned=$(workload_result "$work/events" .spawned)
  if [ "$kind" = traced ]; then
    bytes=$(stat -c %s "$trace")
    "$reducer" "$trace" /dev/null "$work/reduced.json" || die "gotrace-reduce failed on the trace of goroutines ${args[*]}"
    events=$(jq .records "$work/reduced.json")
  fi
  read -r wall user sys <<<"$timing"
  echo "$wall $(LC_ALL=C awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }') $rss $spawned $bytes $events"
}

for cell in "${cells[@]}"; do
  name=$(cell_name "$cell")
  read -r -a args <<<"$(cell_args "$cell")"
  for ((p = 1; p <= pairs; p++)); do
    say "$name: pair $p of $pairs"
    if ((p % 2)); then
      first=untraced
      read -r uw uc ur spawned _ _ < <(measure untraced "${args[@]}")
      read -r tw tc tr _ bytes events < <(measure traced "${args[@]}")
    else
      first=traced
      read -r tw tc tr spawned bytes events < <(measure traced "${args[@]}")
      read -r uw uc ur _ _ _ < <(measure untraced "${args[@]}")
    fi
    echo "$name,$p,$first,$uw,$uc,$tw,$tc,0,$ur,$tr,$spawned,$bytes,$events" >>"$pairs_csv"
    echo "$name,$p,go-tracer,runtime/trace,$events,0" >>"$events_csv"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# per_pair NAME EXPR: EXPR (awk, over pairs.csv's named columns) for each pair of cell NAME.
per_pair() {
  LC_ALL=C awk -F, -v cell="$1" "NR == 1 { for (i = 1; i <= NF; i++) c[\$i] = i; next }
    \$c[\"workload\"] == cell { printf \"%.15g\\n\", $2 }" "$pairs_csv"
}
col() { echo "\$c[\"$1\"]"; }
figures=()
for cell in "${cells[@]}"; do
  name=$(cell_name "$cell")
  paired=$("$spawnscope" pairs "$pairs_csv" --workload "$name" --programs "$events_csv")
  mapfile -t wall_ns < <(per_pair "$name" "($(col traced_wall_s) - $(col untraced_wall_s)) * 1e9 / $(col events)")
  mapfile -t rss_mb < <(per_pair "$name" "($(col traced_maxrss_kb) - $(col untraced_maxrss_kb)) / 1024")
  mapfile -t rss_b < <(per_pair "$name" "($(col traced_maxrss_kb) - $(col untraced_maxrss_kb)) * 1024 / $(col spawned)")
  mapfile -t bytes_per < <(per_pair "$name" "$(col trace_bytes) / $(col events)")
  mapfile -t events < <(per_pair "$name" "$(col events)")
  mapfile -t spawned < <(per_pair "$name" "$(col spawned)")
  figures+=("$(jq -n --arg cell "$name" --arg args "$(cell_args "$cell")" --argjson paired "$paired" \
    --arg wall "$(stats "${wall_ns[@]}")" --arg rss "$(stats "${rss_b[@]}")" --arg rss_mb "$(stats "${rss_mb[@]}")" \
    --arg bytes "$(stats "${bytes_per[@]}")" --arg events "$(stats "${events[@]}")" \
    --arg spawned "$(median "${spawned[@]}")" '
    def mmm: split(" ") | map(tonumber) | {median: .[0], min: .[1], max: .[2]};
    {cell: $cell, workload_args: $args, spawned: ($spawned | tonumber), events: ($events | mmm),
     pairs: $paired.pairs, cpu_ratio: $paired.cpu_ratio, wall_ratio: $paired.wall_ratio,
     cpu_difference_s: $paired.cpu_difference_s,
     cpu_ns_per_event: $paired.unexplained_ns_per_program_run,
     wall_ns_per_event: ($wall | mmm), rss_difference_mb: ($rss_mb | mmm),
     rss_bytes_per_goroutine: ($rss | mmm),
     trace_bytes_per_event: ($bytes | mmm)}')")
done
jq -n --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" --arg go "$(go env GOVERSION 2>/dev/null || echo unknown)" \
  --arg before "$load_before" --arg after "$load_after" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --argjson pairs "$pairs" '{measured: {date: $date, kernel: $kernel, cpus: $cpus, go: $go,
    load_before: $before, load_after: $after, pairs_per_cell: $pairs}, cells: $ARGS.positional | map(fromjson)}' \
  --args "${figures[@]}" >"$out/figures.json"

jq -r '
  def r(k): . * pow(10; k) | round / pow(10; k);
  def ci(k): if . == null then "–" elif .low == null then "\(.mean | r(k))"
    else "\(.mean | r(k)) (\(.low | r(k))–\(.high | r(k)))" end;
  def mmm(k): "\(.median | r(k)) (\(.min | r(k))–\(.max | r(k)))";
  .measured as $m |
  "The Go execution tracer'"'"'s cost: goroutines with --go-trace against without, \($m.pairs_per_cell) interleaved pairs a cell; \($m.go), kernel \($m.kernel), \($m.cpus) CPUs, load \($m.load_before) before, \($m.load_after) after. Means with their 95 % interval, or median (min–max) of the pairs.",
  "",
  "| cell | goroutines | events (records) | CPU traced/untraced | wall traced/untraced | CPU ns per event | wall ns per event | peak RSS traced − untraced, MiB | per goroutine, B | trace B per event |",
  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  (.cells[] | "| \(.cell) | \(.spawned) | \(.events.median) | \(.cpu_ratio | ci(2)) | \(.wall_ratio | ci(2)) | \(.cpu_ns_per_event | ci(0)) | \(.wall_ns_per_event | mmm(0)) | \(.rss_difference_mb | mmm(1)) | \(.rss_bytes_per_goroutine | mmm(1)) | \(.trace_bytes_per_event | mmm(2)) |")
' "$out/figures.json" | tee "$out/table.md"
echo "raw data: $out/pairs.csv (first), $out/figures.json"
