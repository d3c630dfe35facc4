#!/usr/bin/env bash
# Benchmark: what the eBPF collector costs the workload it traces. Alternates `spawnscope run`
# with and without the collector (--no-probes) on the same workload — 100,000 threads and
# 1,000,000 goroutines in `hold` — and prints the ratios traced/untraced of the workload's wall
# time (release to reap, run.json's wall_ns) and of its CPU time (wait4 user + sys: the probes run
# in the traced tasks' context, so their cost is charged there): the median over repeats, with min
# and max as spread, and every run's figures so the machine's noise is in view. Goal: 1.03x or
# less. Traced runs use the collector's default, --probes lean; PROBES=full measures
# --probes full (per-thread state, about twice the cost). The mode measured is printed.
#
# Outliers. The machine sometimes runs a whole run in a slow mode (half again the CPU time or
# more), which a median over a handful of pairs does not absorb at a 3 % goal. Until runs carry a
# trust verdict of their own, this benchmark applies its own rule, per workload (threads and
# goroutines apart):
#   - over all of the workload's runs, the median CPU time (wait4 user + sys) of the untraced runs
#     and, separately, of the traced runs;
#   - a run is an outlier when its CPU time is more than 1.25x, or less than 1/1.25, the median of
#     its own kind (traced or untraced); exactly 1.25x or 1/1.25 is not an outlier;
#   - a pair with an outlier run is excluded: from the wall and CPU medians, the ratios' medians
#     and min – max spreads, and the BPF time vs CPU difference check below. It is still printed,
#     marked EXCLUDED (outlier: traced|untraced CPU F× its kind's median), and each workload says
#     "pairs used: K of R; excluded: E". With every pair excluded the figures read "n/a".
# Only CPU time is judged, not wall time. With 1 pair nothing is an outlier; with 2 the median is
# their mean, so the rule cannot tell the slow run from the fast one (past 1.5 times the other the
# faster run is the outlier, past 5/3 both are): use 3 or more repeats (it warns below 3). The
# probes' cost table covers every traced run: it is the probes' self-measurement, not a comparison
# of traced with untraced.
#
# Every traced run also measures the probes' own cost (the kernel's BPF run-time statistics,
# summary.json's .probes.cost). Per runtime, from the traced runs:
#   - a table per BPF program (with its tracepoint): the median of its runs (events), of its total
#     ms, of its ns per event (over the runs where it ran), and of its per-run share of the probes'
#     total (a program absent from a run's list did not run: 0 runs, 0 ns); then the median
#     probes' total in ms and the median share_of_cpu (probes' total / the workload's CPU time);
#   - a check that this self-measurement explains the CPU time the collector adds: per pair the
#     CPU difference traced − untraced (s) beside the traced run's probes' total (s), then, over
#     the pairs the outlier rule keeps, the median difference with its min – max and the median
#     BPF time. The rule:
#       yes  when min(difference) <= median(BPF time) <= max(difference);
#       no   otherwise, saying whether the BPF time lies below the smallest difference or above
#            the largest; above, and every difference below the BPF time's order of magnitude
#            (10^floor(log10(median BPF time)) s), it says that instead.
#     A "no" is reported, never an error. With one pair used the spread is a single value. The
#     BPF time counts every run of the programs, for any task (they filter inside), while the
#     difference is the workload's CPU alone; the difference also carries the machine's noise.
# The last table, in Markdown for the manual (docs/manual/probe-cost.md), per workload: the pairs used (excluded), wall and
# CPU ratios, the probes' own cost and the BPF time against the CPU difference; its caption states
# the outlier rule.
#
# Then it runs scripts/bench-bpftrace.sh for the bpftrace tools' overhead (expected to be much
# higher), on GOROUTINES_N goroutines and BPFTRACE_THREADS_N threads (default 20000):
# switches.bt slows 100,000 threads by more than ten times (over 3 minutes a run on 2 cores).
# SKIP_BPFTRACE=1 leaves that part out.
#
# Usage: sudo [PROBES=lean|full] [SKIP_BPFTRACE=1] [BPFTRACE_THREADS_N=N] \
#          ./scripts/bench-overhead.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 100000 1000000 5). Needs root. Raises the sysctls THREADS_N threads need with
#        `spawnscope sysctl apply` and restores them on every exit.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

bench_args 100000 1000000 5 "$@"
probes_mode=${PROBES:-lean}
case $probes_mode in
  lean | full) ;;
  *) echo "${0##*/}: PROBES must be lean or full, not '$probes_mode'" >&2; exit 2 ;;
esac
is_root || die "the collector needs root: sudo $0 $*"
# The outlier rule (header): its factor, and the rule in words for the output.
OUTLIER_FACTOR=1.25
outlier_rule="a run is an outlier when its CPU time (wait4 user + sys) is more than ${OUTLIER_FACTOR}× or less than 1/${OUTLIER_FACTOR} of the median CPU time of its kind (traced or untraced) over the workload's runs; a pair with an outlier is excluded from the ratios and the BPF time vs CPU difference check"
[ "$repeats" -ge 3 ] ||
  warn "$repeats repeat(s): with fewer than 3 pairs the outlier rule cannot single out a slow run (see the header)"
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
  local out="$work/$1-$4-$3" extra=(--probes "$probes_mode")
  [ "$3" = untraced ] && extra=(--no-probes)
  "$spawnscope" run --runtime "$1" --workload hold --n "$2" --out "$out" "${extra[@]}" >"$out.log" 2>&1 ||
    die "spawnscope run failed: $(tail -3 "$out.log")"
  jq -r '"\(.wall_ns / 1e9) \((.rusage.user_us + .rusage.sys_us) / 1e6)"' "$out"/*/run.json
}

# run_dir RUNTIME R KIND: the results directory measure's run made (one under its --out).
run_dir() {
  local dirs=("$work/$1-$2-$3"/*/)
  if [ ${#dirs[@]} -ne 1 ] || [ ! -d "${dirs[0]}" ]; then
    die "no single results directory in $work/$1-$2-$3"
  fi
  printf '%s\n' "${dirs[0]%/}"
}

# fmt FORMAT NUM [FACTOR]: NUM times FACTOR (default 1) through printf's FORMAT (awk's printf, so
# e-notation is read).
fmt() { LC_ALL=C awk -v f="$1" -v x="$2" -v k="${3:-1}" 'BEGIN { printf f, x * k }'; }

# median3 NUM...: the median to 3 decimals. spread3 NUM...: "median (min – max)" to 3 decimals.
median3() {
  local m
  m=$(median "$@") || return 1
  fmt %.3f "$m"
}
spread3() {
  local s
  s=$(stats "$@") || return 1
  awk -v s="$s" 'BEGIN { split(s, v, " "); printf "%.3f (%.3f – %.3f)", v[1], v[2], v[3] }'
}

# outlier_note KIND CPU MEDIAN: "KIND CPU F× its kind's median" (F = CPU / MEDIAN, 2 decimals)
# when the run of KIND with CPU time CPU (s) is an outlier against its kind's MEDIAN (s) by the
# header's rule; nothing when it is not.
outlier_note() {
  local status=0
  is_outlier "$2" "$3" "$OUTLIER_FACTOR" || status=$?
  case $status in
    0) echo "$1 CPU $(fmt %.2f "$(ratio "$2" "$3")")× its kind's median" ;;
    1) ;;
    *) die "outlier rule: cannot judge the $1 CPU time $2 s against its kind's median $3 s" ;;
  esac
}

# cost_table SUMMARY...: from traced runs' summary.json files (those without .probes.cost left
# out), the per-program table and the probes' totals. Sets cost_cell for the last table.
cost_table() {
  local measured=() f prog tp ev tot share npe rows=() totals shares total_stats
  local m_ev m_tot m_npe m_share min_tot max_tot
  for f in "$@"; do
    jq -e '.probes.cost != null' "$f" >/dev/null && measured+=("$f")
  done
  echo "What the probes cost (BPF run-time statistics), median of ${#measured[@]} of $# traced runs:"
  if [ ${#measured[@]} -eq 0 ]; then
    echo "  not measured (no .probes.cost in the traced runs' summary.json)"
    cost_cell="not measured"
    return 0
  fi
  # Per program a TSV line: name, tracepoint, then space-separated per-run lists of its runs,
  # total ns and share of that run's probes' total (0 where it did not run) and of its ns per
  # run (only where it ran).
  while IFS=$'\t' read -r prog tp ev tot share npe; do
    read -ra ev <<<"$ev"
    read -ra tot <<<"$tot"
    read -ra share <<<"$share"
    read -ra npe <<<"$npe"
    m_tot=$(median "${tot[@]}")
    m_ev=$(median "${ev[@]}")
    m_npe=$(median "${npe[@]}")
    m_share=$(median "${share[@]}")
    # Sort key (median total ns), a tab, the row.
    rows+=("$m_tot"$'\t'"| $prog | $tp | $(fmt %.0f "$m_ev") | $(fmt %.3f "$m_tot" 1e-6) | $(fmt %.1f "$m_npe") | $(fmt %.1f "$m_share" 100) % |")
  done < <(jq -rs '
    map(.probes.cost) as $runs
    | ($runs | map(.programs[] | {program, tracepoint}) | unique_by(.program))[] as $p
    | [$runs[] | . as $run | (.programs | map(select(.program == $p.program)) | first) as $row
       | {events: ($row.events // 0), total: ($row.total_ns // 0),
          share: (if $run.total_ns > 0 then ($row.total_ns // 0) / $run.total_ns else 0 end),
          npe: $row.ns_per_event}] as $per
    | [$p.program, $p.tracepoint,
       ($per | map(.events | tostring) | join(" ")),
       ($per | map(.total | tostring) | join(" ")),
       ($per | map(.share | tostring) | join(" ")),
       ($per | map(.npe | select(. != null) | tostring) | join(" "))] | @tsv' "${measured[@]}")
  echo
  echo "| program | tracepoint | runs (events) | total (ms) | ns per event | share of probes' total |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}" | sort -t$'\t' -k1,1gr | cut -f2-
  read -ra totals < <(jq -rs 'map(.probes.cost.total_ns | tostring) | join(" ")' "${measured[@]}")
  read -ra shares < <(jq -rs 'map(.probes.cost.share_of_cpu | select(. != null) | tostring) | join(" ")' "${measured[@]}")
  total_stats=$(stats "${totals[@]}")
  read -r m_tot min_tot max_tot <<<"$total_stats"
  echo
  printf "probes' total: %s ms median (%s – %s)" \
    "$(fmt %.3f "$m_tot" 1e-6)" "$(fmt %.3f "$min_tot" 1e-6)" "$(fmt %.3f "$max_tot" 1e-6)"
  cost_cell="$(fmt %.1f "$m_tot" 1e-6) ms"
  if [ ${#shares[@]} -gt 0 ]; then
    m_share=$(median "${shares[@]}")
    printf "; share of the workload's CPU time (share_of_cpu): %s %% median\n" "$(fmt %.2f "$m_share" 100)"
    cost_cell+=" ($(fmt %.2f "$m_share" 100) % of CPU)"
  else
    printf "; share of the workload's CPU time: not measured\n"
  fi
}

# verdict BPF MIN MAX: where the median BPF time BPF (s) lies against the per-pair CPU
# differences' MIN and MAX (s), by the header's rule: "yes", "below", "above", or "decade D" (above,
# and every difference below D = 10^floor(log10(BPF)) s, the BPF time's order of magnitude).
verdict() {
  LC_ALL=C awk -v b="$1" -v lo="$2" -v hi="$3" 'BEGIN {
    b += 0; lo += 0; hi += 0
    if (b >= lo && b <= hi) { print "yes"; exit }
    if (b < lo) { print "below"; exit }
    if (b > 0) {
      e = log(b) / log(10) + 1e-9   # against rounding at exact powers of ten
      d = int(e); if (d > e) d--
      if (hi < 10 ^ d) { printf "decade %.15g\n", 10 ^ d; exit }
    }
    print "above"
  }'
}

# cpu_check: the per-pair CPU differences (cpu_diffs, s) against the traced runs' probes' totals
# (bpf_secs, s; "-" where not measured), over the pairs the outlier rule keeps (pair_notes: ""
# for a used pair, the outlier note for an excluded one). Sets check_cell for the last table.
# Seconds to 4 decimals.
cpu_check() {
  local i bpfs=() diffs=() diff_stats m_diff min_diff max_diff m_bpf v why verdict_word of_diff="" spread
  local line
  echo "Does the self-measured BPF time explain the CPU difference? Rule: yes when the median BPF time"
  echo "lies within [min, max] of the per-pair CPU differences traced − untraced; no otherwise."
  echo "Over the pairs used (outlier rule above)."
  for i in "${!cpu_diffs[@]}"; do
    line="  pair $((i + 1)): CPU difference $(fmt %+.4f "${cpu_diffs[$i]}") s; probes' BPF time "
    if [ "${bpf_secs[$i]}" = - ]; then
      line+="not measured"
    else
      line+="$(fmt %.4f "${bpf_secs[$i]}") s"
    fi
    if [ -n "${pair_notes[$i]}" ]; then
      echo "$line; EXCLUDED (outlier: ${pair_notes[$i]})"
      continue
    fi
    echo "$line"
    diffs+=("${cpu_diffs[$i]}")
    [ "${bpf_secs[$i]}" = - ] || bpfs+=("${bpf_secs[$i]}")
  done
  if [ ${#diffs[@]} -eq 0 ]; then
    echo "  CPU difference: n/a (every pair excluded)"
    echo "  self-measured BPF time explains the CPU difference: n/a (every pair excluded)"
    check_cell="n/a (every pair excluded)"
    return 0
  fi
  diff_stats=$(stats "${diffs[@]}")
  read -r m_diff min_diff max_diff <<<"$diff_stats"
  spread="$(fmt %+.4f "$min_diff") – $(fmt %+.4f "$max_diff")"
  echo "  CPU difference: $(fmt %+.4f "$m_diff") s median ($spread) over ${#diffs[@]} pair(s)"
  if [ ${#bpfs[@]} -eq 0 ]; then
    echo "  self-measured BPF time explains the CPU difference: not measured"
    check_cell="not measured"
    return 0
  fi
  m_bpf=$(median "${bpfs[@]}")
  if LC_ALL=C awk -v d="$m_diff" 'BEGIN { exit !(d > 0) }'; then
    of_diff=" = $(fmt %.0f "$(ratio "$m_bpf" "$m_diff")" 100) % of the median difference"
  fi
  echo "  BPF time: $(fmt %.4f "$m_bpf") s median over ${#bpfs[@]} traced run(s)$of_diff"
  v=$(verdict "$m_bpf" "$min_diff" "$max_diff")
  case $v in
    yes) why="it lies within [$spread] s" ;;
    below) why="it is below the smallest difference, $(fmt %+.4f "$min_diff") s: the traced runs cost more CPU than the probes' run time" ;;
    above) why="it is above the largest difference, $(fmt %+.4f "$max_diff") s" ;;
    decade*) why="every CPU difference (the largest $(fmt %+.4f "$max_diff") s) is below the BPF time's order of magnitude, $(fmt %g "${v#decade }") s: these runs show no CPU cost of that size" ;;
  esac
  verdict_word=no
  [ "$v" = yes ] && verdict_word=yes
  echo "  self-measured BPF time explains the CPU difference: $verdict_word ($why)"
  check_cell="$(fmt %.4f "$m_bpf") s vs $(fmt %+.4f "$m_diff") s ($spread): $verdict_word"
  [ "${v%% *}" = decade ] && check_cell+=", differences below the BPF time's order of magnitude"
  return 0
}

say "probes measured: $probes_mode (PROBES=lean|full)"
rows=()
for runtime in threads goroutines; do
  n=$threads_n
  [ "$runtime" = goroutines ] && n=$goroutines_n
  u_walls=() t_walls=() wall_ratios=() u_cpus=() t_cpus=() cpu_ratios=() cpu_diffs=() bpf_secs=() summaries=()
  echo
  echo "## $runtime hold --n $n, probes $probes_mode, $repeats alternating pairs"
  echo
  # A warm-up run first, not counted (see trace.sh): the first big run after boot or an idle
  # spell pays for memory the kernel or the host must first set up, and would land on one kind.
  say "$runtime hold --n $n: warm-up (not counted)"
  measure "$runtime" "$n" untraced warmup >/dev/null
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
    summary="$(run_dir "$runtime" "$r" traced)/summary.json"
    summaries+=("$summary")
    bpf_ns=$(jq -r '.probes.cost.total_ns // "-"' "$summary")
    bpf_s=-
    [ "$bpf_ns" = - ] || bpf_s=$(fmt %.9f "$bpf_ns" 1e-9)
    cpu_diff=$(LC_ALL=C awk -v t="$t_cpu" -v u="$u_cpu" 'BEGIN { printf "%.6f", t - u }')
    bpf_text="not measured"
    [ "$bpf_s" = - ] || bpf_text=$(fmt '%.4f s' "$bpf_s")
    printf '  pair %d: untraced %.3f s wall, %.3f s CPU; traced %.3f s wall, %.3f s CPU (%s s); probes'"'"' BPF time %s\n' \
      "$r" "$u_wall" "$u_cpu" "$t_wall" "$t_cpu" "$(fmt %+.4f "$cpu_diff")" "$bpf_text"
    u_walls+=("$u_wall") t_walls+=("$t_wall") u_cpus+=("$u_cpu") t_cpus+=("$t_cpu")
    wall_ratios+=("$(ratio "$t_wall" "$u_wall")")
    cpu_ratios+=("$(ratio "$t_cpu" "$u_cpu")")
    cpu_diffs+=("$cpu_diff") bpf_secs+=("$bpf_s")
  done
  # The outlier rule (header): every run's CPU time against its kind's median over all the
  # workload's runs; pair_notes[i] is "" for a pair used, the outlier(s) for one excluded.
  # One command substitution per assignment, so that set -e stops the script if one fails.
  u_cpu_median=$(median "${u_cpus[@]}")
  t_cpu_median=$(median "${t_cpus[@]}")
  pair_notes=() used=()
  echo
  echo "Outliers: median CPU time untraced $(fmt %.3f "$u_cpu_median") s, traced $(fmt %.3f "$t_cpu_median") s over the $repeats run(s) of each kind"
  for i in "${!u_cpus[@]}"; do
    u_note=$(outlier_note untraced "${u_cpus[$i]}" "$u_cpu_median")
    t_note=$(outlier_note traced "${t_cpus[$i]}" "$t_cpu_median")
    u_factor=$(fmt %.2f "$(ratio "${u_cpus[$i]}" "$u_cpu_median")")
    t_factor=$(fmt %.2f "$(ratio "${t_cpus[$i]}" "$t_cpu_median")")
    note=$u_note
    [ -n "$t_note" ] && note=${note:+$note, }$t_note
    pair_notes+=("$note")
    line="  pair $((i + 1)): untraced CPU ${u_factor}×, traced CPU ${t_factor}× its kind's median: "
    if [ -n "$note" ]; then
      echo "${line}EXCLUDED (outlier: $note)"
    else
      echo "${line}used"
      used+=("$i")
    fi
  done
  echo "pairs used: ${#used[@]} of $repeats; excluded: $((repeats - ${#used[@]})) (rule: $outlier_rule)"
  echo
  if [ ${#used[@]} -eq 0 ]; then
    echo "every pair is excluded: no medians or ratios (n/a)"
    wall_spread=n/a cpu_spread=n/a
  else
    uu_walls=() ut_walls=() uwall_ratios=() uu_cpus=() ut_cpus=() ucpu_ratios=()
    for i in "${used[@]}"; do
      uu_walls+=("${u_walls[$i]}") ut_walls+=("${t_walls[$i]}") uwall_ratios+=("${wall_ratios[$i]}")
      uu_cpus+=("${u_cpus[$i]}") ut_cpus+=("${t_cpus[$i]}") ucpu_ratios+=("${cpu_ratios[$i]}")
    done
    med_u_wall=$(median3 "${uu_walls[@]}")
    med_t_wall=$(median3 "${ut_walls[@]}")
    wall_spread=$(spread3 "${uwall_ratios[@]}")
    med_u_cpu=$(median3 "${uu_cpus[@]}")
    med_t_cpu=$(median3 "${ut_cpus[@]}")
    cpu_spread=$(spread3 "${ucpu_ratios[@]}")
    echo "Over the ${#used[@]} pair(s) used:"
    echo "wall: untraced $med_u_wall s, traced $med_t_wall s median; ratio traced/untraced $wall_spread"
    echo "CPU:  untraced $med_u_cpu s, traced $med_t_cpu s median; ratio traced/untraced $cpu_spread"
  fi
  echo
  cost_table "${summaries[@]}"
  echo
  cpu_check
  echo
  rows+=("| $runtime hold, N = $n | ${#used[@]} ($((repeats - ${#used[@]}))) | $wall_spread | $cpu_spread | $cost_cell | $check_cell |")
done

echo
echo "eBPF collector overhead, probes $probes_mode: the workload's wall and CPU time traced/untraced, median (min – max) over the pairs used of $repeats alternating pairs; the probes' own cost (BPF run-time statistics over every traced run, median, share of the workload's CPU time); median BPF time vs median CPU difference traced − untraced (min – max over the pairs used), yes when the BPF time lies within that spread. Pairs used (excluded), the outlier rule: $outlier_rule"
echo
echo "| workload | pairs used (excluded) | wall ratio (min – max) | CPU ratio (min – max) | probes' own cost (share of CPU) | BPF time vs CPU difference |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
if [ "${SKIP_BPFTRACE:-0}" = 1 ]; then
  say "bpftrace tools: skipped (SKIP_BPFTRACE=1)"
  exit 0
fi
bpftrace_threads_n=${BPFTRACE_THREADS_N:-20000}
say "bpftrace tools: $bpftrace_threads_n threads, $goroutines_n goroutines"
./scripts/bench-bpftrace.sh "$bpftrace_threads_n" "$goroutines_n" "$repeats"
