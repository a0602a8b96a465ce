#!/bin/sh
# check-device.sh - the correctness run on one named device, from a build
# made elsewhere (the GPU machine has no libtool and no Check): rumus-info's
# self-checks, every test program (unforked, in parallel), and rumus-train's
# default 5-epoch run.
#
#   scripts/check-device.sh BUILD_DIR OUT_DIR DEVICE [DATA_DIR]
#
# BUILD_DIR holds a static build (configure --disable-shared) with its test
# programs built (make check TESTS=); libraries the test programs need and
# the machine lacks may sit in BUILD_DIR/lib.  DEVICE is a RUMUS_DEVICE
# selector (index or name substring).  DATA_DIR holds the Fashion-MNIST IDX
# files (default: rumus-train's own default).  Each step's output goes to
# OUT_DIR/<step>.txt; the last lines of each are printed with its status.
# Exits non-zero when any step failed.  CHECK_INFO=0 skips rumus-info's
# step: it builds every program of both variants first, which on a cold
# NVIDIA driver took longer than 420 s.
set -u
build=$1
out=$2
dev=$3
data=${4:-}
mkdir -p "$out"
[ -d "$build/lib" ] && LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
RUMUS_DEVICE=$dev
export RUMUS_DEVICE
[ -n "$data" ] && RUMUS_FASHION_MNIST=$data && export RUMUS_FASHION_MNIST
fail=0

step() { # name, command...
  name=$1
  shift
  t0=$(date +%s)
  "$@" > "$out/$name.txt" 2>&1
  rc=$?
  echo "== $name: rc $rc, $(($(date +%s) - t0)) s" >> "$out/status.txt"
  return $rc
}

[ "${CHECK_INFO:-1}" = 0 ] || step info "$build/rumus-info" -d "$dev" || fail=1

# The test programs at once: each builds its kernels on its own contexts.
pids=
for t in "$build"/tests/check_*; do
  [ -x "$t" ] || continue
  case $t in *.o) continue ;; esac
  n=$(basename "$t")
  CK_FORK=no CK_DEFAULT_TIMEOUT=600 step "$n" "$t" &
  pids="$pids $!"
done
for p in $pids; do wait "$p" || fail=1; done

step train "$build/rumus-train" --device "$dev" || fail=1

cat "$out/status.txt"
for f in "$out"/*.txt; do
  [ "$f" = "$out/status.txt" ] && continue
  echo "---- $(basename "$f")"
  tail -n 4 "$f"
done
exit $fail
