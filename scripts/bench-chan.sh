#!/usr/bin/env bash
# Benchmark: bench-of-chan (elsejj, 2022) on the three runtimes. `chain` is its experiment: N
# receivers each with a bounded queue, N senders each sending EVENTS events of a type; speed =
# N × EVENTS / the time after spawning (our `steady` phase). Run at the article's sizes (100,
# 1,000 and 5,000 workers, queue 256, int / str / str_ptr), median of REPEATS runs, written in
# the article's CSV shape (program,etype,worker,event,time,speed) to target/bench/chain.csv and
# shown beside its published speeds (Go and Rust tokio; i7-9750H, WSL; shared/anchors.md).
# `threads` (std::sync::mpsc, one OS thread per task) is the row the article never had.
#
# Usage: ./scripts/bench-chan.sh [EVENTS [REPEATS]]   (defaults 10000 3)
#        BENCH_CHAN_WORKERS="100 1000" to choose the worker counts. No root needed.
set -euo pipefail
# shellcheck source=scripts/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
# shellcheck source=scripts/lib/stats.sh
. "$(dirname "$0")/lib/stats.sh"
cd "$REPO_ROOT"

usage="usage: ${0##*/} [EVENTS [REPEATS]] (defaults 10000 3; BENCH_CHAN_WORKERS=\"100 1000 5000\")"
[ $# -le 2 ] || { echo "${0##*/}: at most 2 arguments; $usage" >&2; exit 2; }
events=${1:-10000} repeats=${2:-3}
read -r -a workers <<<"${BENCH_CHAN_WORKERS:-100 1000 5000}"
for value in "$events" "$repeats" "${workers[@]}"; do
  is_count "$value" || { echo "${0##*/}: '$value' is not a positive whole number; $usage" >&2; exit 2; }
done
queue=256
etypes=(int str str_ptr)

need_toolchains
need_command jq
build_workloads
mkdir -p target/bench
csv=target/bench/chain.csv

# The article's published speeds (messages/s), "worker etype" -> "golang rust".
declare -A published=(
  ["100 int"]="98969725 80789148" ["100 str"]="21989041 53630230" ["100 str_ptr"]="88775257 81436541"
  ["5000 str_ptr"]="104845454 76636797"
  ["50000 int"]="89376773 54760465" ["50000 str"]="28099233 40203692" ["50000 str_ptr"]="101819179 56850205"
)

# chain_run BIN WORKERS ETYPE: "time_s speed" of one run (the steady phase and the throughput).
chain_run() {
  local out
  out=$("$1" chain --n "$2" --events "$events" --queue "$queue" --type "$3" 2>/dev/null) ||
    die "$1 chain --n $2 --type $3 failed"
  jq -rs 'map(select(.event == "result"))[0]
          | "\((.phases[] | select(.name == "steady") | .dur_ns) / 1e9) \(.throughput.value | floor)"' <<<"$out"
}

echo "program,etype,worker,event,time,speed" >"$csv"
rows=()
for w in "${workers[@]}"; do
  for etype in "${etypes[@]}"; do
    declare -A speed=()
    for runtime in goroutines tokio threads; do
      binary=$runtime
      [ "$runtime" = tokio ] && binary=tokio-tasks
      times=() speeds=()
      for ((r = 1; r <= repeats; r++)); do
        read -r t s < <(chain_run "$BIN_DIR/$binary" "$w" "$etype")
        times+=("$t") speeds+=("$s")
      done
      t=$(median "${times[@]}") s=$(median "${speeds[@]}")
      speed[$runtime]=$s
      printf '%s,%s,%d,%d,%.3f,%.0f\n' "$runtime" "$etype" "$w" "$events" "$t" "$s" | tee -a "$csv"
    done
    read -r go_pub rust_pub <<<"${published["$w $etype"]:-- -}"
    rows+=("$(awk -v w="$w" -v e="$etype" -v g="${speed[goroutines]}" -v k="${speed[tokio]}" \
      -v t="${speed[threads]}" -v gp="$go_pub" -v rp="$rust_pub" 'function m(x) {
        return x == "-" ? "–" : sprintf("%.1f", x / 1e6) }
      BEGIN { printf "| %d | %s | %s | %s | %s | %s | %s |", w, e, m(g), m(k), m(t), m(gp), m(rp) }')")
    unset speed
  done
done

echo
echo "chain, $events events per sender, queue $queue, median of $repeats runs; M messages/s"
echo "(published: bench-of-chan, i7-9750H under WSL, Go 1.18 / Rust 1.62 tokio; – where it has no row)"
echo
echo "| workers | type | goroutines | tokio | threads | published Go | published Rust (tokio) |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "CSV in the article's shape: $csv"
