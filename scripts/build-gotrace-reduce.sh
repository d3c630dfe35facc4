#!/usr/bin/env bash
# build-gotrace-reduce.sh OUT: the Go trace reducer (gotrace-reduce/, its own module with
# golang.org/x/exp/trace: never linked into a workload), built into OUT with the machine's Go.
# Its go.mod needs Go 1.26 (the x/exp version that reads go1.26 traces); GOTOOLCHAIN=local keeps
# an older Go from fetching a newer one. The Nix flake does not build it: its pinned Go may be older.
# Exit 3 when there is no Go toolchain or it is too old, so that tests can skip saying so.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
if ! command -v go >/dev/null; then
  echo "build-gotrace-reduce.sh: no Go toolchain (go is not on PATH)" >&2
  exit 3
fi
version=$(GOTOOLCHAIN=local go env GOVERSION)
minor=${version#go1.}
minor=${minor%%.*}
if ! [[ $minor =~ ^[0-9]+$ ]] || [ "$minor" -lt 26 ]; then
  echo "build-gotrace-reduce.sh: $version is older than the go1.26 the reducer's golang.org/x/exp needs" >&2
  exit 3
fi
out=$(realpath -m "$1")
cd "$(dirname "$0")/../gotrace-reduce"
GOTOOLCHAIN=local CGO_ENABLED=0 exec go build -trimpath -o "$out" .
