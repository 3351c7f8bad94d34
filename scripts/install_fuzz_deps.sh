#!/usr/bin/env bash
# Installs what the fuzz build (scripts/fuzz.sh, -DDITGEN_FUZZ=ON) needs on
# top of install_deps.sh: Debian 12's clang-16 and its compiler-rt (libFuzzer,
# ASan, UBSan runtimes) and its OpenMP runtime (ditgen_util links OpenMP;
# clang-16 looks for libomp in its own directory), and only what is missing
# (idempotent).
set -euo pipefail

pkgs=(clang-16 libclang-rt-16-dev libomp-16-dev)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_fuzz_deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install_fuzz_deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
