#!/bin/sh
# dev.sh - the two commands of the README.
#
#   scripts/dev.sh run [ARGS]  install what is missing, build, and train the
#                              MLP on Fashion-MNIST with rumus-train on the
#                              default device (ARGS go to rumus-train)
#   scripts/dev.sh test        install what is missing, build, and run the
#                              whole test suite: make check, the same suite
#                              under AddressSanitizer + UndefinedBehavior-
#                              Sanitizer, the threads test under Thread-
#                              Sanitizer, and make distcheck
#
# Builds go to build/ (and build-asan/, build-tsan/) beside this script's
# parent, so the source tree stays clean.  RUMUS_DEVICE picks the device
# (index or name).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
[ $# -gt 0 ] && shift
jobs=$(nproc 2>/dev/null || echo 2)
# Every build's tests share one PoCL kernel cache (same kernels, same device).
RUMUS_TEST_POCL_CACHE=${RUMUS_TEST_POCL_CACHE:-$top/build/.pocl-cache}
export RUMUS_TEST_POCL_CACHE

"$top/scripts/setup-deps.sh"
cd "$top"
[ -x configure ] || ./autogen.sh >/dev/null

configure_in() { # dir, configure args...
  d=$1
  shift
  mkdir -p "$top/$d"
  cd "$top/$d"
  [ -f Makefile ] || "$top/configure" -q "$@"
}

# One line of df for the CI log: a full disk fails builds and tests.
disk_free() {
  df -h "$top" | sed -n '2s/^/disk: /p'
}

case "$cmd" in
  run)
    configure_in build
    make -s -j"$jobs"
    ./rumus-info
    exec ./rumus-train "$@"
    ;;
  test)
    # A failing suite prints its test-suite.log (the failed tests' own
    # output), so that a CI log says which check failed and why.
    VERBOSE=1
    export VERBOSE
    disk_free
    configure_in build
    make -s -j"$jobs"
    ./rumus-info -l
    make -s -j"$jobs" check
    echo "== the suite again under AddressSanitizer + UndefinedBehaviorSanitizer"
    san="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    configure_in build-asan --disable-shared CFLAGS="$san" FCFLAGS="$san"
    # One process per test program (CK_FORK=no), so LeakSanitizer checks
    # once at each program's exit rather than at every forked test's, and
    # no interception of __tls_get_addr: LeakSanitizer's stop-the-world
    # tracer sometimes crashed ("Tracer caught signal 11") while PoCL's
    # worker threads were alive at a forked test's exit.  Leaks are still
    # found: every test frees its contexts and tensors before the program
    # ends.
    CK_FORK=no \
      ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:intercept_tls_get_addr=0" \
      LSAN_OPTIONS="suppressions=$top/tests/lsan.supp:print_suppressions=0" \
      UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
      make -s -j"$jobs" check
    echo "== the threads test under ThreadSanitizer"
    # Only check_threads, in a build of its own (CK_FORK=no: one process,
    # which halt_on_error stops at the first race).
    configure_in build-tsan --disable-shared \
      CFLAGS="-O1 -g -fsanitize=thread"
    CK_FORK=no TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" \
      make -s -j"$jobs" check-TESTS TESTS=tests/check_threads \
      check_PROGRAMS=tests/check_threads check_LTLIBRARIES=tests/libtestutil.la
    echo "== make distcheck"
    disk_free
    cd "$top/build"
    make -s -j"$jobs" distcheck
    ;;
  *)
    echo "usage: scripts/dev.sh run [rumus-train args] | scripts/dev.sh test" >&2
    exit 2
    ;;
esac
