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
# timings), new_paths.log (the cuDNN attention, cuBLASLt epilogue and CUDA
# Graphs tests of issue 35 on their own, with their plan-cache counts), and
# in profile.log each Latte-1 / PixArt bf16 forward also with cuDNN attention
# and cuBLASLt switched off (DITGEN_CUDNN_ATTENTION=0 DITGEN_CUBLASLT=0: the
# own flash kernel and cublasGemmEx + separate bias / GELU kernels, as
# before issue 35), for the before / after table. libcudnn.so.9 is loaded
# at run time (dlopen): the toolkit's, the system's or PyTorch's wheel's
# (nvidia/cudnn/lib) directory goes on LD_LIBRARY_PATH, named in
# summary.log. Each step has a time limit; the whole took about 90 s on an
# H100 before the A/B runs were added (about 2.5 min now, estimated).
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
# cuDNN 9 for the cuDNN attention (dlopen'ed, not linked): the first
# libcudnn.so.9 found, the CUDA toolkit's before the system's and PyTorch's.
cudnn=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libcudnn.so.9" ] && { cudnn=$d; break; }
done
if [ -z "$cudnn" ]; then
  cudnn=$(python3 -c 'import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -n "$cudnn" ] && [ -e "$cudnn/libcudnn.so.9" ] || cudnn=$(dirname "$(find /usr /opt /root -name 'libcudnn.so.9' 2>/dev/null | head -1)" 2>/dev/null || true)
fi
[ -n "$cudnn" ] && [ -e "$cudnn/libcudnn.so.9" ] && LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn
{ nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  echo "libcudnn.so.9: ${cudnn:-not found} $(ls "$cudnn"/libcudnn.so.9.* 2>/dev/null | head -1)"
  ldd "$build/ditgen" | grep -E "cudart|cublas|nccl|not found"; } >> "$S" 2>&1
timeout 300 ctest --test-dir "$build" -L gpu --output-on-failure -j4 --timeout 150 > "$out/ctest_gpu.log" 2>&1
step "ctest -L gpu rc=$?: $(grep -E 'tests passed|tests failed' "$out/ctest_gpu.log")"
# The issue-35 paths alone, with doctest's messages (plan counts, cuDNN version).
timeout 120 "$build/tests/test_gpu" -tc='*cuDNN*,*cuBLASLt*,*GraphRunner*,attention() takes cuDNN*' \
  > "$out/new_paths.log" 2>&1
step "cuDNN / cuBLASLt / CUDA Graphs tests rc=$?: $(grep -E 'test cases:' "$out/new_paths.log")"
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
# Before issue 35's paths: own flash kernel, cublasGemmEx + bias / GELU kernels.
before() { echo "== (DITGEN_CUDNN_ATTENTION=0 DITGEN_CUBLASLT=0)" >> "$P"
  DITGEN_CUDNN_ATTENTION=0 DITGEN_CUBLASLT=0 forward "$@"; }
before --model /tmp/latte-1 --dtype bfloat16 --batch 2 --frames 16 --latent-size 64 --text-tokens 120
forward --model /tmp/latte-1 --dtype bfloat16 --attention math --batch 2 --frames 16 --latent-size 64 --text-tokens 120
python3 scripts/gpu/make_random_weights.py scripts/gpu/models/pixart-xl-2-1024 /tmp/pixart-xl >> "$P" 2>&1
forward --model /tmp/pixart-xl --dtype bfloat16 --batch 2 --text-tokens 120
before --model /tmp/pixart-xl --dtype bfloat16 --batch 2 --text-tokens 120
timeout 90 python3 scripts/gpu/torch_reference.py > "$out/torch_ref.log" 2>&1; step "torch reference rc=$?"
