#!/usr/bin/env bash
# build-goroutines.sh [--cgo] OUT: the goroutines workload binary, built into OUT the one way every
# caller needs it (the scripts, and the Go, collector, conductor and contract tests).
# Pure Go (CGO_ENABLED=0): `net` (serve) would otherwise link cgo, and every goroutines workload
# would start its threads through glibc (clone3) instead of the Go runtime (clone).
# --cgo: built as most Go programs are, cgo on (CGO_ENABLED=1, with $CC or go's default C
# compiler): runtime/cgo linked, its threads started by pthread_create, and the runtime's extra M
# for C callbacks, with no thread of its own (the test of a cgo binary's counts builds it so).
# Exit 3 when there is no Go toolchain, 77 with --cgo when there is no C compiler, so that tests
# can skip saying so.
set -euo pipefail

cgo=0
if [ "${1:-}" = "--cgo" ]; then
  cgo=1
  shift
fi
if [ $# -ne 1 ]; then
  echo "usage: $0 [--cgo] OUT" >&2
  exit 2
fi
if ! command -v go >/dev/null; then
  echo "build-goroutines.sh: no Go toolchain (go is not on PATH)" >&2
  exit 3
fi
out=$(realpath -m "$1")
cd "$(dirname "$0")/../goroutines-go"
if [ "$cgo" -eq 0 ]; then
  CGO_ENABLED=0 exec go build -trimpath -o "$out" .
fi
# go env CC: $CC if set, else the compiler go would use (gcc on most hosts; its first word, as
# CC may carry flags).
cc=$(go env CC)
if ! command -v "${cc%% *}" >/dev/null; then
  echo "build-goroutines.sh: --cgo needs a C compiler (${cc%% *} is not on PATH; set CC)" >&2
  exit 77
fi
CGO_ENABLED=1 exec go build -trimpath -o "$out" .
