#!/usr/bin/env bash
# kernel-suite.sh OUT: the suite test-kernels.sh runs inside each virtual machine, as root, on the
# host's userspace (this checkout, its built binaries). Memory and counts only, at sizes QEMU's
# emulation (TCG) carries in minutes: times measured here mean nothing.
#
# Writes OUT/results.tsv, one line a check: NAME <tab> pass|fail|info <tab> what it found; each
# check's output in OUT/<name>.log and the runs' directories in OUT/runs/. A check that fails does
# not stop the others. SPAWNSCOPE_KERNEL_SUITE: full [default] or ci (what CI runs: the memory
# modes at their smaller sizes and the leash; see the end). SPAWNSCOPE_KERNEL_CHECKS
# (space-separated names) runs only those. SPAWNSCOPE_KERNEL_RESUME=1 keeps OUT/results.tsv and
# runs only the checks it does not hold yet (test-kernels.sh, after the VM's kernel panicked).
# OUT/suite-done is written at the end: without it, the suite did not finish.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUT" >&2
  exit 2
fi
out=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
spawnscope="$repo/target/release/spawnscope"
mkdir -p "$out/runs"
results="$out/results.tsv"
suite=${SPAWNSCOPE_KERNEL_SUITE:-full}
case $suite in
  full | ci) ;;
  *) echo "$0: SPAWNSCOPE_KERNEL_SUITE must be full or ci, not '$suite'" >&2; exit 2 ;;
esac
resume=${SPAWNSCOPE_KERNEL_RESUME:-}
[ -n "$resume" ] || : >"$results"
rm -f "$out/suite-done"

record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"; }

# The last run run_check made (its directory), for the checks that read it further.
last_run=

wanted() {
  if [ -n "$resume" ] && cut -f1 "$results" | grep -qxF -- "$1"; then
    return 1
  fi
  [ -z "${SPAWNSCOPE_KERNEL_CHECKS:-}" ] || [[ " $SPAWNSCOPE_KERNEL_CHECKS " == *" $1 "* ]]
}

# kb FILE KEY: KEY's value in a "Key: value kB" file.
kb() { awk -v k="$2:" '$1 == k { print $2; exit }' "$1"; }

# The machine at rest, before anything ran: MemTotal against the zones' managed pages and MemFree
# against vmstat's free pages (the host differs in both while deferred page init is under way).
at_rest() {
  local managed free_pages total free
  managed=$(awk '$1 == "managed" { s += $2 } END { print s * 4 }' /proc/zoneinfo)
  free_pages=$(awk '$1 == "nr_free_pages" { print $2 * 4 }' /proc/vmstat)
  total=$(kb /proc/meminfo MemTotal)
  free=$(kb /proc/meminfo MemFree)
  {
    echo "MemTotal $total kB; zoneinfo managed × 4 KiB $managed kB; difference $((total - managed)) kB"
    echo "MemFree $free kB; vmstat nr_free_pages × 4 KiB $free_pages kB; difference $((free - free_pages)) kB"
    grep -E '^(MemTotal|MemFree|MemAvailable)' /proc/meminfo
    grep -E '^(Node|  pages free|        managed|        present|        spanned)' /proc/zoneinfo
  } >"$out/at-rest.txt"
  record memtotal-vs-managed info "MemTotal $total kB, managed $managed kB, $((total - managed)) kB apart"
  record memfree-vs-nr_free_pages info "MemFree $free kB, nr_free_pages $free_pages kB, $((free - free_pages)) kB apart"
}

# The kernel's own settings that move the figures.
about() {
  local thp cgroup
  thp=$(sed -n 's/.*\[\(.*\)\].*/\1/p' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
  cgroup=$([ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && echo v2 || echo v1)
  {
    echo "kernel $(uname -r)"
    echo "cgroup $cgroup"
    echo "thp ${thp:-none}"
    echo "cpu $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
  } >"$out/machine.txt"
}

check_check() {
  if "$spawnscope" check >"$out/check.log" 2>&1; then
    record check pass "$(grep -c 'WARN' "$out/check.log") warnings"
  else
    record check fail "exit $? (see check.log)"
  fi
}

# run_check NAME ARGS...: `spawnscope run ARGS --out OUT/runs`; passes when it completed, its
# memory adds up (±5 % of the MemAvailable drop), the probes' cross-checks passed and every sysctl
# was restored. Churn's tasks never coexist: the few alive hold too little for a memory figure,
# which the summary says is not resolved; churn is judged without it (and on it where resolved).
# Any other check's sizes resolve their memory: not resolved there fails.
run_check() {
  local name=$1 rc dir summary
  shift
  wanted "$name" || return 0
  local before
  before=$(find "$out/runs" -mindepth 1 -maxdepth 1 -type d | sort)
  "$spawnscope" run --out "$out/runs" "$@" >"$out/$name.log" 2>&1
  rc=$?
  dir=$(comm -13 <(echo "$before") <(find "$out/runs" -mindepth 1 -maxdepth 1 -type d | sort) | tail -1)
  summary="$dir/summary.json"
  if [ -z "$dir" ] || [ ! -f "$summary" ]; then
    record "$name" fail "exit $rc, no summary.json (see $name.log)"
    return 0
  fi
  local verdict detail
  detail=$(jq -r '(.memory_per_task // null) as $m
      | (if $m == null then "no memory per task (\(.alive_at_peak // 0) alive at the peak)"
         elif $m.resolved == false then "memory per task \($m.resolution_note)"
           + " (recorded: \(if $m.difference_percent == null then "n/a" else ($m.difference_percent * 10 | round / 10 | tostring) + " %" end))"
         else "\(if $m.difference_percent == null then "n/a" else ($m.difference_percent * 10 | round / 10 | tostring) + " %" end)"
           + " (rss \($m.rss_kb * 100 | round / 100), stack \($m.kernel_stack_kb * 100 | round / 100),"
           + " pt \($m.page_tables_kb * 100 | round / 100), slab \($m.slab_kb * 100 | round / 100),"
           + " drop \($m.mem_available_drop_kb * 100 | round / 100) KiB"
           + (if $m.huge_pages_kb then ", THP \($m.huge_pages_kb * 100 | round / 100)" else "" end) + ")" end)
        + "; cross-checks: \(if .probes == null then "no probes" elif .probes.cross_checks_pass then "pass" else "FAIL: " + ([.probes.cross_checks[] | select(.verdict != "pass") | .name] | join(", ")) end)"
        + "; sysctls restored: \(.sysctls_restored)"' "$summary" 2>/dev/null)
  verdict=$(jq -r --arg churn "$([[ " $* " == *" churn "* ]] && echo yes)" '
      (.memory_per_task // {}) as $m
      | (if $churn == "yes" and ($m.resolved == false or $m == {}) then .ok
         elif $m.resolved == false then false
         else ($m.adds_up // false) end) as $memory
      | if $memory and .sysctls_restored and (.probes.cross_checks_pass != false) then "pass" else "fail" end' \
    "$summary" 2>/dev/null)
  [ "$rc" -eq 0 ] || { verdict=fail; detail="exit $rc; $detail"; }
  record "$name" "${verdict:-fail}" "${detail:-summary.json unreadable}"
  last_run=$dir
}

# missing_check NAME: in the run last_run names, every probe the kernel could not load is said
# so (named in left_out), and the figures that need it read "not available here", never 0.
missing_check() {
  local name=$1 summary="${last_run:-}/summary.json" md="${last_run:-}/summary.md" missing said=0 wrong=()
  wanted "$name" || return 0
  if [ -z "${last_run:-}" ] || [ ! -f "$summary" ]; then
    record "$name" fail "no run to read"
    return 0
  fi
  mapfile -t missing < <(jq -r '.probes.not_loaded[]? | split(": ")[0]' "$summary")
  for tp in "${missing[@]}"; do
    if jq -e --arg tp "$tp" '[.left_out[] | select(startswith("probe " + $tp + " not loaded"))] | length > 0' "$summary" >/dev/null; then
      said=$((said + 1))
    else
      wrong+=("$tp not named in left_out")
    fi
  done
  # The figures fed by the probes 6.1 lacks: their lines must not print a count.
  if printf '%s\n' "${missing[@]}" | grep -q '^ipi:ipi_send_cpu'; then
    grep -q 'IPIs sent: not available here' "$md" || wrong+=("IPIs sent is not 'not available here'")
  fi
  if printf '%s\n' "${missing[@]}" | grep -q '^syscalls:sys_enter_futex_wake'; then
    grep -q 'waiters walked per wake: not available here' "$md" || wrong+=("futex waiters walked is not 'not available here'")
  fi
  if [ ${#wrong[@]} -eq 0 ]; then
    record "$name" pass "${#missing[@]} probes missing on this kernel, each named; their figures read 'not available here'"
  else
    record "$name" fail "$(IFS=';'; echo "${wrong[*]}")"
  fi
}

# command_check NAME N: the tests' own Go program (spawnscope/tests/programs/sleepers, built on the
# host by test-kernels.sh) run as a command, N goroutines as its tasks: adds up as run_check says.
command_check() {
  local name=$1 n=$2 program="$repo/target/kernel-suite/sleepers"
  wanted "$name" || return 0
  [ -x "$program" ] || { record "$name" fail "$program was not built (test-kernels.sh builds it)"; return 0; }
  run_check "$name" --tasks "$n" --task-kind task --peak-when "^all [0-9]+ sleeping\$" -- "$program" "$n" 4s
}

# tree_check NAME: a command that forks is measured whole — a shell wrapping the tests' C program
# (spawnscope/tests/programs/forked-threads, built on the host by test-kernels.sh), whose child
# makes 2,000 threads: passes as run_check says (memory adds up, every cross-check passes: the
# probes counted the child's threads, faults and switches as the run's, selected by the run's v2
# cgroup there).
tree_check() {
  local name=$1 program="$repo/target/kernel-suite/forked-threads"
  wanted "$name" || return 0
  [ -x "$program" ] || { record "$name" fail "$program was not built (test-kernels.sh builds it)"; return 0; }
  run_check "$name" --tasks 2000 --task-kind thread -- sh -c "$program 1 2000 4 3000; true"
}

# perf_check NAME: a --perf run is sampled and its time attributed: summary.json's attribution has
# kernel samples and at least half of them fall in a named category.
perf_check() {
  local name=$1
  wanted "$name" || return 0
  command -v perf >/dev/null 2>&1 || { record "$name" fail "perf is not installed"; return 0; }
  run_check "$name" --runtime goroutines --workload hold --n 20000 --perf
  local summary="$last_run/summary.json" found
  found=$(jq -r '.attribution // empty | "\(.samples) samples, \(.kernel_samples) in the kernel, \(.named_kernel_share * 100 | round) % of those named; first rows: \([.rows[].category] | .[0:3] | join(", "))"' "$summary" 2>/dev/null)
  if jq -e '.attribution.kernel_samples > 0 and .attribution.named_kernel_share >= 0.5' "$summary" >/dev/null 2>&1; then
    record "$name-attributed" pass "$found"
  else
    record "$name-attributed" fail "${found:-no attribution in summary.json} (see $name.log)"
  fi
}

# perfetto_check NAME: a `--perfetto` run (threads hold 2,000) passes as run_check says, and its
# trace was kept whole on this kernel: collector.json's trace section complete, no record lost,
# trace-events.bin holding its records (64 bytes each); what this kernel's probes leave out of it
# is said in the detail.
perfetto_check() {
  local name=$1 collector found
  wanted "$name" || return 0
  run_check "$name" --runtime threads --workload hold --n 2000 --perfetto
  collector="$last_run/collector.json"
  found=$(jq -r '.trace // empty | "\(.records) records, \(.lost) lost, \(.switches_unseen) switches unseen, ring \(.ring_bytes / 1048576) MiB; gaps: \([.gaps[] | "\(.hook) \(.records)"] | join(", ") | if . == "" then "none" else . end)"' \
    "$collector" 2>/dev/null)
  local bytes
  bytes=$(stat -c %s "$last_run/trace-events.bin" 2>/dev/null || echo 0)
  if jq -e --argjson bytes "$bytes" '.trace.complete and .trace.lost == 0 and .trace.records > 0 and .trace.records * 64 == $bytes' \
    "$collector" >/dev/null 2>&1; then
    record "$name-kept" pass "$found"
  else
    record "$name-kept" fail "${found:-no trace in collector.json} ($bytes bytes in trace-events.bin; see $name.log)"
  fi
}

# bpftrace_check NAME: the bpftrace tools' own tests (scripts/test-bpftrace-tools.sh) on this kernel.
bpftrace_check() {
  local name=$1 rc last
  wanted "$name" || return 0
  SPAWNSCOPE_PREBUILT=1 "$repo/scripts/test-bpftrace-tools.sh" >"$out/$name.log" 2>&1
  rc=$?
  last=$(tail -1 "$out/$name.log")
  if [ "$rc" -eq 0 ] && [[ "$last" == *" 0 failed"* ]]; then
    record "$name" pass "$last"
  elif [ "$rc" -eq 77 ] && [[ "$last" == SKIP:* ]]; then
    record "$name" fail "skipped on this kernel: $last"
  else
    record "$name" fail "exit $rc: $last"
  fi
}

# cpu_count_check NAME: `run --cpu-count 1` (goroutines hold 20,000) passes as run_check says and
# was held to its one CPU through the run's cgroup cpuset (v2 in the VM; the affinity fallback
# fails here: the check is of the cpuset): run.json's CPUs read back from the workload are the one
# chosen, the summary says held, the Go runtime took GOMAXPROCS 1, the sentinels read that CPU
# alone, and no cpuset of the run is left behind.
cpu_count_check() {
  local name=$1 dir found verdict=pass
  wanted "$name" || return 0
  run_check "$name" --runtime goroutines --workload hold --n 20000 --cpu-count 1
  dir=$last_run
  if [ -z "$dir" ] || [ ! -f "$dir/run.json" ]; then
    record "$name-held" fail "no run to read (see $name.log)"
    return 0
  fi
  found=$(jq -r '.cpu_count // {} | "K \(.count // "?") on CPU \(.cpus // "?") by \(.how // "?"), read back \(.seen // "nothing")"' "$dir/run.json")
  local gomaxprocs sentinels held left
  gomaxprocs=$(jq -r 'select(.event == "result") | .runtime_stats.gomaxprocs' "$dir/workload.jsonl" 2>/dev/null | tail -1)
  sentinels=$(jq -r '.cpus // "all"' "$dir/sentinels.json" 2>/dev/null)
  held=$(jq -r '.cpu_count.held // false' "$dir/summary.json" 2>/dev/null)
  left=$(find /sys/fs/cgroup/spawnscope /sys/fs/cgroup/cpuset/spawnscope -mindepth 1 -maxdepth 1 -name 'run-*' 2>/dev/null | wc -l)
  jq -e '.cpu_count | .count == 1 and (.how | startswith("cpuset v")) and .seen == .cpus' "$dir/run.json" >/dev/null 2>&1 \
    && [ "$held" = true ] && [ "$gomaxprocs" = 1 ] \
    && [ "$sentinels" = "$(jq -r '.cpu_count.cpus' "$dir/run.json")" ] && [ "$left" -eq 0 ] || verdict=fail
  record "$name-held" "$verdict" "$found; summary held: $held; GOMAXPROCS ${gomaxprocs:-?}; sentinels over CPU $sentinels; $left run cgroups left"
}

# leash_check NAME KIND MARKER ARGS...: `spawnscope run --no-probes ARGS` on a command the leash
# must end: passes when it exits 4 (stopped), run.json's stopped_by is KIND, no process whose
# command line holds MARKER is left running and no run cgroup is left behind.
leash_check() {
  local name=$1 kind=$2 marker=$3 rc dir stopped left cgroups verdict=pass
  shift 3
  wanted "$name" || return 0
  local before
  before=$(find "$out/runs" -mindepth 1 -maxdepth 1 -type d | sort)
  "$spawnscope" run --no-probes --out "$out/runs" "$@" >"$out/$name.log" 2>&1
  rc=$?
  dir=$(comm -13 <(echo "$before") <(find "$out/runs" -mindepth 1 -maxdepth 1 -type d | sort) | tail -1)
  stopped=$(jq -r '.stopped_by // {kind: "nothing"} | "\(.kind)\(if .limit then " at \(.limit) tasks, \(.refused) forks refused" else "" end)"' \
    "$dir/run.json" 2>/dev/null)
  left=$(pgrep -fc -- "$marker")
  cgroups=$(find /sys/fs/cgroup/spawnscope /sys/fs/cgroup/pids/spawnscope /sys/fs/cgroup/memory/spawnscope \
    -mindepth 1 -maxdepth 1 -name 'run-*' 2>/dev/null | wc -l)
  [ "$rc" -eq 4 ] && [[ "$stopped" == "$kind"* ]] && [ "$left" -eq 0 ] && [ "$cgroups" -eq 0 ] || verdict=fail
  record "$name" "$verdict" "exit $rc (4: stopped); stopped by ${stopped:-? (no run.json)}; $left of its processes left running, $cgroups run cgroups left"
}

about
wanted at-rest && at_rest
wanted check && check_check
run_check threads-hold-2000 --runtime threads --workload hold --n 2000
missing_check missing-probes-said
perfetto_check threads-hold-2000-perfetto
[ "$suite" = full ] && run_check threads-hold-10000 --runtime threads --workload hold --n 10000
# Sleep checks sleep 10 s (Hansen's experiment): under emulation 2,000 threads take ~15 s to start,
# and with the workload's 1 s only 58 were alive at once (3.7 MiB: not resolved, −8.3 %).
run_check threads-sleep-2000 --runtime threads --workload sleep --n 2000 --sleep 10s
if [ "$suite" = full ]; then
  run_check threads-sleep-10000 --runtime threads --workload sleep --n 10000 --sleep 10s
  run_check threads-churn-2000 --runtime threads --workload churn --n 2000
  run_check threads-churn-10000 --runtime threads --workload churn --n 10000
fi
run_check goroutines-hold-100000 --runtime goroutines --workload hold --n 100000
run_check tokio-hold-100000 --runtime tokio --workload hold --n 100000
tree_check command-shell-wrapped-2000
# One run held to one CPU by its cgroup's cpuset (issue 41): in both suites.
cpu_count_check goroutines-hold-20000-cpu-count-1
if [ "$suite" = full ]; then
  run_check goroutines-sleep-100000 --runtime goroutines --workload sleep --n 100000 --sleep 10s
  run_check tokio-sleep-100000 --runtime tokio --workload sleep --n 100000 --sleep 10s
  command_check command-go-sleepers-100000 100000
  perf_check perf-goroutines-20000
  bpftrace_check bpftrace-tools
fi
# The leash, on commands nobody here wrote: the classic fork bomb held at its pids.max (--tasks 100
# threads: 164) and killed there, and a command that never exits (nor does what it started in
# the background) ended by --timeout. The marker names their processes for the count after.
leash_check leash-fork-bomb pids_max spawnscope-leash-bomb --tasks 100 --timeout 2m \
  -- bash -c 'bomb() { bomb | bomb & }; bomb' spawnscope-leash-bomb
leash_check leash-timeout timeout 'sleep 987654' --timeout 3s -- sh -c 'sleep 987654 & sleep 987654'
echo "suite done: $(wc -l <"$results") checks" >&2
touch "$out/suite-done"
