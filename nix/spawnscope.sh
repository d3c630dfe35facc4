# shellcheck shell=bash
# The body of the flake's `spawnscope` (writeShellApplication adds the shebang, errexit, nounset,
# pipefail, PATH with bpftrace, perf and inferno first, and these variables):
#   SPAWNSCOPE_CONDUCTOR        the conductor binary (package spawnscope-unwrapped)
#   SPAWNSCOPE_THREADS_BIN      the Nix-built `threads`, read by the conductor
#   SPAWNSCOPE_GOROUTINES_BIN   the Nix-built `goroutines`, read by the conductor
#   SPAWNSCOPE_TOKIO_BIN        the Nix-built `tokio-tasks`, read by the conductor
#   SPAWNSCOPE_PROCESSES_BIN    the Nix-built `processes`, read by the conductor
# `run` and `compare` tune sysctls, make cgroups and load eBPF programs, so they need root; asked
# without it, this says how to re-run with the same store paths and runs nothing.

conductor=${SPAWNSCOPE_CONDUCTOR:?SPAWNSCOPE_CONDUCTOR is set by the flake}

case "${1:-}" in
  run | compare)
    if [ "$(id -u)" -ne 0 ]; then
      self=$(readlink -f "$0")
      {
        printf 'spawnscope %s needs root: it tunes sysctls (and restores them), makes a cgroup per run\n' "$1"
        printf 'and loads eBPF programs. Nothing was run. Re-run it as root with the same Nix-built tools:\n'
        printf '  nix build            # in the spawnscope checkout: ./result/bin holds spawnscope\n'
        printf '  sudo ./result/bin/spawnscope'
        printf ' %q' "$@"
        printf '\nor, without a result link (this store path stays until the next garbage collection):\n'
        printf '  sudo %q' "$self"
        printf ' %q' "$@"
        printf '\n'
      } >&2
      exit 1
    fi
    ;;
esac

exec "$conductor" "$@"
