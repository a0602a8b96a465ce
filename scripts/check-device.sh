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
# NVIDIA driver took longer than 420 s.  CHECK_ONLY="check_a check_b"
# runs those test programs alone (and skips rumus-train's step);
# CHECK_SPLIT=1 runs each program once per Check test case (the
# tu_tcase names of tests/NAME.c beside this script, through CK_RUN_CASE),
# all at once: a cold driver compiles each process's kernels on its own
# core (check_attention's 28 tiled programs did not finish in 330 s in
# one process).
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

# The Check test cases of test program $1 (none found: run it whole).
cases_of() {
  [ "${CHECK_SPLIT:-0}" = 1 ] || return 0
  sed -n 's/.*tu_tcase("\([A-Za-z0-9_]*\)").*/\1/p' \
    "$(dirname "$0")/../tests/$1.c" 2>/dev/null
}

# The test programs at once: each builds its kernels on its own contexts.
pids=
for t in "$build"/tests/check_*; do
  [ -x "$t" ] || continue
  case $t in *.o) continue ;; esac
  n=$(basename "$t")
  if [ -n "${CHECK_ONLY:-}" ]; then
    case " $CHECK_ONLY " in *" $n "*) ;; *) continue ;; esac
  fi
  cases=$(cases_of "$n")
  if [ -z "$cases" ]; then
    CK_FORK=no CK_DEFAULT_TIMEOUT=600 step "$n" "$t" &
    pids="$pids $!"
    continue
  fi
  for c in $cases; do
    CK_RUN_CASE=$c CK_FORK=no CK_DEFAULT_TIMEOUT=600 step "$n.$c" "$t" &
    pids="$pids $!"
  done
done
for p in $pids; do wait "$p" || fail=1; done

[ -n "${CHECK_ONLY:-}" ] || step train "$build/rumus-train" --device "$dev" ||
  fail=1

cat "$out/status.txt"
for f in "$out"/*.txt; do
  [ "$f" = "$out/status.txt" ] && continue
  echo "---- $(basename "$f")"
  tail -n 4 "$f"
done
exit $fail
