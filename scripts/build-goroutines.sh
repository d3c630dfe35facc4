#!/usr/bin/env bash
# build-goroutines.sh OUT: the goroutines workload binary, built into OUT the one way every
# caller needs it (the scripts, and the Go, collector, conductor and contract tests).
# Pure Go (CGO_ENABLED=0): `net` (serve) would otherwise link cgo, and every goroutines workload
# would start its threads through glibc (clone3) instead of the Go runtime (clone).
# Exit 3 when there is no Go toolchain, so that tests can skip saying so.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
if ! command -v go >/dev/null; then
  echo "build-goroutines.sh: no Go toolchain (go is not on PATH)" >&2
  exit 3
fi
out=$(realpath -m "$1")
cd "$(dirname "$0")/../goroutines-go"
CGO_ENABLED=0 exec go build -trimpath -o "$out" .
