# shellcheck shell=bash
# The body of the flake's `spawnscope-trace`, the default app: the main job of
# `sudo ./scripts/trace.sh` with no arguments, with the Nix-built binaries and the Nix bpftrace
# and perf (writeShellApplication adds the shebang, errexit, nounset, pipefail, and PATH with the
# flake's `spawnscope` first, which carries the workloads and tools).
#   spawnscope-trace          1,000,000 goroutines held beside 100,000 threads, then the report
#   spawnscope-trace ARGS...  `spawnscope ARGS...`, as ./scripts/trace.sh passes its arguments
# Results go where `spawnscope run` puts them: results/ under the current directory.
# Needs root; without it, says how to re-run and runs nothing (exit 1).

if [ $# -gt 0 ]; then
  exec spawnscope "$@"
fi

if [ "$(id -u)" -ne 0 ]; then
  self=$(readlink -f "$0")
  {
    printf 'spawnscope-trace needs root: it tunes sysctls (and restores them), makes a cgroup per run\n'
    printf 'and loads eBPF programs. Nothing was run. Re-run it as root with the same Nix-built tools:\n'
    printf '  nix build            # in the spawnscope checkout: ./result/bin holds spawnscope-trace\n'
    printf '  sudo ./result/bin/spawnscope-trace\n'
    printf 'or, without a result link (this store path stays until the next garbage collection):\n'
    printf '  sudo %q\n' "$self"
  } >&2
  exit 1
fi

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

results=results
declare -A seen=()
for dir in "$results"/*/; do
  if [ -d "$dir" ]; then seen[$dir]=1; fi
done

status=0
say "spawnscope run: 1,000,000 goroutines, all alive at once (hold)"
spawnscope run --runtime goroutines --workload hold --n 1000000 || status=$?
say "spawnscope run: 100,000 OS threads, all alive at once (hold)"
spawnscope run --runtime threads --workload hold --n 100000 || status=$?

# The results directories these runs wrote: those that were not there before.
new=()
for dir in "$results"/*/; do
  if [ -d "$dir" ] && [ -z "${seen[$dir]:-}" ]; then new+=("${dir%/}"); fi
done
if [ ${#new[@]} -eq 0 ]; then
  printf 'spawnscope-trace: the runs wrote no results directory under %s/\n' "$results" >&2
  exit 1
fi
say "spawnscope report ${new[*]}"
spawnscope report "${new[@]}" || status=$?
exit "$status"
