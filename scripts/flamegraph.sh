#!/usr/bin/env bash
# Flame graph and system-time attribution of one run, recorded with perf.
#
#   sudo ./scripts/flamegraph.sh RUNTIME WORKLOAD N [RUN FLAGS...]
#       e.g. sudo ./scripts/flamegraph.sh threads sleep 100000
#            sudo ./scripts/flamegraph.sh goroutines hold 1000000 --perf-freq 499
#       runs `spawnscope run --perf` (perf record on the run's cgroup, cpu-clock, kernel and user
#       stacks), then prints where the CPU time went and the flame.svg path.
#   ./scripts/flamegraph.sh pair DIR_A DIR_B [OUT.svg]
#       two runs recorded that way in one flame graph, on one CPU-time scale (root not needed).
#
# Builds what is missing first (installing linux-perf on Debian/Ubuntu when root). Every sysctl the
# run raises is restored on every exit path. Exit: 0 done, 2 bad arguments, else spawnscope's code.
#
# Example (threads sleep 100000 on this repo's 2-core dev VM; the full table is in docs/manual/perf.md):
#   19,612 samples (17,726 kernel, 1,886 user), cpu-clock at 999 Hz, call graph dwarf,4096. 100.0 %
#   of kernel samples fall in named categories; …
#   | category | samples | share | seconds | startup | spawn | join | exit | mostly in | entered from |
#   | memory syscalls (mmap, mprotect, munmap, madvise) | 9,319 | 52.6 % | 9.33 s | 0.00 s | 8.77 s |
#     0.44 s | 0.12 s | `__vm_munmap → do_vmi_munmap → …` | `__munmap ← …stack_overflow::imp::drop_handler` |
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

# Bad arguments: one line, exit 2, nothing done.
usage() {
  printf '%s: %s (usage: %s RUNTIME WORKLOAD N [RUN FLAGS...] | pair DIR_A DIR_B [OUT.svg])\n' \
    "$(basename "$0")" "$1" "$0" >&2
  exit 2
}

if [ "${1:-}" = pair ]; then
  if [ $# -lt 3 ] || [ $# -gt 4 ]; then
    usage "pair takes two results directories and an optional output"
  fi
  for d in "$2" "$3"; do
    [ -d "$d" ] || usage "no such results directory: $d"
  done
  out=${4:-pair.svg}
  [ -x "$BIN_DIR/spawnscope" ] || build_all
  "$BIN_DIR/spawnscope" flame "$2" "$3" -o "$out"
  exit 0
fi

[ $# -ge 3 ] || usage "give RUNTIME WORKLOAD N"
runtime=$1 workload=$2 n=$3
shift 3
case "$runtime" in threads | goroutines) ;; *) usage "runtime is threads or goroutines, not '$runtime'" ;; esac
case "$workload" in sleep | hold | churn | pingpong | chain) ;; *) usage "unknown workload '$workload'" ;; esac
is_count "$n" || usage "N is a whole number from 1 to 999999999, not '$n'"
is_root || usage "perf samples the kernel: run it with sudo"

need_packages "linux-perf|linux-tools-$(uname -r)" || die "perf is needed: apt-get install linux-perf (Debian) or linux-tools-$(uname -r) (Ubuntu)"
build_all

out="$REPO_ROOT/results/flame-$(date -u +%Y%m%dT%H%M%SZ)"
say "spawnscope run --perf --runtime $runtime --workload $workload --n $n $* (results in ${out#"$REPO_ROOT"/})"
status=0
"$BIN_DIR/spawnscope" run --perf --runtime "$runtime" --workload "$workload" --n "$n" --out "$out" "$@" || status=$?
dir=$(find "$out" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | head -n 1)
if [ -n "$dir" ] && [ -f "$dir/summary.md" ]; then
  echo
  sed -n '/^## Where the CPU time went/,/^## /p' "$dir/summary.md" | sed '$ { /^## /d }'
  [ -f "$dir/flame.svg" ] && echo "flame graph: ${dir#"$REPO_ROOT"/}/flame.svg"
fi
exit "$status"
