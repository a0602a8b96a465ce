#!/bin/sh
# cl-portable.sh - the kernel sources use nothing that PoCL accepts and
# other OpenCL C 1.2 compilers refuse: variadic macros (an extension of
# clang's; NVIDIA's driver failed dropout.cl's build on one).  The tests
# run on PoCL only, so this is their guard.
set -u
s=${srcdir:-.}
set -- "$s"/cl/*.cl
[ -f "$1" ] || { echo "no kernel sources under $s/cl"; exit 99; }
bad=$(grep -n -E '^[[:space:]]*#[[:space:]]*define[[:space:]]+[A-Za-z_][A-Za-z0-9_]*\([^)]*\.\.\.|__VA_ARGS__' \
  "$@")
if [ -n "$bad" ]; then
  echo "variadic macros (not OpenCL C 1.2):"
  echo "$bad"
  exit 1
fi
echo "cl/*.cl: no variadic macros"
exit 0
