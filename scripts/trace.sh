#!/usr/bin/env bash
# spawnscope's main entry point.
#
#   sudo ./scripts/trace.sh            the main job: 1,000,000 goroutines and 100,000 OS threads,
#                                      all alive at once, each in its own cgroup, per-task costs
#                                      side by side; each run SPAWNSCOPE_REPEATS times [3],
#                                      alternating, time as median (min … max) with each outlier's
#                                      cause (tokio is left out: see below)
#   sudo ./scripts/trace.sh ARGS...    anything else goes to spawnscope, e.g.
#                                      check | run --runtime threads --workload sleep --n 100000 |
#                                      compare (the default sweep: threads, goroutines and tokio,
#                                      hold and sleep, N = 1k…1M clamped to what fits, 3 repeats;
#                                      charts and report.html) | compare --reproduce hansen2023 |
#                                      report results/…
#
# On a fresh Debian/Ubuntu machine it installs the OS packages it needs (saying which), builds
# what is missing, and restores every sysctl it raises on every exit path.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

# Time figures move between identical runs (memory does not): each workload runs REPEATS times,
# the runtimes alternating so that a slow stretch of the machine does not land on one runtime.
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
# Two runtimes, not three: the job takes about a minute warm on the 2-core dev VM (goroutines
# ≈7 s and threads ≈12 s a repeat), and a tokio hold of 1,000,000 adds ≈6 s a repeat, most of it
# the run's own calibration, probes and settling (≈80 s in all). `compare` puts tokio beside both.
say "main job: goroutines hold 1,000,000 and threads hold 100,000, $repeats times each (results in ${out#"$REPO_ROOT"/})"
for ((r = 1; r <= repeats; r++)); do
  say "repeat $r of $repeats"
  "$spawnscope" run --runtime goroutines --workload hold --n 1000000 --out "$out"
  "$spawnscope" run --runtime threads --workload hold --n 100000 --out "$out"
done
mapfile -t runs < <(find "$out" -mindepth 1 -maxdepth 1 -type d -name '20*' | sort)
first_of_each=()
for runtime in goroutines threads; do
  for dir in "${runs[@]}"; do
    case $dir in *-"$runtime"-hold-*) first_of_each+=("$dir") && break ;; esac
  done
done
say "side by side (the first run of each; memory does not move between repeats)"
"$spawnscope" report "${first_of_each[@]}" --out "$out" | sed -n '/^| per task/,$p' | tee "$out/side-by-side.md"
# The set's exports (compare.md with the repeats, report.html) go beside the runs, over the ones
# the side-by-side just wrote there.
"$spawnscope" report "${runs[@]}" --out "$out" >"$out/report.txt"
if [ "$repeats" -gt 1 ]; then
  say "time over the $repeats repeats"
  sed -n '/^## Time over repeats/,/^## Per task by regression/{/^## Per task by regression/d;p}' "$out/compare.md" |
    tee -a "$out/side-by-side.md"
fi
give_to_invoker "$REPO_ROOT/results"
echo
echo "results: ${out#"$REPO_ROOT"/}/ (summary.md in each run; side-by-side.md; compare.md and report.html for the set; re-render with: ./scripts/trace.sh report DIR…)"
