#!/usr/bin/env bash
# apt_install_missing.sh NAME PACKAGE...: installs those of the Debian
# packages that are not installed yet (idempotent: a second run installs
# nothing), as root or through sudo. The install scripts' one mechanism.
set -euo pipefail
name=$1
shift

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$name: all $# packages present"
  exit 0
fi

echo "$name: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
