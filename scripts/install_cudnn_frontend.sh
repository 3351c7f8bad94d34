#!/usr/bin/env bash
# install_cudnn_frontend.sh [DEST]: fetches NVIDIA's cudnn-frontend C++
# headers (header-only, Apache-2.0 / MIT) that the CUDA backend's cuDNN
# attention (kernels/cuda/attention_cudnn.cpp) compiles against, into
# DEST (default: build-deps/cudnn-frontend-<version> in the repository root,
# ignored by git: never commit them). CMake finds them there
# (cmake/ditgen_cuda.cmake, DITGEN_CUDNN_FRONTEND_DIR).
#
# The headers come from PyPI's nvidia-cudnn-frontend wheel (a zip with
# include/ inside), pinned by version, URL and SHA-256, so every machine
# compiles the same headers. No pip needed: curl (or wget, or python3's
# urllib) downloads, unzip (or python3's zipfile) extracts; on Debian,
# curl, unzip and ca-certificates are installed when none of the tools is
# there. Offline: DITGEN_CUDNN_FRONTEND_WHEEL=/path/to/the.whl (the pinned
# file, e.g. from `pip download --no-deps nvidia-cudnn-frontend==1.32.0`).
# Idempotent: a complete DEST is left as it is.
set -euo pipefail
version=1.32.0
# Any of the release's wheels holds the same headers; this one is the
# CPython 3.11 x86-64 Linux build.
wheel=nvidia_cudnn_frontend-1.32.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
url=https://files.pythonhosted.org/packages/11/02/660e2dd9f9d9f940e1641443771730612c3aadaafbc5ef7a93cc313d519d/$wheel
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0

root=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-$root/build-deps/cudnn-frontend-$version}
if [ -f "$dest/include/cudnn_frontend.h" ] && [ -f "$dest/VERSION" ] && [ "$(cat "$dest/VERSION")" = "$version" ]; then
  echo "install_cudnn_frontend: $dest has cudnn-frontend $version"
  exit 0
fi

have() { command -v "$1" > /dev/null 2>&1; }
if ! { have curl || have wget || have python3; } || ! { have unzip || have python3; }; then
  "$root/scripts/apt_install_missing.sh" install_cudnn_frontend curl unzip ca-certificates
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
file=$tmp/$wheel
if [ -n "${DITGEN_CUDNN_FRONTEND_WHEEL:-}" ]; then
  cp "$DITGEN_CUDNN_FRONTEND_WHEEL" "$file"
elif have curl; then
  curl -fsSL --retry 3 --connect-timeout 20 -o "$file" "$url"
elif have wget; then
  wget -q --tries=3 -O "$file" "$url"
else
  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' "$url" "$file"
fi

got=$(sha256sum "$file" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
  echo "install_cudnn_frontend: $wheel has SHA-256 $got, expected $sha256" >&2
  exit 1
fi

mkdir -p "$tmp/x"
if have unzip; then
  unzip -q "$file" 'include/*' '*.dist-info/licenses/*' -d "$tmp/x"
else
  python3 - "$file" "$tmp/x" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/") or "/licenses/" in n])
EOF
fi
[ -f "$tmp/x/include/cudnn_frontend.h" ] || { echo "install_cudnn_frontend: no include/cudnn_frontend.h in $wheel" >&2; exit 1; }

rm -rf "$dest.partial"
mkdir -p "$dest.partial"
mv "$tmp/x/include" "$dest.partial/include"
mkdir -p "$dest.partial/licenses"
find "$tmp/x" -path '*licenses/*' -type f -exec cp {} "$dest.partial/licenses/" \;
echo "$version" > "$dest.partial/VERSION"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "install_cudnn_frontend: cudnn-frontend $version headers in $dest"
