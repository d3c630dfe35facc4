#!/usr/bin/env bash
# Benchmark: how long `cargo build --release -p spawnscope` takes after one source file is touched,
# here and at an earlier commit, alternated round by round so that the machine's drift falls on
# both; the ratio per file is the figure (docs/build-timings/).
#
# Usage: ./scripts/bench-rebuild.sh BASE_COMMIT BASE_FILE:FILE [BASE_FILE:FILE ...]
#        e.g. ./scripts/bench-rebuild.sh 1ce1b03 \
#               spawnscope/src/render/table.rs:crates/render/src/table.rs
#        BASE_FILE is the path at BASE_COMMIT, FILE the same file's path in this checkout (files
#        move between commits). REPEATS rounds (default 2). The earlier commit is extracted, with
#        its own target directory, under target/bench/rebuild-BASE_COMMIT and kept there for the
#        next run (its first build takes as long as a fresh one; say `rm -r` it to free the room).
#        Prints one line per build (commit, file, seconds), then per file the medians and their
#        ratio. Nothing else is timed while it runs: run it on a quiet machine.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

usage="usage: ${0##*/} BASE_COMMIT BASE_FILE:FILE [BASE_FILE:FILE ...]"
# usage_error WHAT: bad arguments, one line, exit 2 (nothing built or extracted yet).
usage_error() { echo "${0##*/}: $1; $usage" >&2; exit 2; }

[ $# -ge 2 ] || usage_error "give BASE_COMMIT and at least one BASE_FILE:FILE"
base_commit=$1
shift
git rev-parse --verify --quiet "$base_commit^{commit}" >/dev/null || usage_error "'$base_commit' is not a commit here"
repeats=${REPEATS:-2}
is_count "$repeats" || usage_error "REPEATS must be a count, not '$repeats'"
pairs=("$@")
for pair in "${pairs[@]}"; do
  [[ "$pair" == *:* ]] || usage_error "'$pair' is not BASE_FILE:FILE"
  git cat-file -e "$base_commit:${pair%%:*}" 2>/dev/null || usage_error "${pair%%:*} is not in $base_commit"
  [ -f "${pair#*:}" ] || usage_error "${pair#*:} is not in this checkout"
done

need_toolchains
base_dir=$REPO_ROOT/target/bench/rebuild-$(git rev-parse --short "$base_commit")
if [ ! -f "$base_dir/Cargo.toml" ]; then
  say "extracting $base_commit into $base_dir"
  mkdir -p "$base_dir"
  git archive "$base_commit" | tar -x -C "$base_dir"
fi
base_short=$(git rev-parse --short "$base_commit")

# build DIR: the release build of spawnscope there. The extracted tree is stamped with its
# commit: left to its build script, git would find this checkout around it and stamp that.
build() {
  local stamp=()
  [ "$1" != "$base_dir" ] || stamp=(SPAWNSCOPE_GIT_COMMIT="$base_short")
  (cd "$1" && env "${stamp[@]}" cargo build --release -p spawnscope --quiet)
}
say "building both once (a fresh build of either takes minutes)"
build "$base_dir"
build "$REPO_ROOT"

# timed DIR FILE: touches FILE and prints the rebuild's seconds.
timed() {
  local started ended
  touch "$1/$2"
  started=$(date +%s.%N)
  build "$1"
  ended=$(date +%s.%N)
  LC_ALL=C awk -v s="$started" -v e="$ended" 'BEGIN { printf "%.1f\n", e - s }'
}

declare -A base_times here_times
here=$(git rev-parse --short HEAD)
for round in $(seq 1 "$repeats"); do
  for pair in "${pairs[@]}"; do
    t=$(timed "$base_dir" "${pair%%:*}")
    printf '%s\t%s\t%s\tround %s\n' "$base_short" "${pair%%:*}" "$t" "$round"
    base_times[$pair]+="$t "
    t=$(timed "$REPO_ROOT" "${pair#*:}")
    printf '%s\t%s\t%s\tround %s\n' "$here" "${pair#*:}" "$t" "$round"
    here_times[$pair]+="$t "
  done
done
for pair in "${pairs[@]}"; do
  # shellcheck disable=SC2086 # the times are words
  b=$(median ${base_times[$pair]})
  # shellcheck disable=SC2086
  h=$(median ${here_times[$pair]})
  printf 'touch %s: %s s at %s, %s s here, ratio %.2f\n' "${pair#*:}" "$b" "$base_short" "$h" "$(ratio "$h" "$b")"
done
