#!/usr/bin/env bash
# Installs what ditgen needs to build and test, from Debian 12 packages, and
# only what is missing (idempotent: a second run installs nothing).
# The OpenMP build of OpenBLAS is chosen on purpose: the pthread build's
# threads fight ditgen's OpenMP threads (about 1.9x slower on DiT-XL/2).
# oneDNN (libdnnl-dev) runs the CPU GEMMs (float32 and bfloat16); Debian builds
# it with OpenMP too.
# libjpeg-turbo decodes JPEG input images as Pillow does (byte for byte).
# valgrind checks the MP4 writer's calls into libswscale and libx264, which
# ASan cannot see into (tests/CMakeLists.txt).
# Where the CUDA toolkit is (nvcc on PATH or in /usr/local/cuda/bin), it also
# fetches the cudnn-frontend headers for the cuDNN attention into
# build-deps/ (scripts/install_cudnn_frontend.sh; not a Debian package, and
# ignored by git). Without network that step only warns: CMake then builds
# the CUDA backend without cuDNN attention (DITGEN_CUDNN_FRONTEND=AUTO).
set -euo pipefail

pkgs=(cmake g++ make pkg-config
      libcli11-dev nlohmann-json3-dev libstb-dev libjpeg62-turbo-dev doctest-dev
      libavcodec-dev libavformat-dev libswscale-dev libavutil-dev
      libopenmpi-dev openmpi-bin
      libopenblas-openmp-dev libopenblas0-openmp libdnnl-dev
      libsentencepiece-dev
      valgrind)

"$(dirname "$0")/apt_install_missing.sh" install_deps "${pkgs[@]}"

if command -v nvcc > /dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  "$(dirname "$0")/install_cudnn_frontend.sh" ||
    echo "install_deps: WARNING: could not fetch the cudnn-frontend headers; the CUDA build goes without" \
         "cuDNN attention (rerun scripts/install_cudnn_frontend.sh)" >&2
fi
