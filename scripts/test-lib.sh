#!/usr/bin/env bash
# Tests the shell helpers the scripts share: the statistics in scripts/lib/stats.sh (median, min,
# max, ratio, is_outlier), the argument rules in scripts/lib/common.sh (is_count, bench_args), the
# main job's traced round (traced_round), which of its runs' exit codes it goes on past and ends
# with (run_ended, worse_exit) and its choice of OS packages on Debian and Ubuntu
# (has_candidate, pick_package).
# Needs bash and awk only; no root, nothing built.
# Usage: ./scripts/test-lib.sh
# Last line: `test-lib: N passed, M failed`; exit status 1 when any case failed.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"

stderr_file=$(mktemp)
trap 'rm -f "$stderr_file"' EXIT

passed=0
failed=0
pass() {
  passed=$((passed + 1))
  echo "ok:   $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
}

# expect EXPECTED CMD...: CMD succeeds and prints exactly EXPECTED.
expect() {
  local expected=$1 out status=0
  shift
  out=$("$@" 2>&1) || status=$?
  if [ "$status" -eq 0 ] && [ "$out" = "$expected" ]; then
    pass "$* = $expected"
  else
    fail "$*: expected '$expected', got '$out' (exit $status)"
  fi
}

# refuses STATUS PATTERN CMD...: CMD exits STATUS, prints nothing on stdout and a line matching
# PATTERN (grep -E) on stderr.
refuses() {
  local want=$1 pattern=$2 out err status=0
  shift 2
  out=$("$@" 2>"$stderr_file") || status=$?
  err=$(cat "$stderr_file")
  if [ "$status" -eq "$want" ] && [ -z "$out" ] && grep -Eq -- "$pattern" <<<"$err"; then
    pass "$* refused: $err"
  else
    fail "$*: expected exit $want, nothing on stdout and /$pattern/ on stderr; got exit $status, stdout '$out', stderr '$err'"
  fi
}

# The main job's traced round: in the middle of REPEATS + 1 rounds, neither first nor last.
expect 2 traced_round 1
expect 2 traced_round 2
expect 3 traced_round 3
expect 3 traced_round 4
expect 4 traced_round 5
expect 6 traced_round 10

# A set of runs goes on past a run that exited 4 or 5 (saying so) and ends with the stronger: 4,
# then 5; any other failure stops it with its code.
expect 0 worse_exit 0 0
expect 5 worse_exit 0 5
expect 5 worse_exit 5 0
expect 4 worse_exit 5 4
expect 4 worse_exit 4 5
expect 4 worse_exit 4 0
went_on() {
  local status=0
  run_ended "$@" 2>"$stderr_file" || status=$?
  echo "$status $(grep -c 'going on' "$stderr_file" || true)"
}
expect '0 0' went_on 0 'a run'
expect '0 1' went_on 4 'a run'
expect '0 1' went_on 5 'a run'
expect '1 0' went_on 1 'a run'
expect '3 0' went_on 3 'a run'
expect '130 0' went_on 130 'a run'
run_ended 5 'round 2: threads hold 100000' 2>"$stderr_file" || true
if grep -q "round 2: threads hold 100000 completed but its counts are WRONG (exit 5" "$stderr_file"; then
  pass "run_ended names the run and says its counts are wrong"
else
  fail "run_ended 5: $(cat "$stderr_file")"
fi

# write_plan: the plan a committed set's machine line names its command from.
plan_file=$(mktemp)
write_plan "$plan_file" 3 1 ./scripts/trace.sh -- "goroutines hold 1000000" "threads hold 100000"
expect '["./scripts/trace.sh"] 3 1 goroutines:hold:1000000 threads:hold:100000' \
  jq -r '"\(.argv | tojson) \(.repeats) \(.traced_runs) \([.cells[] | "\(.runtime):\(.workload):\(.n)"] | join(" "))"' "$plan_file"
write_plan "$plan_file" 10 - ./scripts/bench-repeatability.sh 10 -- "threads hold 2000"
expect '["./scripts/bench-repeatability.sh","10"] 10 false 2000' \
  jq -r '"\(.argv | tojson) \(.repeats) \(has("traced_runs")) \(.cells[0].requested_n)"' "$plan_file"
rm -f "$plan_file"

# The median: the middle value in ascending order; for an even count the mean of the two middle.
expect 2 median 1 2 3
expect 2 median 3 1 2
expect 2.5 median 1 2 3 4
expect 2.5 median 4 1 3 2
expect 25 median 100 20 30 10
expect 7 median 7
expect 0.375 median 0.5 .25
expect 1.0235 median 1.0234 1.0236 1.0301 0.9987
expect -1.75 median -1.5 -2
expect 12.5 median 1e3 5 20 -4
expect 2345678.5 median 2345679 2345678
# Numeric, not textual, order: 10 sorts after 9.
expect 9 median 10 9 8
expect 9.5 median 9 10
# A given number comes back as it was given.
expect 1.500 median 2.000 1.500 1.000

# stats: "median min max".
expect '2 1 3' stats 3 1 2
expect '2.5 1 4' stats 4 2 1 3
expect '0.2 0.1 0.3' stats 0.3 0.1 0.2
expect '5 5 5' stats 5
expect '-1 -3 4' stats 4 -3 -1
expect '1.05 0.98 1.31' stats 1.31 0.98 1.02 1.08
expect '3 1 5' stats 5 3 1 3 2 4 3

# ratio T U.
expect 1.5 ratio 3 2
expect 1.0235 ratio 10235 10000
expect 0.333333333333333 ratio 1 3

# is_outlier VALUE MEDIAN FACTOR: status 0 when VALUE / MEDIAN > FACTOR or < 1 / FACTOR, 1 when
# not; the bounds themselves are not outliers; a bad argument is status 2.
# outlier VALUE MEDIAN FACTOR: "outlier" or "kept", or the failing status.
outlier() {
  local status=0
  is_outlier "$@" || status=$?
  case $status in
    0) echo outlier ;;
    1) echo kept ;;
    *) return "$status" ;;
  esac
}
expect kept outlier 1 1 1.25
expect kept outlier 1.25 1 1.25
expect kept outlier 0.8 1 1.25
expect outlier outlier 1.2501 1 1.25
expect outlier outlier 0.7999 1 1.25
expect kept outlier 11.2 9 1.25
expect outlier outlier 11.3 9 1.25
expect kept outlier 7.2 9 1.25
expect outlier outlier 7.1 9 1.25
expect outlier outlier 15.6 9.1 1.25
expect outlier outlier 5.1 2.5 1.25
expect outlier outlier 0 2.5 1.25
expect kept outlier 2.5e0 2500e-3 1.25
expect kept outlier 5 5 1
expect outlier outlier 5.001 5 1
refuses 2 'give VALUE MEDIAN FACTOR' is_outlier 1 1
refuses 2 "is_outlier: not a number: 'x'" is_outlier x 1 1.25
refuses 2 'MEDIAN 0 is not above 0' is_outlier 1 0 1.25
refuses 2 'MEDIAN -1 is not above 0' is_outlier 1 -1 1.25
refuses 2 'FACTOR 0.8 is below 1' is_outlier 1 1 0.8

# What is not a number, or no number, is an error and never a figure.
refuses 1 'no numbers' median
refuses 1 'no numbers' stats
refuses 1 "not a number: 'x'" median 1 x 3
refuses 1 "not a number: ''" stats 1 '' 3
refuses 1 "not a number: '1,5'" median 1,5
refuses 1 "not a number: 'nan'" stats nan
refuses 1 'division by zero' ratio 1 0
refuses 1 'division by zero' ratio 1 0.0
refuses 1 'give T and U' ratio 1

# is_count: a whole number from 1 to 999999999.
for value in 1 9 100000 999999999; do
  if is_count "$value"; then pass "is_count $value"; else fail "is_count $value: refused"; fi
done
for value in 0 01 -1 +1 1.0 1e3 1000000000 '' ' 1' x; do
  if is_count "$value"; then fail "is_count '$value': accepted"; else pass "is_count '$value' refused"; fi
done

# bench_args: the bench scripts' [THREADS_N [GOROUTINES_N [REPEATS]]].
args() { (bench_args "$@" && echo "$threads_n $goroutines_n $repeats"); }
expect '100 2000 5' args 100 2000 5
expect '7 2000 5' args 100 2000 5 7
expect '7 8 9' args 100 2000 5 7 8 9
refuses 2 "test-lib.sh: '0' is not a positive whole number; usage: test-lib.sh \[THREADS_N" args 100 2000 5 0
refuses 2 "'x' is not a positive whole number" args 100 2000 5 7 x
refuses 2 "'-3' is not a positive whole number" args 100 2000 5 7 8 -3
refuses 2 'at most 3 arguments; usage: .*\(defaults 100 2000 5\)' args 100 2000 5 1 2 3 4

# has_candidate / pick_package on recorded `apt-cache policy` answers: Debian 12 knows linux-perf,
# Ubuntu 24.04 does not (and knows linux-tools-<kernel> instead); a package in no repository has
# Candidate: (none).
debian_linux_perf='linux-perf:
  Installed: (none)
  Candidate: 6.1.192-2
  Version table:
     6.1.192-2 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages'
ubuntu_linux_perf=''
ubuntu_linux_tools='linux-tools-6.8.0-45-generic:
  Installed: (none)
  Candidate: 6.8.0-45.45
  Version table:
     6.8.0-45.45 500
        500 http://archive.ubuntu.com/ubuntu noble-updates/main amd64 Packages'
no_candidate='linux-tools-6.18.44-fc-v669:
  Installed: (none)
  Candidate: (none)
  Version table:'
if has_candidate <<<"$debian_linux_perf"; then pass "has_candidate: Debian's linux-perf"; else fail "has_candidate: Debian's linux-perf refused"; fi
if has_candidate <<<"$ubuntu_linux_tools"; then pass "has_candidate: Ubuntu's linux-tools"; else fail "has_candidate: Ubuntu's linux-tools refused"; fi
if has_candidate <<<"$ubuntu_linux_perf"; then fail "has_candidate: no answer accepted"; else pass "has_candidate: no answer (Ubuntu, linux-perf)"; fi
if has_candidate <<<"$no_candidate"; then fail "has_candidate: Candidate (none) accepted"; else pass "has_candidate: Candidate (none)"; fi
# pick_package with apt-cache and dpkg answering as on each distribution (INSTALLED: the one
# package dpkg says is installed).
# shellcheck disable=SC2317  # the stand-ins are called through pick_package
on_distro() {
  local distro=$1
  shift
  (
    is_installed() { [ "$1" = "${INSTALLED:-}" ]; }
    apt-cache() {
      case "$distro:$2" in
        debian:linux-perf) echo "$debian_linux_perf" ;;
        ubuntu:linux-tools-*) echo "$ubuntu_linux_tools" ;;
        *) echo "$no_candidate" ;;
      esac
    }
    "$@"
  )
}
expect linux-perf on_distro debian pick_package 'linux-perf|linux-tools-6.8.0-45-generic'
expect linux-tools-6.8.0-45-generic on_distro ubuntu pick_package 'linux-perf|linux-tools-6.8.0-45-generic'
expect '' on_distro other pick_package 'linux-perf|linux-tools-6.8.0-45-generic'
INSTALLED=linux-tools-6.8.0-45-generic expect linux-tools-6.8.0-45-generic on_distro debian pick_package 'linux-perf|linux-tools-6.8.0-45-generic'

# test-kernels.sh refuses bad arguments before it installs, downloads or boots anything.
kernels="$(dirname "$0")/test-kernels.sh"
refuses 2 "test-kernels.sh: the suite is full or ci, not 'big'; usage: test-kernels.sh \[--suite full\|ci\]" "$kernels" --suite big
refuses 2 '--suite needs a value \(full or ci\)' "$kernels" --suite
refuses 2 "unknown option '--fast'" "$kernels" --fast 6.12
refuses 2 "'6.x' is neither a kernel series" "$kernels" --suite=ci 6.x
refuses 2 "the suite is full or ci, not 'tiny'" env SPAWNSCOPE_KERNEL_SUITE=tiny "$kernels" 6.12
refuses 2 "SPAWNSCOPE_VM_MEMORY must be like 6G" env SPAWNSCOPE_VM_MEMORY=lots "$kernels" --suite ci 6.12

echo "test-lib: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
