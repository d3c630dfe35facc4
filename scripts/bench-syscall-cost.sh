#!/usr/bin/env bash
# The old name of scripts/bench-probe-cost.sh (the syscall pair is its first two rows): the same
# arguments, the same output. Usage: sudo [OUT=DIR] ./scripts/bench-syscall-cost.sh [ROUNDS [SECONDS]]
set -euo pipefail
exec "$(dirname "$0")/bench-probe-cost.sh" "$@"
