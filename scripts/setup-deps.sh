#!/bin/sh
# setup-deps.sh - installs the Debian packages rumus needs, only those that
# are missing.  Idempotent and non-interactive; runs as root or through sudo.
set -eu

PACKAGES="build-essential autoconf automake libtool pkg-config make
  ocl-icd-opencl-dev opencl-headers ocl-icd-libopencl1 pocl-opencl-icd clinfo
  check zlib1g-dev libjson-c-dev libopenblas-dev gfortran dataset-fashion-mnist
  openmpi-bin libopenmpi-dev fortunes"

missing=""
for p in $PACKAGES; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "setup-deps.sh: missing packages:$missing; run as root or install sudo" >&2
  exit 1
fi
echo "setup-deps.sh: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
