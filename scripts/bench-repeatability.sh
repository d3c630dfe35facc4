#!/usr/bin/env bash
# Benchmark: how far the time figures move between identical runs, and whether the tool says why.
# Runs the main job's workloads — goroutines hold 1,000,000 and threads hold 100,000 — K times
# each, alternating, untraced as trace.sh times its runs (the probes add to a traced task's CPU
# time), and once more traced in the middle round for the kernel's counts (its times left out, as
# trace.sh's are); an untraced outlier's cause is named from what costs it nothing (memory handed
# back to the host before it, system time per fault, PSI stalls: analyse/time/untraced_causes.rs);
# after trace.sh's warm-up (recorded in warmup/ and not counted), then prints per time figure
# (spawn, user and system time per task, wall time) the median and the max / min over every run
# and over the runs whose verdict is "trustworthy", and each flagged run with its cause (the
# verdict's findings). Goal on the 2-core development VM, K = 10: max / min ≤ 1.3 for goroutines'
# and threads' spawn and system time among trustworthy untraced runs (the system time while
# spawning is judged too: it leaves out the exit, whose kernel path varies on its own); every run
# outside that flagged or its cause named; no run in the futex slow mode (a `futex_walk` finding).
#
# Usage: sudo ./scripts/bench-repeatability.sh [K]   (K: runs of each workload, default 10)
# Environment: THREADS_N (100000), GOROUTINES_N (1000000).
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

k=${1:-10}
is_count "$k" || { printf 'error: K must be a whole number from 1, not %s\n' "'$k'" >&2; exit 2; }
threads_n=${THREADS_N:-100000}
goroutines_n=${GOROUTINES_N:-1000000}
if ! is_count "$threads_n" || ! is_count "$goroutines_n"; then
  printf 'error: THREADS_N and GOROUTINES_N must be whole numbers from 1\n' >&2
  exit 2
fi
is_root || die "needs root: the runs are traced and tuned as the main job's are"
[ "$k" -ge 3 ] || warn "K = $k: an outlier needs 3 runs or more to stand out from a median"

need_packages "${BUILD_PACKAGES[@]}" jq || true
build_all
spawnscope="$BIN_DIR/spawnscope"
out="$REPO_ROOT/results/bench-repeatability-$(date -u +%Y%m%dT%H%M%SZ)"
say "repeatability: goroutines hold $goroutines_n and threads hold $threads_n, $k times each (results in ${out#"$REPO_ROOT"/})"
started=$(date +%s)
started_ns=$(date +%s%N)
# The set's plan (as trace.sh and compare write one: its command, date and, at the end, how long it
# took), written before the first run, so a set committed under docs/ says how it was made.
mkdir -p "$out"
write_plan "$out/plan.json" "$k" - ./scripts/bench-repeatability.sh "$k" -- \
  "goroutines hold $goroutines_n" "threads hold $threads_n"
# The warm-up, recorded in warmup/ and not counted (see trace.sh): the first big run after boot or
# an idle spell pays for memory the kernel or the host must first set up. Each workload is
# calibrated there once, for every run (--calibration-from).
say "warm-up: each workload calibrated once, then as much memory written as the largest run will use (recorded in warmup/, not counted)"
"$spawnscope" warm-up --out "$out/warmup" "goroutines:hold:$goroutines_n" "threads:hold:$threads_n" | sed 's/^/  /'
calibrated=(--calibration-from "$out/warmup")
traced_at=$(( (k + 1) / 2 ))
for ((r = 1; r <= k + 1; r++)); do
  if [ "$r" -eq $((traced_at + 1)) ]; then
    say "extra round: traced (the kernel's counts; its times are left out)"
    probes=()
  else
    say "round $r of $((k + 1)): untraced (timed)"
    probes=(--no-probes)
  fi
  "$spawnscope" run --runtime goroutines --workload hold --n "$goroutines_n" --out "$out" "${calibrated[@]}" "${probes[@]}" >/dev/null
  "$spawnscope" run --runtime threads --workload hold --n "$threads_n" --out "$out" "${calibrated[@]}" "${probes[@]}" >/dev/null
done
jq --argjson ms $(( ($(date +%s%N) - started_ns) / 1000000 )) \
  --slurpfile w "$out/warmup/warmup.json" '.elapsed_s = $ms / 1000 | .warmup_touched_bytes = $w[0].touched.bytes' \
  "$out/plan.json" >"$out/plan.json.new" && mv "$out/plan.json.new" "$out/plan.json"
mapfile -t runs < <(find "$out" -mindepth 1 -maxdepth 1 -type d -name '20*' | sort)
"$spawnscope" report "${runs[@]}" --out "$out" >"$out/report.txt"
give_to_invoker "$REPO_ROOT/results"

echo
echo "# Repeatability: $k runs of each workload after a warm-up (not counted), in $(($(date +%s) - started)) s ($(nproc) CPUs, kernel $(uname -r))"
echo
echo "| experiment | figure | median (all) | max / min (all) | median (trustworthy) | max / min (trustworthy) | trustworthy runs |"
echo "|---|---|---:|---:|---:|---:|---:|"
jq -r '(.repeats // [])[] | . as $r | .figures[] |
  [$r.label, .label,
   (.all.median * 100 | round / 100 | tostring) + " " + .unit,
   (if .all.min > 0 then (.all.max / .all.min * 100 | round / 100 | tostring) else "—" end),
   (if .trustworthy then (.trustworthy.median * 100 | round / 100 | tostring) + " " + .unit else "—" end),
   (if .trustworthy and .trustworthy.min > 0 then (.trustworthy.max / .trustworthy.min * 100 | round / 100 | tostring) else "—" end),
   "\($r.trustworthy_runs) of \($r.runs)"] | "| " + join(" | ") + " |"' "$out/compare.json"
echo
echo "Flagged runs (the verdict's causes) and outliers (more than 1.25× from the median):"
jq -r '(.repeats // [])[] | .label as $l |
  ((.suspect[] | "- \($l) \(.[0] | split("/") | last): \(.[1])"),
   (.outliers[] | "- outlier: \($l) \(.run | split("/") | last) \(.figure) \(.factor * 100 | round / 100)× the median — \(.cause)"))' \
  "$out/compare.json"

# The goal, judged on the threads' spawn and system time among trustworthy runs.
echo
slow=0
for dir in "${runs[@]}"; do
  jq -e '[.verdict.findings[]? | select(.rule == "futex_walk")] | length > 0' "$dir/summary.json" \
    >/dev/null 2>&1 && slow=$((slow + 1))
done
# A spread needs runs to be one: with fewer than 3 trustworthy runs the goal is not judged, and
# the spread over every run (flagged ones included) is printed beside it.
jq -r --arg slow "$slow" '
  def r2: . * 100 | round / 100 | tostring;
  [(.repeats // [])[] | select(.label | startswith("threads hold")) | .trustworthy_runs as $t | .figures[]
   | select(.key == "spawn_us" or .key == "sys_us" or .key == "sys_spawn_us")
   | {label: .label, trusted: $t,
      ratio: (if .trustworthy and .trustworthy.min > 0 then .trustworthy.max / .trustworthy.min else null end),
      all: (if .all.min > 0 then .all.max / .all.min else null end)}]
  | (map("\(.label): max / min among trustworthy runs \(if .ratio then (.ratio | r2) else "n/a" end) over \(.trusted) (goal ≤ 1.3: \(if .trusted < 3 then "not judged: fewer than 3 trustworthy runs" elif .ratio <= 1.3 then "met" else "not met" end)); over every run \(if .all then (.all | r2) else "n/a" end)") | .[]),
    "runs in the futex slow mode (futex_walk findings): \($slow) (goal: 0)"' "$out/compare.json"
echo
echo "results: ${out#"$REPO_ROOT"/}/ (compare.md, report.html, each run's summary.md with its verdict)"
