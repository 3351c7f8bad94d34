#!/usr/bin/env bash
# A run beside other work (issue 33: no collapse when the CPU is shared):
# the shipped image config (configs/shapes-image.json, 30 images) alone and
# beside a busy loop on as many threads as there are cores, alternating
# within each round, for one build or two; prints the medians and the
# loaded / alone ratio of each. A benchmark, not a test.
#
#   scripts/bench/bench_contention.sh ROUNDS NEW_DITGEN [OLD_DITGEN]
#
# OLD_DITGEN: an older build to time in the same run. Builds before config
# paths resolved against the config's folder read model.path from the
# current directory: both are given model.path from here, so either works.
set -euo pipefail
rounds=$1 new=$2 old=${3:-}
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'pkill -P $$ -f "while :; do :; done" 2>/dev/null || true; rm -rf "$work"' EXIT
cores=$(nproc)

# seconds EXE: one run of the image config, its wall time.
seconds() {
  local t0 t1
  t0=$(date +%s.%N)
  "$1" --config configs/shapes-image.json --set model.path=samples/dit-shapes --output "$work/out/s.png" \
    --quiet >/dev/null 2>&1 || { echo "$1: run failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", b - a}'
}
# shellcheck source=stats.sh
. "$(dirname "$0")/stats.sh"

builds=(new) && [ -n "$old" ] && builds+=(old)
for b in "${builds[@]}"; do : >"$work/$b.alone" && : >"$work/$b.loaded"; done
for ((r = 0; r < rounds; r++)); do
  for b in "${builds[@]}"; do
    exe=$new && [ "$b" = old ] && exe=$old
    seconds "$exe" >>"$work/$b.alone"
  done
  pids=()
  for ((k = 0; k < cores; k++)); do sh -c 'while :; do :; done' & pids+=($!); done
  sleep 0.5
  for b in "${builds[@]}"; do
    exe=$new && [ "$b" = old ] && exe=$old
    seconds "$exe" >>"$work/$b.loaded"
  done
  kill "${pids[@]}" && wait "${pids[@]}" 2>/dev/null || true
done
printf '%-6s %10s %16s %8s   (%d rounds, %d busy threads)\n' build "alone s" "beside load s" ratio "$rounds" "$cores"
for b in "${builds[@]}"; do
  a=$(median <"$work/$b.alone") l=$(median <"$work/$b.loaded")
  printf '%-6s %10.3f %16.3f %8.2f\n' "$b" "$a" "$l" "$(ratio "$l" "$a")"
done
