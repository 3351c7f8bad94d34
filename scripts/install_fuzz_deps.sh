#!/usr/bin/env bash
# Installs what the fuzz build (scripts/fuzz.sh, -DDITGEN_FUZZ=ON) needs on
# top of install_deps.sh: Debian 12's clang-16 and its compiler-rt (libFuzzer,
# ASan, UBSan runtimes) and its OpenMP runtime (ditgen_util links OpenMP;
# clang-16 looks for libomp in its own directory), and only what is missing
# (idempotent).
set -euo pipefail

pkgs=(clang-16 libclang-rt-16-dev libomp-16-dev)

exec "$(dirname "$0")/apt_install_missing.sh" install_fuzz_deps "${pkgs[@]}"
