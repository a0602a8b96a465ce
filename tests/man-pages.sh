#!/bin/sh
# man-pages.sh - every function of rumus.h has its reference page, with a
# description, and every page renders without groff warnings (when groff
# is installed).  Runs in the build tree after `make` made man/.
set -u
hdr=${srcdir:-.}/include/rumus.h
fail=0
[ -f man/rumus.7 ] || { echo "man/rumus.7 missing"; exit 1; }
names=$(sed -n 's/^RUMUS_API[^(]*[ *]\([a-z_0-9]*\)(.*/\1/p' "$hdr")
count=0
for n in $names; do
  count=$((count + 1))
  p=man/$n.3
  if [ ! -s "$p" ]; then
    echo "no page for $n"
    fail=1
  elif [ "$(sed -n '/^\.SH DESCRIPTION/,/^\.SH/p' "$p" | grep -vc '^\.')" -eq 0 ]; then
    echo "$p: empty DESCRIPTION"
    fail=1
  fi
done
[ "$count" -gt 50 ] || { echo "only $count functions found in $hdr"; fail=1; }
if command -v groff > /dev/null 2>&1; then
  for p in man/*.3 man/rumus.7; do
    w=$(groff -man -ww -z "$p" 2>&1)
    [ -z "$w" ] || { echo "$p: $w"; fail=1; }
  done
fi
echo "$count functions, each with a page"
exit $fail
