#!/usr/bin/env bash
# The GPU checks of a session lent a GPU machine, in one run, from the
# repository root there:
#
#   scripts/gpu/check.sh PACK.tar.xz OUT_DIR
#
# PACK is scripts/gpu/pack.sh's tarball of a CUDA build made on another
# machine (unpacked here, its lib/ first on LD_LIBRARY_PATH). Writes to
# OUT_DIR: summary.log (device, what ran, each step's exit status),
# ctest_gpu.log (`ctest -L gpu`), bench.log (scripts/bench/bench_cuda.sh on the
# shipped image model and a random DiT-XL/2), profile.log (bench_forward
# --profile on random-weight Latte-1 at 512x512 x 16 frames and PixArt-XL
# 1024, bfloat16 and float16: scripts/gpu/models), torch_ref.log (PyTorch's
# cuBLAS GEMM and SDPA on the same shapes: the reference for the op
# timings). Each step has a time limit; the whole takes about 90 s on an H100.
set -u
pack=${1:?usage: check.sh PACK.tar.xz OUT_DIR}
out=${2:?usage: check.sh PACK.tar.xz OUT_DIR}
mkdir -p "$out"
S=$out/summary.log
t0=$(date +%s); step() { echo "[+$(( $(date +%s) - t0 ))s] $*" | tee -a "$S"; }
tar -xJf "$pack" -C . || { step "cannot unpack $pack"; exit 1; }
build=$(dirname "$(find . -path '*/tests/test_gpu' -type f | head -1)"); build=${build%/tests}
# test_gpu and ctest's files name the source tree of the build machine.
src=$(sed -n 's/^# Source directory: //p' "$build/CTestTestfile.cmake")
[ -e "$src" ] || { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  ldd "$build/ditgen" | grep -q "$lib => /" && continue
  f=$(find /usr /opt -name "$lib*" -type f 2>/dev/null | head -1)
  [ -n "$f" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$f")
done
{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  ldd "$build/ditgen" | grep -E "cudart|cublas|nccl|not found"; } >> "$S" 2>&1
timeout 300 ctest --test-dir "$build" -L gpu --output-on-failure -j4 --timeout 150 > "$out/ctest_gpu.log" 2>&1
step "ctest -L gpu rc=$?: $(grep -E 'tests passed|tests failed' "$out/ctest_gpu.log")"
B=$out/bench.log
timeout 90 scripts/bench/bench_cuda.sh "$build" samples/dit-shapes 2 10 >> "$B" 2>&1; step "bench_cuda dit-shapes rc=$?"
timeout 60 "$build/scripts/bench/cpp/make_random_dit" --preset dit-xl-2-256 --out /tmp/dit-xl --dtype bfloat16 >> "$B" 2>&1
timeout 150 scripts/bench/bench_cuda.sh "$build" /tmp/dit-xl 2 5 >> "$B" 2>&1; step "bench_cuda dit-xl-2-256 rc=$?"
P=$out/profile.log
forward() { echo "== bench_forward $*" >> "$P"
  timeout 60 "$build/scripts/bench/cpp/bench_forward" --device cuda --repeat 3 --warmup 2 --profile "$@" >> "$P" 2>&1
  step "bench_forward $* rc=$?"; }
python3 scripts/gpu/make_random_weights.py scripts/gpu/models/latte-1 /tmp/latte-1 >> "$P" 2>&1
for dtype in bfloat16 float16; do
  forward --model /tmp/latte-1 --dtype $dtype --batch 2 --frames 16 --latent-size 64 --text-tokens 120
done
forward --model /tmp/latte-1 --dtype bfloat16 --attention math --batch 2 --frames 16 --latent-size 64 --text-tokens 120
python3 scripts/gpu/make_random_weights.py scripts/gpu/models/pixart-xl-2-1024 /tmp/pixart-xl >> "$P" 2>&1
forward --model /tmp/pixart-xl --dtype bfloat16 --batch 2 --text-tokens 120
timeout 90 python3 scripts/gpu/torch_reference.py > "$out/torch_ref.log" 2>&1; step "torch reference rc=$?"
