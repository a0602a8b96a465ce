#!/bin/sh
# bundle-device.sh - packs a static build for a machine that lacks the
# build's tools and libraries (the GPU machine: no libtool, no Check, no
# json-c), for scripts/check-device.sh, bench/run-h200.sh and rumus-train.
#
#   scripts/bundle-device.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR holds a static build (configure --disable-shared) with its
# test programs built (make check TESTS=).  OUT_DIR receives rumus-bench,
# rumus-train, rumus-info, tests/check_*, lib/ (the shared libraries
# those need other than the C library and the OpenCL loader: point
# LD_LIBRARY_PATH there) and data/fashion-mnist and data/fortunes (the
# data sets of the Debian packages, for --data).
set -eu
b=$1
o=$2
rm -rf "$o"
mkdir -p "$o/tests" "$o/lib" "$o/data/fashion-mnist" "$o/data/fortunes"
cp "$b/rumus-bench" "$b/rumus-train" "$b/rumus-info" "$o/"
for t in "$b"/tests/check_*; do
  case $t in *.o | *.log | *.trs) continue ;; esac
  [ -x "$t" ] && cp "$t" "$o/tests/"
done
# The shared libraries of the programs, but libc's own and OpenCL's.
for f in "$o"/rumus-* "$o"/tests/*; do ldd "$f"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  while read -r l; do
    case $(basename "$l") in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux*) ;;
      libOpenCL.so*) ;;
      *) cp -L "$l" "$o/lib/" ;;
    esac
  done
cp /usr/share/datasets/fashion-mnist/*.gz "$o/data/fashion-mnist/"
for f in /usr/share/games/fortunes/*; do
  case $f in *.dat | *.u8) continue ;; esac
  [ -f "$f" ] && cp -L "$f" "$o/data/fortunes/"
done
du -sh "$o"
