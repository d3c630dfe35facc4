#!/usr/bin/env bash
# Tests the bpftrace tools in probes/*.bt against live workloads: each tool traces a real run of
# `threads` or `goroutines` from its first instruction and must print aggregates that agree with
# what the workload itself reports (spawned, failure errno, getrusage faults and switches).
# Every case runs in both forms the tools take: given the workload's PID (`bpftrace TOOL PID`,
# checks marked [pid]) and starting it themselves (`bpftrace -c 'CMD ARGS' TOOL`, marked [-c]);
# in both, the PID the tool reports must be the workload's own.
#
# Usage: sudo ./scripts/test-bpftrace-tools.sh
# Needs root and a kernel with tracepoints; installs bpftrace with apt-get when it is missing and
# mounts tracefs on /sys/kernel/tracing when it is not (and leaves it mounted). Without root, or
# when bpftrace cannot load a program here, it prints `SKIP: <reason>` and exits 77 (test.sh
# counts it as skipped, never as passed).
# Last line: `test-bpftrace-tools: N passed, M failed`; exit status 1 when any check failed.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
cd "$REPO_ROOT"

skip() {
  echo "SKIP: $*"
  exit 77
}

is_root || skip "not root: bpftrace needs root"
if ! command -v bpftrace >/dev/null 2>&1; then
  need_packages bpftrace >/dev/null 2>&1 || skip "bpftrace is missing and could not be installed"
fi
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || skip "tracefs is not mounted and cannot be"
fi
# bpftrace 0.17 always complains that it cannot raise RLIMIT_MEMLOCK where the kernel accounts BPF
# memory to the cgroup instead; that line is noise, any other error is a reason to skip.
# bpftrace compiles each program with LLVM first: seconds here, minutes under QEMU's emulation on
# a busy host, so its waits are generous (BPFTRACE_WAIT). Not starting in time fails; it is no
# reason to skip.
wait_s=${BPFTRACE_WAIT:-300}
probe_rc=0
probe_output=$(timeout "$wait_s" bpftrace -e 'tracepoint:sched:sched_switch { exit(); }' 2>&1) || probe_rc=$?
if [ "$probe_rc" -eq 124 ]; then
  echo "bpftrace did not attach one tracepoint within ${wait_s} s (BPFTRACE_WAIT)"
  echo "test-bpftrace-tools: 0 passed, 1 failed"
  exit 1
elif [ "$probe_rc" -ne 0 ]; then
  skip "bpftrace cannot attach to a tracepoint here: $(grep -v RLIMIT_MEMLOCK <<<"$probe_output" | head -1)"
fi

need_toolchains
build_workloads

work=$(mktemp -d)
# On any exit, stop what this script started and is still running (its own background jobs,
# never anything found by name), then remove its files.
cleanup() {
  stop_own_jobs
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
# check DESCRIPTION RESULT: RESULT is 1 (pass) or 0 (fail), usually "$((expression))".
check() {
  if [ "$2" = 1 ]; then
    passed=$((passed + 1))
    echo "ok:   $1"
  else
    failed=$((failed + 1))
    echo "FAIL: $1"
  fi
}

# switches.bt keeps one map entry per live thread of the target; 4096 is the default. The limit
# is BPFTRACE_MAP_KEYS_MAX up to bpftrace 0.19 and BPFTRACE_MAX_MAP_KEYS from 0.20.
export BPFTRACE_MAP_KEYS_MAX=65536 BPFTRACE_MAX_MAP_KEYS=65536

# trace NAME TOOL CMD...: runs CMD (a workload) traced by probes/TOOL from its first instruction.
# CMD waits behind a FIFO in a shell that then execs it, so its PID is known before it starts;
# the tool is given that PID, and the shell is released once the tool's BEGIN line is out (all
# probes attached). Leaves $work/NAME.bt (the tool's stdout) and $work/NAME.jsonl (the workload's),
# and in pre_faults, pre_nvcsw and pre_nivcsw the faults and switches the waiting shell had taken
# before release (getrusage counts them, the tool, attached later, cannot: on a VM whose root is
# 9p, the shell's start blocks on I/O dozens of times). The tool ends by itself when the workload
# exits.
trace() {
  local name=$1 tool=$2
  shift 2
  local gate="$work/$name.gate" out="$work/$name.bt" wpid bpid i stat
  mkfifo "$gate"
  # Our read-write descriptor (7) keeps the FIFO open from both ends until the workload is done:
  # the shell's open never waits, and "go" stays in the pipe however late the shell opens it.
  exec 7<>"$gate"
  bash -c 'read -r _ <"$0" && exec "$@"' "$gate" "$@" </dev/null >"$work/$name.jsonl" 2>"$work/$name.stderr" 7>&- &
  wpid=$!
  timeout $((wait_s + 120)) bpftrace "probes/$tool" "$wpid" >"$out" 2>"$work/$name.bterr" 7>&- &
  bpid=$!
  for ((i = 0; i < wait_s * 10; i++)); do
    grep -q '^Tracing' "$out" && break
    kill -0 "$bpid" 2>/dev/null || break
    sleep 0.1
  done
  if ! grep -q '^Tracing' "$out"; then
    exec 7>&-
    kill "$wpid" "$bpid" 2>/dev/null || true
    wait "$wpid" "$bpid" 2>/dev/null || true
    echo "$tool did not start:" >&2
    grep -v RLIMIT_MEMLOCK "$work/$name.bterr" >&2 || true
    return 1
  fi
  # Fields after "pid (comm) ": minflt is the 8th, majflt the 10th.
  stat=$(sed 's/^.*) //' "/proc/$wpid/stat")
  pre_faults=$(awk '{print $8 + $10}' <<<"$stat")
  read -r pre_nvcsw pre_nivcsw < <(awk '/^voluntary_ctxt_switches:/ { v = $2 }
    /^nonvoluntary_ctxt_switches:/ { n = $2 } END { print v, n }' "/proc/$wpid/status")
  echo go >&7
  wait "$wpid" || true # a workload stopped at a limit exits 3; its result says so
  exec 7>&-
  if ! wait "$bpid"; then
    echo "$tool failed or timed out:" >&2
    grep -v RLIMIT_MEMLOCK "$work/$name.bterr" >&2 || true
    cat "$out" >&2
    return 1
  fi
  echo "--- $tool, $name:"
  grep -v '^$' "$out" | sed 's/^/    /'
}

# trace_cmd NAME TOOL CMD...: the same run, in the tool's other form: `bpftrace -c 'CMD' TOOL`
# starts CMD itself once every probe is attached, and ends once CMD has exited. CMD inherits
# bpftrace's stdout, so the workload's JSON lines (they start with `{`) are split from the tool's
# output into $work/NAME.jsonl and $work/NAME.bt. pre_faults is 0: the faults bpftrace's child
# takes before it execs CMD (~35 here) are in getrusage, not in the tool's counts, and within the
# tolerance. bpftrace splits CMD on spaces, so no argument may contain one; and bpftrace 0.17
# refuses a bare command name found twice on PATH (/bin and /usr/bin are one directory on merged-
# /usr systems: "must refer to a unique binary"), so CMD's first word is made a full path here.
trace_cmd() {
  local name=$1 tool=$2 arg path
  shift 2
  local out="$work/$name.out"
  if ! path=$(command -v "$1") || [[ "$path" != /* ]]; then
    echo "$1: not an executable on PATH" >&2
    return 1
  fi
  set -- "$path" "${@:2}"
  for arg in "$@"; do
    if [[ "$arg" == *" "* ]]; then
      echo "cannot run '$arg' with bpftrace -c: it splits the command on spaces" >&2
      return 1
    fi
  done
  pre_faults=0 pre_nvcsw=0 pre_nivcsw=0
  if ! timeout $((wait_s + 120)) bpftrace -c "$*" "probes/$tool" </dev/null >"$out" 2>"$work/$name.bterr"; then
    echo "$tool -c failed or timed out:" >&2
    grep -v RLIMIT_MEMLOCK "$work/$name.bterr" >&2 || true
    cat "$out" >&2
    return 1
  fi
  grep '^{' "$out" >"$work/$name.jsonl" || true
  grep -v '^{' "$out" >"$work/$name.bt" || true
  echo "--- $tool -c, $name:"
  grep -v '^$' "$work/$name.bt" | sed 's/^/    /'
}

# traced FORM NAME TOOL CMD...: trace (FORM pid) or trace_cmd (FORM -c), then checks that the PID
# the tool reports (its last `PID N`: the report's heading) is the workload's own, from its start
# event. False when the tool did not run.
traced() {
  local form=$1 name=$2 tool=$3 reported wpid same
  shift 3
  if [ "$form" = pid ]; then
    trace "$name" "$tool" "$@" || return 1
  else
    trace_cmd "$name" "$tool" "$@" || return 1
  fi
  reported=$(grep -oE 'PID [0-9]+' "$work/$name.bt" | tail -1 | cut -d' ' -f2)
  wpid=$(jq -r 'select(.event == "start") | .pid' "$work/$name.jsonl")
  same=0
  [[ "$reported" =~ ^[0-9]+$ && "$reported" == "$wpid" ]] && same=1
  check "[$form] $tool reports the workload's PID (${reported:-none}; the workload's: ${wpid:-none})" "$same"
}

# value NAME KEY: the number printed for KEY (e.g. '@created[clone3]') in NAME's tool output, 0 if
# the tool printed nothing for it.
value() {
  awk -v key="$2" 'index($0, key ": ") == 1 { v = substr($0, length(key) + 3) } END { print v + 0 }' "$work/$1.bt"
}
# hist_total NAME MAP: the sum of the bucket counts of histogram MAP (e.g. '@runq_latency_us').
hist_total() {
  awk -v map="$2" '
    $0 == map ": " || $0 == map ":" { inside = 1; next }
    inside && /^\[/ { if (match($0, /[\])] +[0-9]+ /)) total += substr($0, RSTART + 1, RLENGTH - 1); next }
    inside { inside = 0 }
    END { print total + 0 }' "$work/$1.bt"
}
# result NAME JQ: a field of the workload's result event.
result() {
  workload_result "$work/$1.jsonl" "$2"
}
# within A B PCT ABS: 1 when |A - B| <= PCT% of B + ABS.
within() {
  echo $(($1 - $2 <= $2 * $3 / 100 + $4 && $2 - $1 <= $2 * $3 / 100 + $4))
}

threads_bin=$BIN_DIR/threads
goroutines_bin=$BIN_DIR/goroutines

say "taskcreate.bt"
for form in pid -c; do
  n=2000
  name=tc-threads-${form#-}
  if traced "$form" "$name" taskcreate.bt "$threads_bin" hold --n "$n" --hold-for 0s; then
    c3=$(value "$name" '@created[clone3]')
    spawned=$(result "$name" .spawned)
    check "[$form] threads hold $n: clone3 successes = the $spawned threads spawned (got $c3; counting the child's ret 0 would double it)" \
      "$((c3 == spawned && spawned == n))"
    check "[$form] threads hold $n: no clone (got $(value "$name" '@created[clone]'))" "$(($(value "$name" '@created[clone]') == 0))"
    nt=$(value "$name" '@newtask[thread (CLONE_THREAD)]')
    check "[$form] threads hold $n: task_newtask CLONE_THREAD = clone3 successes (got $nt)" "$((nt == c3))"
    check "[$form] threads hold $n: clone3 latency histogram holds every call" "$(($(hist_total "$name" '@latency_us[clone3]') == c3))"
    check "[$form] threads hold $n: at least $n task exits" "$(($(value "$name" '@exited[tasks]') >= n))"
  else
    check "[$form] taskcreate.bt ran on threads hold" 0
  fi

  n=100000
  name=tc-go-${form#-}
  if traced "$form" "$name" taskcreate.bt "$goroutines_bin" hold --n "$n" --hold-for 0s; then
    c=$(value "$name" '@created[clone]')
    check "[$form] goroutines hold $n: clone successes 1..99, far below N (got $c)" "$((c >= 1 && c < 100))"
    check "[$form] goroutines hold $n: no clone3 (got $(value "$name" '@created[clone3]'))" "$(($(value "$name" '@created[clone3]') == 0))"
    check "[$form] goroutines hold $n: task_newtask CLONE_THREAD = clone successes" \
      "$(($(value "$name" '@newtask[thread (CLONE_THREAD)]') == c))"
  else
    check "[$form] taskcreate.bt ran on goroutines hold" 0
  fi

  # A failure by errno: as user nobody with RLIMIT_NPROC 100 (root is exempt from that limit),
  # clone3 fails with EAGAIN and the workload stops spawning there. With -c the command bpftrace
  # starts is setpriv, which execs prlimit, which execs the workload: one process throughout.
  if setpriv --reuid=65534 --regid=65534 --clear-groups test -x "$threads_bin"; then
    name=tc-fail-${form#-}
    if traced "$form" "$name" taskcreate.bt setpriv --reuid=65534 --regid=65534 --clear-groups \
      prlimit --nproc=100 "$threads_bin" hold --n 300 --hold-for 0s; then
      spawned=$(result "$name" .spawned)
      check "[$form] threads hold under RLIMIT_NPROC: the workload's failure is EAGAIN (got $(result "$name" .failure.errno))" \
        "$(($(result "$name" '.failure.errno // 0') == 11))"
      check "[$form] threads hold under RLIMIT_NPROC: @failed[clone3, 11] >= 1 (got $(value "$name" '@failed[clone3, 11]'))" \
        "$(($(value "$name" '@failed[clone3, 11]') >= 1))"
      check "[$form] threads hold under RLIMIT_NPROC: clone3 successes = $spawned spawned" \
        "$(($(value "$name" '@created[clone3]') == spawned))"
    else
      check "[$form] taskcreate.bt ran on threads hold under RLIMIT_NPROC" 0
    fi
  else
    echo "skip: user nobody cannot run $threads_bin, so the EAGAIN case is not tested"
  fi
done

# faultbuckets: the tool's user+kernel mode faults against getrusage's minflt+majflt. They count
# nearly the same events; the tolerance (3 % + 100) covers what only one side sees: faults taken
# for the process by get_user_pages (execve copying arguments, futex fault-in: counted, no
# exception), retried faults (one count, two exceptions), faults after getrusage (exit), and with
# -c the faults of bpftrace's child before it execs the workload (~35). With a PID, the shell's
# faults before the tool attached (~200) are subtracted exactly (pre_faults).
say "faultbuckets.bt"
thp=$(grep -o '\[[a-z]*\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null | tr -d '[]' || true)
thp=${thp:-unknown}
for form in pid -c; do
  for spec in "threads $threads_bin 2000" "goroutines $goroutines_bin 100000"; do
    read -r rt bin n <<<"$spec"
    name=fb-$rt-${form#-}
    if traced "$form" "$name" faultbuckets.bt "$bin" hold --n "$n" --hold-for 0s; then
      user=$(value "$name" '@total[user mode]')
      total=$((user + $(value "$name" '@total[kernel mode]')))
      expected=$(($(result "$name" '.rusage.minflt + .rusage.majflt') - pre_faults))
      check "[$form] $rt hold $n: faults $total within 3 % + 100 of getrusage's $expected" "$(within "$total" "$expected" 3 100)"
      check "[$form] $rt hold $n: time buckets sum to the user-mode faults ($user)" "$(($(hist_total "$name" '@faults_ms') == user))"
      kinds=$(awk -F': ' '/^@user_faults\[/ { s += $NF } END { print s + 0 }' "$work/$name.bt")
      check "[$form] $rt hold $n: faults by kind sum to the user-mode faults" "$((kinds == user))"
      # Every task's stack is written: a thread's on its own pages, goroutines' 2 KiB two to a
      # page -- or, where THP is `always` (Debian's 6.1), 1,024 to a 2 MiB page of Go's heap,
      # one fault each.
      per_page=1
      if [ "$rt" = goroutines ]; then
        per_page=2
        [ "$thp" = always ] && per_page=1024
      fi
      check "[$form] $rt hold $n: write faults on new pages >= $n / $per_page (stacks; THP $thp)" \
        "$(($(value "$name" '@user_faults[write, page not present]') >= n / per_page))"
    else
      check "[$form] faultbuckets.bt ran on $rt hold" 0
    fi
  done
done

# switches: voluntary/involuntary against getrusage's nvcsw/nivcsw (the tool classifies the way
# __schedule() counts them). Pingpong need not block on every hop (std's channels and Go's
# scheduler spin before they park), so the floor on voluntary switches comes from sleep: a
# thread in nanosleep always blocks, once.
say "switches.bt"
for form in pid -c; do
  rounds=20000
  for spec in "threads $threads_bin" "goroutines $goroutines_bin"; do
    read -r rt bin <<<"$spec"
    name=sw-$rt-${form#-}
    if traced "$form" "$name" switches.bt "$bin" pingpong --n 1 --rounds "$rounds"; then
      vol=$(value "$name" '@switches[voluntary]')
      invol=$(value "$name" '@switches[involuntary]')
      nvcsw=$(($(result "$name" .rusage.nvcsw) - pre_nvcsw))
      nivcsw=$(($(result "$name" .rusage.nivcsw) - pre_nivcsw))
      check "[$form] $rt pingpong $rounds rounds: voluntary $vol within 2 % + 20 of getrusage's $nvcsw" "$(within "$vol" "$nvcsw" 2 20)"
      check "[$form] $rt pingpong $rounds rounds: involuntary $invol within 5 % + 20 of getrusage's $nivcsw" \
        "$(within "$invol" "$nivcsw" 5 20)"
      check "[$form] $rt pingpong: run-queue latency histogram present" "$(($(hist_total "$name" '@runq_latency_us') > 0))"
    else
      check "[$form] switches.bt ran on $rt pingpong" 0
    fi
  done
  n=2000
  name=sw-sleep-${form#-}
  if traced "$form" "$name" switches.bt "$threads_bin" sleep --n "$n" --sleep 10ms; then
    vol=$(value "$name" '@switches[voluntary]')
    check "[$form] threads sleep $n: voluntary $vol >= $n (each sleeping thread blocks once)" "$((vol >= n))"
  else
    check "[$form] switches.bt ran on threads sleep" 0
  fi
  n=5000 # above bpftrace's default 4096 map keys: the tool keeps one entry per live thread
  name=sw-hold-${form#-}
  if traced "$form" "$name" switches.bt "$threads_bin" hold --n "$n" --hold-for 0s; then
    exits=$(value "$name" '@switches[exit]')
    check "[$form] threads hold $n: one final switch per exiting task ($exits, expected $n + main)" "$((exits == n + 1))"
    runq=$(hist_total "$name" '@runq_latency_us')
    check "[$form] threads hold $n: run-queue latency for every new thread at least ($runq >= $n)" "$((runq >= n))"
    vol=$(value "$name" '@switches[voluntary]')
    invol=$(value "$name" '@switches[involuntary]')
    check "[$form] threads hold $n: switches seen (voluntary $vol + involuntary $invol > 0, voluntary > 0)" \
      "$((vol + invol > 0 && vol > 0))"
  else
    check "[$form] switches.bt ran on threads hold" 0
  fi
done

echo "test-bpftrace-tools: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
