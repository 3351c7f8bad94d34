#!/usr/bin/env bash
# Pack a CUDA build for a bare GPU machine (one with the driver, the CUDA
# toolkit and PyTorch, but none of ditgen's Debian libraries):
#
#   scripts/install_cudnn_frontend.sh   # the cuDNN attention's headers
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDITGEN_CUDA=ON -DDITGEN_CUDNN_FRONTEND=ON \
#         -DDITGEN_CUDA_ARCHITECTURES=90 -DDITGEN_FFMPEG=OFF -DDITGEN_BENCHMARKS=ON
#   cmake --build build-cuda -j2 --target ditgen test_gpu bench_forward make_random_dit
#   scripts/gpu/pack.sh build-cuda OUT.tar.xz
#
# The tarball holds the four programs (stripped), ctest's files for the gpu
# label, and lib/: every shared library they load except glibc, libstdc++
# and the CUDA runtime, cuBLAS and NCCL, which the GPU machine has in a
# matching major version (CUDA 13). cuDNN is not linked (the cuDNN attention
# dlopens libcudnn.so.9): check.sh finds the GPU machine's. DITGEN_FFMPEG=OFF keeps FFmpeg's ~100
# libraries out (about 60 MB compressed with them, 16 MB without).
# scripts/gpu/check.sh unpacks it and runs the checks.
set -euo pipefail
build=${1:?usage: pack.sh BUILD_DIR OUT.tar.xz}
out=$(realpath -m "${2:?usage: pack.sh BUILD_DIR OUT.tar.xz}")
bins="$build/ditgen $build/tests/test_gpu $build/scripts/bench/cpp/bench_forward $build/scripts/bench/cpp/make_random_dit"
for b in $bins; do [ -x "$b" ] || { echo "pack.sh: $b not built (the benchmark programs need -DDITGEN_BENCHMARKS=ON)" >&2; exit 2; }; done
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/lib"
ldd $bins | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
tar -cf - $bins $(find "$build" -name CTestTestfile.cmake) "$build"/tests/test_*_include-*.cmake \
    "$build"/tests/test_gpu_tests-*.cmake | tar -xf - -C "$stage"
strip --strip-unneeded $(for b in $bins; do echo "$stage/$b"; done)
(cd "$stage" && tar -cf - . | xz -6 -T0 > "$out")
echo "pack.sh: $out ($(du -h "$out" | cut -f1)), $(ls "$stage/lib" | wc -l) libraries"
