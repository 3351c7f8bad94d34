#!/usr/bin/env bash
# Batch generation benchmark: N outputs made by one ditgen run (one model
# load, the text encoder once over every prompt, model batches of
# generate.batch_size) against the same N outputs made by N separate runs
# of one output each, same machine, same threads, one after the other in
# this script. Two models:
#
#   default   the shipped default model (samples/dit-shapes, class labels:
#             a class-conditional model takes no prompt file, so its batch
#             is a config with N class labels, the 30 classes in turn)
#   pixart    the tiny text-to-image fixture (tests/fixtures/pixart_tiny,
#             random weights: only the times mean anything), from an
#             N-line prompt file
#
#   scripts/bench/bench_batch.sh [DITGEN=build/ditgen] [N=50] [THREADS=2]
#
# Run from the repository root. Prints, per model, the wall seconds of the
# batch run and of the N separate runs, seconds per output and the ratio.
# Each separate run makes output i with the batch's seed for it (seed + i),
# so both sides make the same images (to float rounding: a model batch and
# a batch of one round differently in the last bits).
set -euo pipefail
ditgen=${1:-build/ditgen}
n=${2:-50}
threads=${3:-2}
[[ -x $ditgen ]] || { echo "bench_batch.sh: no executable $ditgen (build first)" >&2; exit 1; }
work=$(mktemp -d /tmp/ditgen_bench_batch.XXXXXX)
trap 'rm -rf "$work"' EXIT

classes=("red circle" "red square" "red triangle" "red star" "red cross"
         "yellow circle" "yellow square" "yellow triangle" "yellow star" "yellow cross"
         "green circle" "green square" "green triangle" "green star" "green cross"
         "cyan circle" "cyan square" "cyan triangle" "cyan star" "cyan cross"
         "blue circle" "blue square" "blue triangle" "blue star" "blue cross"
         "magenta circle" "magenta square" "magenta triangle" "magenta star" "magenta cross")
colours=(red yellow green cyan blue magenta)
things=("circle" "square on the grass" "cat walking on the grass" "star in the night sky" "cross" "dog on the beach")

now() { date +%s.%N; }
seconds() { echo "$2 - $1" | bc -l; }
run() { "$ditgen" --device cpu --threads "$threads" --quiet "$@"; }

# The N labels as a JSON list, and N prompts as a text file.
labels_json=$(for ((i = 0; i < n; i++)); do printf '"%s"\n' "${classes[i % 30]}"; done | paste -sd, -)
for ((i = 0; i < n; i++)); do echo "a ${colours[i % 6]} ${things[(i / 6) % 6]} number $i"; done > "$work/prompts.txt"

report() {  # name batch_seconds separate_seconds
  printf '%-8s %4d outputs   batch run %8.2f s (%6.3f s/output)   %d separate runs %8.2f s (%6.3f s/output)   separate / batch %5.2fx\n' \
    "$1" "$n" "$2" "$(echo "$2 / $n" | bc -l)" "$n" "$3" "$(echo "$3 / $n" | bc -l)" "$(echo "$3 / $2" | bc -l)"
}

# The default model: its shipped config with N labels (batch_size from the config: 30).
t0=$(now)
run --config configs/shapes-image.json --set "generate.class_labels=[$labels_json]" --set output.grid=false \
    --output "$work/default/batch.png"
t1=$(now)
for ((i = 0; i < n; i++)); do
  run --config configs/shapes-image.json --set "generate.class_labels=[\"${classes[i % 30]}\"]" --set output.grid=false \
      --seed "$i" --output "$work/default/one_$i.png"
done
t2=$(now)
default_batch=$(seconds "$t0" "$t1") default_separate=$(seconds "$t1" "$t2")

# The tiny PixArt: the example batch config with the N-line prompt file.
t0=$(now)
run --config scripts/batch_example/pixart_tiny_batch.json --prompt-file "$work/prompts.txt" --set output.grid=false \
    --set output.skip_existing=false --output "$work/pixart/batch.png"
t1=$(now)
i=0
while IFS= read -r prompt; do
  run --config scripts/batch_example/pixart_tiny_batch.json --prompt "$prompt" --set output.grid=false \
      --set output.skip_existing=false --seed "$i" --output "$work/pixart/one_$i.png"
  i=$((i + 1))
done < "$work/prompts.txt"
t2=$(now)
pixart_batch=$(seconds "$t0" "$t1") pixart_separate=$(seconds "$t1" "$t2")

echo "ditgen batch benchmark: $n outputs, $threads threads, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
report default "$default_batch" "$default_separate"
report pixart "$pixart_batch" "$pixart_separate"
