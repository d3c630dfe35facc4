#!/usr/bin/env bash
# spawnscope's main entry point.
#
#   sudo ./scripts/trace.sh            the main job: 1,000,000 goroutines and 100,000 OS threads,
#                                      all alive at once, each in its own cgroup, per-task costs
#                                      side by side; a warm-up (each calibrated once, memory
#                                      written; not counted), then each run SPAWNSCOPE_REPEATS times [3]
#                                      without the probes (the times) and once with them (counts
#                                      and waits), alternating, medians (min … max) with each
#                                      outlier's cause (tokio is left out: see below)
#   sudo ./scripts/trace.sh ARGS...    anything else goes to spawnscope, e.g.
#                                      check | run --runtime threads --workload sleep --n 100000 |
#                                      compare (the default sweep: threads, goroutines and tokio,
#                                      hold and sleep, N = 1k…1M clamped to what fits, 3 repeats;
#                                      charts and report.html) | compare --reproduce hansen2023 |
#                                      report results/…
#
# On a fresh Debian/Ubuntu machine it installs the OS packages it needs (saying which), builds
# what is missing, and restores every sysctl it raises on every exit path.
#
# The main job goes on past a run that exits 4 (the workload failed, hit a limit or was stopped)
# or 5 (it completed but its counts disagree with the kernel's: a cross-check failed), saying so,
# as `compare` does, and exits with the stronger of them (4 over 5) once the report is written;
# any other failure stops it with that run's code.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

# Time figures move between identical runs (memory does not): each workload is timed REPEATS
# times, the runtimes alternating so that a slow stretch of the machine does not land on one
# runtime. The eBPF collector adds 7–13 % to a traced thread's CPU time, so the timed runs go
# without it (--no-probes) and one more run of each, traced, gives the counts and waits: timing
# and counting in separate runs, as `perf stat` and `perf record` are. The report takes every time
# figure from the untraced runs and memory from all of them (analyse/time/times_from.rs).
# (Checked before anything is installed or built: a refused run changes nothing.)
repeats=${SPAWNSCOPE_REPEATS:-3}
if [ $# -eq 0 ] && ! is_count "$repeats"; then
  printf 'error: SPAWNSCOPE_REPEATS must be a whole number from 1, not %s\n' "'$repeats'" >&2
  exit 2
fi

if ! is_root; then
  warn "not root: no sysctl tuning, cgroups, eBPF probes or perf; runs measure what they can read."
  warn "for the full picture: sudo ./scripts/trace.sh $*"
fi

# Two groups: a missing tracing package (perf on an unusual kernel) must not keep the build's out.
need_packages "${BUILD_PACKAGES[@]}" || warn "the build may fail: see the packages above"
need_packages "${TRACE_PACKAGES[@]}" || warn "perf or bpftrace missing: flame graphs or the .bt tools will be left out"
need_packages "${LOAD_PACKAGES[@]}" || warn "wrk missing: serve runs will be refused"
build_all
# The probes attach to tracepoints, which libbpf finds through tracefs.
if is_root && [ ! -d /sys/kernel/tracing/events/sched ] && [ ! -d /sys/kernel/debug/tracing/events/sched ]; then
  say "mounting tracefs on /sys/kernel/tracing"
  mount -t tracefs nodev /sys/kernel/tracing || warn "could not mount tracefs: probes will be left out"
fi

spawnscope="$BIN_DIR/spawnscope"
if [ $# -gt 0 ]; then
  exec "$spawnscope" "$@"
fi

out="$REPO_ROOT/results/main-$(date -u +%Y%m%dT%H%M%SZ)"
main_runs=("goroutines hold 1000000" "threads hold 100000")
# run_main DIR RUNTIME WORKLOAD N ARGS...: one run of the main job, its results under DIR.
run_main() {
  local dir=$1 runtime=$2 workload=$3 n=$4
  shift 4
  "$spawnscope" run --runtime "$runtime" --workload "$workload" --n "$n" --out "$dir" "$@"
}
# Rounds of one run per workload: REPEATS untraced, and the traced one in the middle.
rounds=$((repeats + 1))
traced_at=$(traced_round "$repeats")
say "main job: goroutines hold 1,000,000 and threads hold 100,000, a warm-up, then $repeats timed runs each without the probes and 1 traced (results in ${out#"$REPO_ROOT"/})"
# The set's plan (plan.json, as compare writes one), written before the first run; the warm-up's
# size and the set's wall time (elapsed_s, warm-up included, nothing built in it) are added after.
# `repeats` counts the untraced runs of each workload, `traced_runs` the traced ones.
mkdir -p "$out"
started_ns=$(date +%s%N)
write_plan "$out/plan.json" "$repeats" 1 ./scripts/trace.sh -- "${main_runs[@]}"
# The warm-up (warmup/, not counted, as hyperfine's --warmup): the first big run after boot or an
# idle spell uses memory the kernel or the hypervisor must first set up (memory never initialized
# since boot, memory handed back to the host), and its times show it. `spawnscope warm-up` writes
# as much memory as the largest run will use, a page at a time, and calibrates each workload once
# for the counted runs (--calibration-from) — a few seconds where a warm-up run of each took 17.
say "warm-up: each workload calibrated once, then as much memory written as the largest run will use (recorded in warmup/, not counted)"
specs=()
for spec in "${main_runs[@]}"; do specs+=("${spec// /:}"); done
warmed=0
"$spawnscope" warm-up --out "$out/warmup" "${specs[@]}" >"$out/warmup.log" 2>&1 || warmed=$?
# Stopped by a signal (128 + its number): so is the job.
[ "$warmed" -lt 128 ] || exit "$warmed"
if [ "$warmed" -eq 0 ]; then
  sed -n 's/^warm-up: /  warm-up: /p' "$out/warmup.log"
  jq --slurpfile w "$out/warmup/warmup.json" '.warmup_touched_bytes = $w[0].touched.bytes' \
    "$out/plan.json" >"$out/plan.json.new" && mv "$out/plan.json.new" "$out/plan.json"
  calibration=(--calibration-from "$out/warmup")
else
  warn "the warm-up failed (see ${out#"$REPO_ROOT"/}/warmup.log); each counted run calibrates itself"
  calibration=()
fi
# The stronger of the runs' exit codes 4 and 5 (0: every run completed, its counts right).
ended=0
for ((r = 1; r <= rounds; r++)); do
  if [ "$r" -eq "$traced_at" ]; then
    say "round $r of $rounds: traced (counts, waits and a Perfetto trace of each run; its times carry the probes' cost and are left out)"
    probes=(--perfetto)
  else
    say "round $r of $rounds: untraced (timed)"
    probes=(--no-probes)
  fi
  for spec in "${main_runs[@]}"; do
    read -r runtime workload n <<<"$spec"
    rc=0
    run_main "$out" "$runtime" "$workload" "$n" "${calibration[@]}" "${probes[@]}" || rc=$?
    run_ended "$rc" "round $r: $runtime $workload $n" || exit $?
    ended=$(worse_exit "$ended" "$rc")
  done
done
elapsed_s=$(( ($(date +%s%N) - started_ns) / 1000000 ))
jq --argjson ms "$elapsed_s" '.elapsed_s = $ms / 1000' "$out/plan.json" >"$out/plan.json.new" &&
  mv "$out/plan.json.new" "$out/plan.json"
mapfile -t runs < <(find "$out" -mindepth 1 -maxdepth 1 -type d -name '20*' | sort)
# One report over every counted run: its headline and tables are medians over the repeats
# (compare.md; times over the untraced runs, memory over all), and side-by-side.md is cut from it,
# headlines and the line saying which runs the times are of ("Times from …") included, so the two
# never disagree.
"$spawnscope" report "${runs[@]}" --out "$out" >"$out/report.txt"
say "side by side: times over the $repeats untraced runs of each, memory over all $rounds (from compare.md)"
sed -n '1,/^## /{/^\*\*/p; /^Times /{s/^/\n/p}}; /^## Runs: median/,/^## Per task by regression/{/^## Per task by regression/d;p}' "$out/compare.md" |
  tee "$out/side-by-side.md"
give_to_invoker "$REPO_ROOT/results"
echo
# The traced round's timelines: open them in ui.perfetto.dev (docs/manual/perfetto.md).
mapfile -t traces < <(find "$out" -mindepth 2 -maxdepth 2 -name trace.perfetto-trace | sort)
for trace in "${traces[@]}"; do
  echo "Perfetto trace: ${trace#"$REPO_ROOT"/} ($(du -h "$trace" | cut -f1); open it in https://ui.perfetto.dev)"
done
echo "results: ${out#"$REPO_ROOT"/}/ (summary.md in each run; side-by-side.md; compare.md and report.html for the set; re-render with: ./scripts/trace.sh report DIR…)"
if [ "$ended" -ne 0 ]; then
  warn "exit $ended: $([ "$ended" -eq 4 ] && echo 'a run did not complete' || echo "a run's counts were WRONG") (said above, and in its summary.md)"
fi
exit "$ended"
