#!/usr/bin/env bash
# CUDA forward benchmark: times one DiT transformer forward (median of
# --repeat) on the CPU (float32, the reference run on the same machine) and
# on CUDA as float32, bfloat16 (automatic attention path: flash on compute
# capability >= 8.0), bfloat16 with the math path forced, and float16, then
# prints each figure next to the CPU run and the forced-math run.
#
#   scripts/bench/bench_cuda.sh BUILD_DIR MODEL_DIR [BATCH=2] [REPEAT=10]
#
# BUILD_DIR: a CUDA build (-DDITGEN_CUDA=ON -DDITGEN_BENCHMARKS=ON) with
# bench_forward built.
# MODEL_DIR: a diffusers model root or transformer directory, e.g. the
# shipped samples/dit-shapes, or a full-size random DiT-XL/2 written by
#   BUILD_DIR/scripts/bench/cpp/make_random_dit --preset dit-xl-2-256 --out /tmp/xl
# The CPU run uses every core of the machine (--threads $(nproc)).
set -euo pipefail
build=${1:?usage: bench_cuda.sh BUILD_DIR MODEL_DIR [BATCH] [REPEAT]}
model=${2:?usage: bench_cuda.sh BUILD_DIR MODEL_DIR [BATCH] [REPEAT]}
batch=${3:-2}
repeat=${4:-10}
bench="$build/scripts/bench/cpp/bench_forward"
[ -x "$bench" ] || { echo "bench_cuda.sh: $bench not built (configure with -DDITGEN_BENCHMARKS=ON, then cmake --build $build --target bench_forward)" >&2; exit 2; }

run() {  # label, then bench_forward options; prints "label seconds peak_bytes path"
  local label=$1; shift
  local out
  out=$("$bench" --model "$model" --batch "$batch" --repeat "$repeat" --warmup 2 "$@")
  echo "$label $(awk '/^forward_seconds/ {s=$2} /^device_peak_bytes/ {m=$2} /^attention_path/ {p=$2}
                     END {print s, (m == "" ? 0 : m), (p == "" ? "-" : p)}' <<< "$out")"
  grep -E '^device ' <<< "$out" >&2 || true
}

results=$(
  run cpu_float32 --device cpu --threads "$(nproc)"
  run cuda_float32 --device cuda --dtype float32
  run cuda_bfloat16 --device cuda --dtype bfloat16
  run cuda_bfloat16_math --device cuda --dtype bfloat16 --attention math
  run cuda_float16 --device cuda --dtype float16
)
echo "model $model, batch $batch, median of $repeat forwards (after 2 warmups)"
awk 'NR == FNR { t[$1] = $2; next }
     FNR == 1 { printf "%-20s %12s %10s %14s %12s %s\n", "run", "forward s", "vs cpu", "vs bf16 math", "device MiB", "attention" }
     { printf "%-20s %12.5f %9.1fx %13.2fx %12.1f %s\n", $1, $2, t["cpu_float32"] / $2, t["cuda_bfloat16_math"] / $2,
              $3 / 1048576, $4 }' <(echo "$results") <(echo "$results")
