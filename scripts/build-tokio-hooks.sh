#!/usr/bin/env bash
# build-tokio-hooks.sh OUT: the tokio workload's hooks build (tokio-tasks-hooks: --tokio-trace, for
# run --runtime tokio --runtime-trace), built into OUT. tokio's task hooks need the RUSTFLAGS cfg
# tokio_unstable, which changes every crate's build: so its own target directory
# (target/tokio-hooks), leaving the workspace's build, and the default tokio-tasks that memory and
# time are measured on, as they are. Cargo.lock pins tokio, as for the default build.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
root=$(realpath "$(dirname "$0")/..")
out=$(realpath -m "$1")
target=${SPAWNSCOPE_TOKIO_HOOKS_TARGET_DIR:-$root/target/tokio-hooks}
cd "$root"
RUSTFLAGS="--cfg tokio_unstable" cargo build --release --quiet --locked -p tokio-tasks \
  --features hooks --bin tokio-tasks --target-dir "$target"
mkdir -p "$(dirname "$out")"
cp "$target/release/tokio-tasks" "$out.tmp"
mv "$out.tmp" "$out"
