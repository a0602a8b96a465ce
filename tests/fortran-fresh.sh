#!/bin/sh
# fortran-fresh.sh - fortran/rumus_c.f90 is what scripts/gen-fortran.py
# makes of include/rumus.h: every function of the header has its Fortran
# interface.  Skipped (77) without python3.
set -u
s=${srcdir:-.}
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp) || exit 1
python3 "$s/scripts/gen-fortran.py" "$s/include/rumus.h" > "$tmp" || { rm -f "$tmp"; exit 1; }
if cmp -s "$tmp" "$s/fortran/rumus_c.f90"; then
  rm -f "$tmp"
  echo "fortran/rumus_c.f90 is current"
  exit 0
fi
diff -u "$s/fortran/rumus_c.f90" "$tmp" | head -40
rm -f "$tmp"
echo "fortran/rumus_c.f90 is stale: run python3 scripts/gen-fortran.py include/rumus.h > fortran/rumus_c.f90"
exit 1
