#!/usr/bin/env bash
# Benchmark: what the eBPF collector costs the workload it traces. Alternates `spawnscope run`
# with and without the collector (--no-probes) on the same workload — 100,000 threads and
# 1,000,000 goroutines in `hold` — in pairs, the order inside a pair alternating (untraced first
# in odd pairs, traced first in even ones), so neither kind always runs on a machine still freeing
# the last run. Per pair: the workload's wall time (release to reap, run.json's wall_ns) and its
# CPU time from the run's cgroup (sentinels.json: cgroup v1 cpuacct.usage or v2 cpu.stat
# usage_usec, read at the release and after the reap), which no other process can move; a host
# whose runs have no CPU-accounting cgroup is refused. The probes run in the traced tasks'
# context, so their cost is charged there.
#
# How many pairs. REPEATS pairs first; then one more pair at a time until the CPU ratio's 95 %
# interval is narrower than the goal's margin (its half-width below MARGIN percentage points,
# default 1), or MAX_PAIRS pairs (default 30, at least REPEATS) have been taken; the output says
# which. Each ratio (wall, CPU) is the mean of the per-pair ratios traced/untraced with its paired
# 95 % Student t-interval (`spawnscope pairs`, crates/analyse/src/time/paired.rs). Stopping when
# the interval is narrow enough is a sequential rule: its coverage is close to 95 %, not exact.
#
# Outliers. The machine sometimes runs a whole run in a slow mode (half again the CPU time or
# more). Per workload, over the pairs taken so far: a run is an outlier when its CPU time is more
# than 1.25x, or less than 1/1.25, the median CPU time of its own kind (traced or untraced);
# exactly 1.25x is not. A pair with an outlier run is left out of every interval below (and
# printed, marked EXCLUDED). With fewer than 3 pairs the rule cannot single out a slow run.
#
# What the difference is made of, over the pairs used:
#   - the CPU difference traced − untraced, mean with its 95 % interval;
#   - the BPF programs' own time (summary.json's .probes.cost: each program counts its runs, and
#     the warm-up's probes' calibration — a short traced hold with the kernel's run-time
#     statistics on — gives its ns per run, the statistics off in the measured runs; time = runs
#     × that, an estimate), mean with its interval;
#   - the unexplained part, per pair the difference less the traced run's BPF time: the
#     tracepoints' dispatch, the syscall-tracing slow path, and the machine's noise. The BPF time explains the difference when the unexplained part's
#     95 % interval includes 0;
#   - per program (tracepoint): runs (events), ns per event, total, its share of the probes'
#     total and of the CPU difference — means over the used pairs' traced runs (a program that
#     did not run in a run counts 0 there), so the programs' shares and the unexplained part's
#     add up to the difference.
#
# The model, checked (issue 40.3): before the pairs, a fresh `spawnscope probe-cost --json`
# (PROBE_COST_ROUNDS cycles, default 3, about PROBE_COST_SECONDS s of rounds, default 30) on this
# machine, written to OUT/probe-cost.json before anything is derived from it. From its own figures,
# never from the pairs (a rate fitted on the benchmark would check itself), `spawnscope pairs
# --band` predicts the CPU difference of each used pair's traced run as a band: the run's own
# events (each program's runs less the other processes' it filtered out) × per hook, at the low
# end, ours − floor (the statistics' ns a run of the lean program less the floor's on the same
# hook: what the program does beyond the least any program there does, the statistics' clock read
# cancelling out) and, at the high end, the largest of ours (the whole statistics figure, one clock
# read too many), where the hook's loop resolves an event (getppid's, for the syscall pair) the
# loop's ns an event with the statistics off (the dispatch and the syscall-tracing slow path
# included), and ours coldest (the statistics' figure with every cache emptied before each event:
# the most an event can cost the program; crates/analyse/src/probes/overhead_band.rs says why each end
# bounds what it bounds); between them the estimate, the events at ours cold (the CPU's own caches
# emptied, as a big run's events meet them), checked against the measured difference's 95 %
# interval. The
# host's share (the filtered-out syscalls × the pair's floor) is said beside the band, not added:
# those syscalls' CPU is their processes', outside the run's cgroup. It says whether the measured
# difference's mean is inside the band, and where it or its 95 % interval is outside, by how much.
# The last table, in Markdown, per workload: pairs used (excluded) of those taken and why the
# taking stopped, the ratios with their intervals, the difference and its parts.
#
# Raw data first: every pair is appended to OUT/pairs.csv as soon as it is measured (columns
# workload, pair, first, untraced_wall_s, untraced_cpu_s, traced_wall_s, traced_cpu_s, bpf_s
# (empty when not measured), bpf_sampled_share, and the wait4 rusage CPU of each run for
# reference), each traced run's per-program cost to OUT/programs.csv; the final table goes to
# OUT/table.md and each workload's final figures (`spawnscope pairs`' JSON with the unexplained CPU
# time per program run, how the pairs were taken, the date, kernel and CPUs) to
# OUT/figures-RUNTIME.json (with the band, `band`), and the per-program means of its table to
# OUT/programs-RUNTIME.json; the warm-up's record, with the probes' calibration that timed the
# traced runs' programs, to OUT/warmup/warmup.json. OUT defaults to
# results/bench-overhead-<UTC time>/.
#
# Then it runs scripts/bench-bpftrace.sh for the bpftrace tools' overhead (expected to be much
# higher), on GOROUTINES_N goroutines and BPFTRACE_THREADS_N threads (default 20000), REPEATS
# times. SKIP_BPFTRACE=1 leaves that part out.
#
# Usage: sudo [PROBES=lean|full] [MARGIN=PP] [MAX_PAIRS=N] [OUT=DIR] [SKIP_BPFTRACE=1] \
#          [WORKLOADS="threads goroutines"] \
#          [BPFTRACE_THREADS_N=N] [PROBE_COST_ROUNDS=N] [PROBE_COST_SECONDS=S] \
#          ./scripts/bench-overhead.sh [THREADS_N [GOROUTINES_N [REPEATS]]]
#        (defaults 100000 1000000 5). Needs root. Raises the sysctls THREADS_N threads need with
#        `spawnscope sysctl apply` and restores them on every exit. Bad arguments: exit 2.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

bench_args 100000 1000000 5 "$@"
script=${0##*/}
min_pairs=$repeats
max_pairs=${MAX_PAIRS:-$((repeats > 30 ? repeats : 30))}
margin_pp=${MARGIN:-1}
probes_mode=${PROBES:-lean}
# The workloads measured, in order (WORKLOADS="goroutines": that one alone, e.g. for the many
# pairs its CPU noise needs).
read -r -a workloads <<<"${WORKLOADS:-threads goroutines}"
[ ${#workloads[@]} -ge 1 ] || { echo "$script: WORKLOADS names no workload" >&2; exit 2; }
for runtime in "${workloads[@]}"; do
  case $runtime in
    threads | goroutines) ;;
    *) echo "$script: WORKLOADS holds threads and/or goroutines, not '$runtime'" >&2; exit 2 ;;
  esac
done
case $probes_mode in
  lean | full) ;;
  *) echo "$script: PROBES must be lean or full, not '$probes_mode'" >&2; exit 2 ;;
esac
is_count "$max_pairs" || { echo "$script: MAX_PAIRS must be a positive whole number, not '$max_pairs'" >&2; exit 2; }
[ "$max_pairs" -ge "$min_pairs" ] ||
  { echo "$script: MAX_PAIRS ($max_pairs) is below REPEATS ($min_pairs), the pairs taken first" >&2; exit 2; }
if ! [[ "$margin_pp" =~ ^([0-9]+[.]?[0-9]*|[.][0-9]+)$ ]] ||
  ! LC_ALL=C awk -v m="$margin_pp" 'BEGIN { exit !(m + 0 > 0) }'; then
  echo "$script: MARGIN must be a number of percentage points above 0 (e.g. 1 or 0.5), not '$margin_pp'" >&2
  exit 2
fi
probe_cost_rounds=${PROBE_COST_ROUNDS:-3}
probe_cost_seconds=${PROBE_COST_SECONDS:-30}
{ is_count "$probe_cost_rounds" && [ "$probe_cost_rounds" -ge 1 ]; } ||
  { echo "$script: PROBE_COST_ROUNDS must be a positive whole number, not '$probe_cost_rounds'" >&2; exit 2; }
{ is_count "$probe_cost_seconds" && [ "$probe_cost_seconds" -ge 1 ]; } ||
  { echo "$script: PROBE_COST_SECONDS must be a positive whole number, not '$probe_cost_seconds'" >&2; exit 2; }
margin=$(LC_ALL=C awk -v m="$margin_pp" 'BEGIN { printf "%.15g", m / 100 }')
is_root || die "the collector needs root: sudo $0 $*"
OUTLIER_FACTOR=1.25
outlier_rule="a run is an outlier when its CPU time is more than ${OUTLIER_FACTOR}× or less than 1/${OUTLIER_FACTOR} of the median CPU time of its kind (traced or untraced) over the workload's pairs; a pair with an outlier is left out"
[ "$min_pairs" -ge 3 ] ||
  warn "$min_pairs pair(s) first: with fewer than 3 pairs the outlier rule cannot single out a slow run (see the header)"
need_command jq
build_all
spawnscope="$BIN_DIR/spawnscope"

out=${OUT:-$REPO_ROOT/results/bench-overhead-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
pairs_csv="$out/pairs.csv" programs_csv="$out/programs.csv"
echo "workload,pair,first,untraced_wall_s,untraced_cpu_s,traced_wall_s,traced_cpu_s,bpf_s,bpf_sampled_share,untraced_rusage_cpu_s,traced_rusage_cpu_s" >"$pairs_csv"
echo "workload,pair,program,tracepoint,events,filtered_out,total_ns" >"$programs_csv"

work=$(mktemp -d)
restore() {
  "$spawnscope" sysctl restore >/dev/null || warn "sysctl restore failed: run spawnscope sysctl restore"
  rm -rf "$work"
  give_to_invoker "$out"
}
trap restore EXIT
trap 'exit 130' INT TERM
"$spawnscope" sysctl apply --n "$threads_n" >/dev/null

# run_dir RUNTIME R KIND: the results directory measure's run made (one under its --out).
run_dir() {
  local dirs=("$work/$1-$2-$3"/*/)
  if [ ${#dirs[@]} -ne 1 ] || [ ! -d "${dirs[0]}" ]; then
    die "no single results directory in $work/$1-$2-$3"
  fi
  printf '%s\n' "${dirs[0]%/}"
}

# measure RUNTIME N KIND R: one run; prints its workload wall time, its CPU time from its cgroup
# (release to reap) and its wait4 rusage CPU time, in seconds.
measure() {
  local out="$work/$1-$4-$3" extra=(--probes "$probes_mode") dir source
  [ "$3" = untraced ] && extra=(--no-probes)
  "$spawnscope" run --runtime "$1" --workload hold --n "$2" --out "$out" "${extra[@]}" \
    --calibration-from "$warmup_dir" >"$out.log" 2>&1 ||
    die "spawnscope run failed: $(tail -3 "$out.log")"
  dir=$(run_dir "$1" "$4" "$3")
  source=$(jq -r '.run_cpu_source // "none"' "$dir/sentinels.json")
  case $source in
    cgroup_v1_cpuacct | cgroup_v2_cpu_stat) ;;
    *) die "the run's CPU time was not read from its cgroup (sentinels.json run_cpu_source: $source): this benchmark needs a cgroup v2 hierarchy or a v1 cpuacct one" ;;
  esac
  jq -r --slurpfile run "$dir/run.json" '
    def cpu($name): .marks | map(select(.name == $name)) | first | .run_cpu_ns;
    if cpu("start") == null or cpu("reaped") == null then "missing"
    else "\($run[0].wall_ns / 1e9) \((cpu("reaped") - cpu("start")) / 1e9) \(($run[0].rusage.user_us + $run[0].rusage.sys_us) / 1e6)"
    end' "$dir/sentinels.json" | grep -v '^missing$' ||
    die "$dir/sentinels.json has no cgroup CPU reading at the release or after the reap"
}

# fmt FORMAT NUM [FACTOR]: NUM times FACTOR (default 1) through awk's printf FORMAT.
fmt() { LC_ALL=C awk -v f="$1" -v x="$2" -v k="${3:-1}" 'BEGIN { printf f, x * k }'; }

# interval JSON KEY FORMAT [FACTOR]: the figure KEY of `spawnscope pairs`' JSON as "mean (low –
# high)" through FORMAT times FACTOR; "mean (1 pair: no interval)"; "n/a" when absent.
interval() {
  local v mean low high n
  v=$(jq -r --arg k "$2" '.[$k] | if . == null then "none" else "\(.mean) \(.low // "-") \(.high // "-") \(.n)" end' <<<"$1")
  [ "$v" = none ] && { echo n/a; return 0; }
  read -r mean low high n <<<"$v"
  if [ "$low" = - ]; then
    echo "$(fmt "$3" "$mean" "${4:-1}") ($n pair: no interval)"
  else
    echo "$(fmt "$3" "$mean" "${4:-1}") ($(fmt "$3" "$low" "${4:-1}") – $(fmt "$3" "$high" "${4:-1}"))"
  fi
}

# half_points JSON KEY: the half-width of figure KEY in percentage points (2 decimals), or "-".
half_points() {
  local h
  h=$(jq -r --arg k "$2" '.[$k].half_width // "-"' <<<"$1")
  if [ "$h" = - ]; then echo -; else fmt %.2f "$h" 100; fi
}

# judge_outliers: over the pairs taken (u_cpus, t_cpus), the outlier rule (header); sets
# pair_notes (per pair "" when used, else the outlier(s)), used (indices) and excluded (pair
# numbers, comma-separated).
judge_outliers() {
  local i u_med t_med note status
  u_med=$(median "${u_cpus[@]}")
  t_med=$(median "${t_cpus[@]}")
  pair_notes=() used=() excluded=""
  for i in "${!u_cpus[@]}"; do
    note=""
    for kind in untraced traced; do
      local cpu=${u_cpus[$i]} med=$u_med
      [ "$kind" = traced ] && cpu=${t_cpus[$i]} med=$t_med
      status=0
      is_outlier "$cpu" "$med" "$OUTLIER_FACTOR" || status=$?
      case $status in
        0) note=${note:+$note, }"$kind CPU $(fmt %.2f "$(ratio "$cpu" "$med")")× its kind's median" ;;
        1) ;;
        *) die "outlier rule: cannot judge the $kind CPU time $cpu s against its kind's median $med s" ;;
      esac
    done
    pair_notes+=("$note")
    if [ -z "$note" ]; then used+=("$i"); else excluded+=${excluded:+,}$((i + 1)); fi
  done
}

# figures RUNTIME: `spawnscope pairs` over the workload's pairs in pairs.csv, outliers left out.
figures() {
  local extra=()
  [ -n "$excluded" ] && extra=(--exclude "$excluded")
  "$spawnscope" pairs "$pairs_csv" --workload "$1" --margin "$margin" --programs "$programs_csv" \
    --band "$probe_cost_json" "${extra[@]}"
}

# cost_table SUMMARY... MEAN_DIFF: from the used pairs' traced runs' summary.json files (those
# without .probes.cost left out), the per-program table, means over the runs; MEAN_DIFF is the
# mean CPU difference (s) the programs' shares are of.
cost_table() {
  local diff=${*: -1} measured=() f rows=() mean_total shares calibrated
  for f in "${@:1:$#-1}"; do
    jq -e '.probes.cost != null' "$f" >/dev/null && measured+=("$f")
  done
  echo "What each program costs (BPF run-time statistics), mean over the ${#measured[@]} traced run(s) of the pairs used:"
  if [ ${#measured[@]} -eq 0 ]; then
    echo "  not measured (no .probes.cost in the traced runs' summary.json)"
    return 0
  fi
  # The means per program, most expensive first, written once (OUT/programs-RUNTIME.json: the
  # manual quotes it) and printed as the table below.
  jq -s --argjson diff "$diff" '
    map(.probes.cost) as $runs | ($runs | length) as $n
    | ($runs | map(.total_ns) | add / $n) as $total
    | [($runs | map(.programs[] | {program, tracepoint}) | unique_by(.program))[] as $p
       | [$runs[] | ((.programs | map(select(.program == $p.program)) | first) // {events: 0, total_ns: 0})] as $rows
       | ($rows | map(.events) | add / $n) as $ev | ($rows | map(.total_ns) | add / $n) as $ns
       | {program: $p.program, tracepoint: $p.tracepoint, events: $ev, total_ns: $ns,
          ns_per_event: (if $ev > 0 then $ns / $ev else null end),
          share_of_probes: (if $total > 0 then $ns / $total else null end),
          share_of_difference: (if $diff > 0 then $ns / 1e9 / $diff else null end)}]
    | sort_by(-.total_ns)' "${measured[@]}" >"$out/programs-$runtime.json"
  while IFS=$'\t' read -r prog tp ev tot npe share dshare; do
    npe=$([ -n "$npe" ] && fmt %.1f "$npe" || echo -)
    dshare=$([ -n "$dshare" ] && echo "$(fmt %.1f "$dshare" 100) %" || echo "n/a (difference ≤ 0)")
    rows+=("| $prog | $tp | $(fmt %.0f "$ev") | $npe | $(fmt %.3f "$tot" 1e-6) | $(fmt %.1f "$share" 100) % | $dshare |")
  done < <(jq -r '.[] | [.program, .tracepoint, .events, .total_ns, (.ns_per_event // ""),
    (.share_of_probes // 0), (.share_of_difference // "")] | @tsv' "$out/programs-$runtime.json")
  echo
  echo "| program | tracepoint | runs (events) | ns per event | total (ms) | share of probes' total | share of the CPU difference |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  mean_total=$(jq -rs 'map(.probes.cost.total_ns) | add / length' "${measured[@]}")
  read -ra shares < <(jq -rs 'map(.probes.cost.sampled_share | select(. != null) | tostring) | join(" ")' "${measured[@]}")
  calibrated=$(jq -rs 'map(.probes.cost.rates_from | select(. != null)) | unique | join("; ")' "${measured[@]}")
  echo
  printf "all programs: %s ms mean" "$(fmt %.3f "$mean_total" 1e-6)"
  if [ -n "$calibrated" ]; then
    printf "; each program's time is its runs × its ns per run in the probes' calibration run (%s), the statistics off in the measured runs: an estimate\n" "$calibrated"
  elif [ ${#shares[@]} -gt 0 ]; then
    printf "; the statistics were on %s %% of each run (sampled_share, median): each program's time is its runs × the windows' ns per run, an estimate (a program with no run in a window shows 0 ns)\n" \
      "$(fmt %.1f "$(median "${shares[@]}")" 100)"
  else
    printf "; the statistics were on for the whole run (exact)\n"
  fi
}

# probe-cost's figures, measured before the pairs and kept raw: the band's prices (see the header).
probe_cost_json="$out/probe-cost.json"
say "probe-cost: $probe_cost_rounds cycles, about $probe_cost_seconds s of rounds (PROBE_COST_ROUNDS, PROBE_COST_SECONDS): the prices the model is checked with"
"$spawnscope" probe-cost --json --rounds "$probe_cost_rounds" --seconds "$probe_cost_seconds" >"$probe_cost_json.partial" 2>"$work/probe-cost.log" ||
  { rm -f "$probe_cost_json.partial"; die "probe-cost failed: $(tail -3 "$work/probe-cost.log")"; }
mv "$probe_cost_json.partial" "$probe_cost_json"
say "probes measured: $probes_mode (PROBES=lean|full); pairs: $min_pairs first, then until the CPU ratio's 95 % half-width is below $margin_pp point(s), at most $max_pairs (REPEATS, MARGIN, MAX_PAIRS); raw data in ${out#"$REPO_ROOT"/}/"
# The warm-up, not counted (see trace.sh): the first big run after boot or an idle spell pays for
# memory the kernel or the host must first set up, and would land on one kind. It calibrates each
# workload once for every run after it (--calibration-from).
say "warm-up: each workload calibrated once, then as much memory written as the largest run will use (not counted)"
# Kept in OUT/warmup/: its probes' calibration timed every traced run's programs.
warmup_dir="$out/warmup"
warm_ups=()
for runtime in "${workloads[@]}"; do
  case $runtime in
    threads) warm_ups+=("threads:hold:$threads_n") ;;
    goroutines) warm_ups+=("goroutines:hold:$goroutines_n") ;;
  esac
done
"$spawnscope" warm-up --out "$warmup_dir" --probes "$probes_mode" "${warm_ups[@]}" >"$work/warmup.log" 2>&1 ||
  die "the warm-up failed: $(tail -3 "$work/warmup.log")"
sed -n 's/^warm-up: wrote /  warm-up: wrote /p' "$work/warmup.log"
rows=()
for runtime in "${workloads[@]}"; do
  n=$threads_n
  [ "$runtime" = goroutines ] && n=$goroutines_n
  u_cpus=() t_cpus=() summaries=() pair_lines=()
  echo
  echo "## $runtime hold --n $n, probes $probes_mode"
  echo
  pair=0 stop=""
  while [ -z "$stop" ]; do
    pair=$((pair + 1))
    say "$runtime hold --n $n: pair $pair ($min_pairs first, at most $max_pairs)"
    if ((pair % 2)); then
      first=untraced
      u=$(measure "$runtime" "$n" untraced "$pair")
      t=$(measure "$runtime" "$n" traced "$pair")
    else
      first=traced
      t=$(measure "$runtime" "$n" traced "$pair")
      u=$(measure "$runtime" "$n" untraced "$pair")
    fi
    read -r u_wall u_cpu u_rusage <<<"$u"
    read -r t_wall t_cpu t_rusage <<<"$t"
    summary="$(run_dir "$runtime" "$pair" traced)/summary.json"
    summaries+=("$summary")
    bpf_s=$(jq -r '.probes.cost.total_ns // empty | . / 1e9' "$summary")
    sampled=$(jq -r '.probes.cost.sampled_share // empty' "$summary")
    echo "$runtime,$pair,$first,$u_wall,$u_cpu,$t_wall,$t_cpu,$bpf_s,$sampled,$u_rusage,$t_rusage" >>"$pairs_csv"
    jq -r --arg w "$runtime" --argjson p "$pair" \
      '.probes.cost.programs[]? | [$w, $p, .program, .tracepoint, .events, (.filtered_out // 0), .total_ns] | @csv' "$summary" >>"$programs_csv"
    u_cpus+=("$u_cpu") t_cpus+=("$t_cpu")
    cpu_diff=$(LC_ALL=C awk -v t="$t_cpu" -v u="$u_cpu" 'BEGIN { print t - u }')
    bpf_text="not measured"
    [ -n "$bpf_s" ] && bpf_text=$(fmt '%.4f s' "$bpf_s")
    pair_lines+=("$(printf 'pair %d (%s first): untraced %.3f s wall, %.3f s CPU; traced %.3f s wall, %.3f s CPU (%s s); BPF time %s' \
      "$pair" "$first" "$u_wall" "$u_cpu" "$t_wall" "$t_cpu" "$(fmt %+.4f "$cpu_diff")" "$bpf_text")")
    say "$runtime: ${pair_lines[-1]}"
    ((pair >= min_pairs)) || continue
    judge_outliers
    json=$(figures "$runtime")
    half=$(half_points "$json" cpu_ratio)
    if jq -e .cpu_ratio_within_margin <<<"$json" >/dev/null; then
      stop="interval below the margin: ± $half points after $pair pairs"
    elif ((pair >= max_pairs)); then
      stop="MAX_PAIRS reached: ± $half points after $pair pairs, not below the margin of $margin_pp"
    else
      say "$runtime: CPU ratio $(interval "$json" cpu_ratio %.4f) over ${#used[@]} pair(s) used, ± $half points: not yet below $margin_pp"
    fi
  done
  echo "The pairs, judged by the outlier rule over all $pair:"
  for i in "${!pair_lines[@]}"; do
    note=${pair_notes[$i]}
    echo "  ${pair_lines[$i]}${note:+; EXCLUDED (outlier: $note)}"
  done
  echo "pairs used: ${#used[@]} of $pair; excluded: $((pair - ${#used[@]})) (rule: $outlier_rule)"
  echo "stopped: $stop"
  # The final figures as `spawnscope pairs` gave them, with how the pairs were taken: what a page
  # of the manual quotes (`<!-- value: SET/figures-threads.json cpu_ratio.mean fixed3 -->`).
  jq --argjson taken "$pair" --arg stopped "$stop" --arg probes "$probes_mode" --argjson n "$n" \
    --arg recorded "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg kernel "$(uname -r)" --argjson cpus "$(nproc)" \
    '. + {pairs_taken: $taken, stopped: $stopped, probes: $probes, n: $n,
          recorded_utc: $recorded, kernel: $kernel, cpus: $cpus}' <<<"$json" >"$out/figures-$runtime.json"
  echo
  wall_ci=$(interval "$json" wall_ratio %.4f)
  cpu_ci=$(interval "$json" cpu_ratio %.4f)
  echo "Over the ${#used[@]} pair(s) used, the mean of the per-pair ratios traced/untraced with its 95 % t-interval:"
  echo "  wall: $wall_ci, ± $(half_points "$json" wall_ratio) points"
  echo "  CPU:  $cpu_ci, ± $half points (margin $margin_pp)"
  diff_ci=$(interval "$json" cpu_difference_s %+.4f)
  bpf_ci=$(interval "$json" bpf_s %.4f)
  unexp_ci=$(interval "$json" unexplained_s %+.4f)
  read -r m_diff m_bpf m_unexp un_low un_high < <(jq -r '[.cpu_difference_s.mean, .bpf_s.mean, .unexplained_s.mean, .unexplained_s.low, .unexplained_s.high] | map(. // "-") | join(" ")' <<<"$json")
  share_of() { if [ "$1" = - ] || ! LC_ALL=C awk -v d="$m_diff" 'BEGIN { exit !(d > 0) }'; then echo "n/a: difference ≤ 0"; else echo "$(fmt %.0f "$(ratio "$1" "$m_diff")" 100) %"; fi; }
  if [ "$un_low" = - ]; then
    explained="n/a (no interval)"
  elif LC_ALL=C awk -v l="$un_low" -v h="$un_high" 'BEGIN { exit !(l <= 0 && 0 <= h) }'; then
    explained="yes (the unexplained part's interval includes 0)"
  else
    explained="no (the unexplained part's interval excludes 0)"
  fi
  echo
  echo "What the CPU difference is made of (s, mean (95 % interval) over the pairs used):"
  echo "  CPU difference traced − untraced: $diff_ci"
  echo "  BPF programs' own time:           $bpf_ci; share of the difference: $(share_of "$m_bpf")"
  echo "  unexplained (difference − BPF):   $unexp_ci; share of the difference: $(share_of "$m_unexp") (the tracepoints' dispatch, the syscall slow path, the statistics windows' clock reads, the machine's noise)"
  echo "  the BPF time explains the difference: $explained"
  # The model's band, from probe-cost's figures (not fitted on these pairs).
  read -r b_low b_high b_estimate b_host b_says < <(jq -r '.band | if . == null then "- - - - none" else "\(.low_s) \(.high_s) \(.estimate_s // "-") \(.host_share_s) \(.says)" end' <<<"$json")
  if [ "$b_low" = - ]; then
    band_text="n/a (no CPU difference)"
  else
    band_text="predicted $(fmt %.3f "$b_low") – $(fmt %.3f "$b_high") s"
    [ "$b_estimate" = - ] || band_text+=" (estimate $(fmt %.3f "$b_estimate") s)"
    band_text+="; measured $diff_ci: $b_says"
  fi
  echo
  echo "The model, from probe-cost's figures (${probe_cost_json#"$REPO_ROOT"/}; not fitted on these pairs):"
  echo "  the traced runs' own events × per hook (ours − floor) … (the largest of ours, its loop's ns an event where the loop resolves one, and ours with every cache emptied): $band_text"
  [ "$b_estimate" = - ] ||
    echo "  the estimate between the ends: the events at ours with the CPU's own caches emptied (not a bound: checked against the measured interval)"
  if [ "$b_low" != - ]; then
    echo "  beside it, not in it: the host's share (other processes' syscalls the pair filtered out × its floor), $(fmt %.4f "$b_host") s, outside the run's cgroup"
    jq -r '.band.unpriced[]? | "  unpriced (no probe-cost hook): \(.[0]), \(.[1] | round) events a run"' <<<"$json"
  fi
  echo
  used_summaries=()
  for i in "${used[@]}"; do used_summaries+=("${summaries[$i]}"); done
  if [ ${#used_summaries[@]} -gt 0 ] && [ "$m_diff" != - ]; then
    cost_table "${used_summaries[@]}" "$m_diff"
  else
    echo "per-program cost: n/a (no pair used)"
  fi
  rows+=("| $runtime hold, N = $n | ${#used[@]} ($((pair - ${#used[@]}))) of $pair; $stop | $wall_ci | $cpu_ci | $diff_ci | $bpf_ci ($(share_of "$m_bpf")) | $unexp_ci ($(share_of "$m_unexp")); explained: ${explained%% *} | $band_text |")
done

{
  echo "eBPF collector overhead, probes $probes_mode: per workload, the mean of the per-pair ratios traced/untraced with its 95 % t-interval over the pairs used (CPU time from the run's cgroup, release to reap); pairs were taken, $min_pairs first, until the CPU ratio's half-width was below $margin_pp point(s) or $max_pairs pairs. The CPU difference traced − untraced (s), the BPF programs' own time (s) and the unexplained rest (s), each mean (95 % interval), with their shares of the difference; explained: the unexplained part's interval includes 0. The model's band: the traced runs' own events at probe-cost's prices (OUT/probe-cost.json, measured first), and where the measured difference falls. Pairs used (excluded), the outlier rule: $outlier_rule."
  echo
  echo "| workload | pairs used (excluded) of taken; stopped | wall ratio (95 %) | CPU ratio (95 %) | CPU difference, s | BPF programs' time, s (share) | unexplained, s (share) | the model's band from probe-cost, s |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out/table.md"
echo
cat "$out/table.md"
echo
echo "raw data: ${out#"$REPO_ROOT"/}/pairs.csv, programs.csv; this table: ${out#"$REPO_ROOT"/}/table.md"
if [ "${SKIP_BPFTRACE:-0}" = 1 ]; then
  say "bpftrace tools: skipped (SKIP_BPFTRACE=1)"
  exit 0
fi
bpftrace_threads_n=${BPFTRACE_THREADS_N:-20000}
say "bpftrace tools: $bpftrace_threads_n threads, $goroutines_n goroutines"
./scripts/bench-bpftrace.sh "$bpftrace_threads_n" "$goroutines_n" "$repeats"
