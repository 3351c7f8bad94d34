#!/usr/bin/env bash
# Installs what ditgen needs to build and test, from Debian 12 packages, and
# only what is missing (idempotent: a second run installs nothing).
# The OpenMP build of OpenBLAS is chosen on purpose: the pthread build's
# threads fight ditgen's OpenMP threads (about 1.9x slower on DiT-XL/2).
# oneDNN (libdnnl-dev) runs the CPU GEMMs (float32 and bfloat16); Debian builds
# it with OpenMP too.
# valgrind checks the MP4 writer's calls into libswscale and libx264, which
# ASan cannot see into (tests/CMakeLists.txt).
set -euo pipefail

pkgs=(cmake g++ make pkg-config
      libcli11-dev nlohmann-json3-dev libstb-dev doctest-dev
      libavcodec-dev libavformat-dev libswscale-dev libavutil-dev
      libopenmpi-dev openmpi-bin
      libopenblas-openmp-dev libopenblas0-openmp libdnnl-dev
      libsentencepiece-dev
      valgrind)

exec "$(dirname "$0")/apt_install_missing.sh" install_deps "${pkgs[@]}"
