#!/usr/bin/env bash
# Benchmark: bench-of-chan (elsejj, 2022) on the three runtimes and Kotlin. `chain` is its experiment: N
# receivers each with a bounded queue, N senders each sending EVENTS events of a type; speed =
# N × EVENTS / the time after spawning (our `steady` phase). Run at the article's sizes (100,
# 1,000 and 5,000 workers, queue 256, int / str / str_ptr), median of REPEATS runs, written in
# the article's CSV shape (program,etype,worker,event,time,speed) to target/bench/chain.csv and
# shown beside its published speeds (Go, Rust tokio and Kotlin; i7-9750H, WSL), as
# `spawnscope published bench-of-chan` prints them (crates/studies/src/bench_of_chan.rs).
# `threads` (std::sync::mpsc, one OS thread per task) is the row the article never had. `kotlin`
# is the article's third language: examples/kotlin-chain (kotlinx.coroutines channels, its warm-up
# run first), built with Maven on the JDK spawnscope finds; left out, saying why, without mvn or
# a JDK 17+.
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
build_all
mkdir -p target/bench
csv=target/bench/chain.csv

# The article's published speeds (messages/s), "program worker etype" -> speed.
declare -A published=()
while IFS=, read -r program etype worker _ _ speed; do
  published["$program $worker $etype"]=$speed
done < <("$BIN_DIR/spawnscope" published bench-of-chan | tail -n +3)

# Kotlin when Maven and a JDK are here; otherwise its rows say why not.
programs=(goroutines tokio threads)
if build_kotlin_chain; then
  programs+=(kotlin)
else
  say "no Kotlin rows (the reason is above)"
fi

# kotlin_run WORKERS ETYPE: "time_s speed" of one run of the Kotlin program (its own clock).
kotlin_run() {
  local line
  line=$(kotlin_chain -w "$1" -e "$events" -q "$queue" -t "$2") || die "kotlin chain -w $1 -t $2 failed"
  awk -F, '{ print $5, $6 }' <<<"$line"
}

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
    for runtime in "${programs[@]}"; do
      binary=$runtime
      [ "$runtime" = tokio ] && binary=tokio-tasks
      times=() speeds=()
      for ((r = 1; r <= repeats; r++)); do
        if [ "$runtime" = kotlin ]; then
          read -r t s < <(kotlin_run "$w" "$etype")
        else
          read -r t s < <(chain_run "$BIN_DIR/$binary" "$w" "$etype")
        fi
        times+=("$t") speeds+=("$s")
      done
      t=$(median "${times[@]}") s=$(median "${speeds[@]}")
      speed[$runtime]=$s
      printf '%s,%s,%d,%d,%.3f,%.0f\n' "$runtime" "$etype" "$w" "$events" "$t" "$s" | tee -a "$csv"
    done
    rows+=("$(awk -v w="$w" -v e="$etype" -v g="${speed[goroutines]}" -v k="${speed[tokio]}" \
      -v t="${speed[threads]}" -v kt="${speed[kotlin]:--}" -v gp="${published["golang $w $etype"]:--}" \
      -v rp="${published["rust $w $etype"]:--}" -v kp="${published["kotlin $w $etype"]:--}" 'function m(x) {
        return x == "-" ? "–" : sprintf("%.1f", x / 1e6) }
      BEGIN { printf "| %d | %s | %s | %s | %s | %s | %s | %s | %s |", w, e, m(g), m(k), m(t), m(kt), m(gp), m(rp), m(kp) }')")
    unset speed
  done
done

echo
echo "chain, $events events per sender, queue $queue, median of $repeats runs; M messages/s"
# Its first line (the source); read whole: a reader that stops early would end it on EPIPE.
"$BIN_DIR/spawnscope" published bench-of-chan | sed -n 1p
echo "(– where the article has no row, or where Kotlin did not run here)"
echo
echo "| workers | type | goroutines | tokio | threads | kotlin | published Go | published Rust (tokio) | published Kotlin |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "CSV in the article's shape: $csv"
