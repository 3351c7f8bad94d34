#!/usr/bin/env bash
# Two ditgen builds' transformer forward on the same models, in one run on
# one machine: for a change that must not slow a family down (a refactor,
# a new module). Each build's bench_forward (needs -DDITGEN_BENCHMARKS=ON)
# times MODEL; the two builds alternate within each round so both see the
# same load, and the figure is the median of every timed forward over all
# rounds, with NEW / OLD beside it (below 1.0: NEW is faster).
#
#   scripts/bench/bench_builds.sh OLD_BUILD NEW_BUILD [--rounds 3] [--threads 2] \
#       [--dtype float32] [--repeat 3] MODEL_DIR [MODEL_DIR ...]
#
# MODEL_DIR: a transformer directory or model root bench_forward accepts,
# e.g. DiT-XL/2 from build/scripts/bench/cpp/make_random_dit --preset dit-xl-2-256
# (no Python needed), Latte-1-sized from scripts/models/make_random_latte.py.
# A benchmark, not a test: it prints figures and asserts nothing.
set -euo pipefail
old=$1 new=$2
shift 2
rounds=3 threads=2 dtype=float32 repeat=3 models=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[ ${#models[@]} -gt 0 ] || { echo "usage: $0 OLD_BUILD NEW_BUILD [options] MODEL_DIR..." >&2; exit 2; }
# bench_forward's place in a build tree (scripts/bench/cpp/ since the
# scripts were grouped; scripts/bench/ in older trees).
bench_of() {
  local b
  for b in "$1/scripts/bench/cpp/bench_forward" "$1/scripts/bench/bench_forward"; do
    [ -x "$b" ] && echo "$b" && return
  done
  echo "$1: no bench_forward (configure with -DDITGEN_BENCHMARKS=ON, build target bench_forward)" >&2
  exit 2
}
old_bench=$(bench_of "$old")
new_bench=$(bench_of "$new")

# forward_times BENCH MODEL: one bench_forward process; prints its timed forwards, one per line.
forward_times() {
  "$1" --model "$2" --threads "$threads" --dtype "$dtype" --repeat "$repeat" \
    --warmup 1 | sed -n 's/^forward_all //p' | tr ',' '\n'
}

# shellcheck source=stats.sh
. "$(dirname "$0")/stats.sh"

printf '%-40s %-9s %10s %10s %9s\n' model dtype "old s" "new s" "new/old"
for model in "${models[@]}"; do
  : >/tmp/bench_builds.old.$$ && : >/tmp/bench_builds.new.$$
  for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then order=(old new); else order=(new old); fi
    for which in "${order[@]}"; do
      bench=$old_bench && [ "$which" = new ] && bench=$new_bench
      forward_times "$bench" "$model" >>/tmp/bench_builds.$which.$$
    done
  done
  o=$(median </tmp/bench_builds.old.$$) n=$(median </tmp/bench_builds.new.$$)
  printf '%-40s %-9s %10.3f %10.3f %9.3f\n' "$(basename "$model")" "$dtype" "$o" "$n" "$(ratio "$n" "$o")"
  rm -f /tmp/bench_builds.old.$$ /tmp/bench_builds.new.$$
done
