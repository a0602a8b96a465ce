#!/bin/sh
# wg_sweep.sh - device times of some ops under each reduction work-group
# size (RUMUS_WORKGROUP_SIZE), to pick the defaults of a device class.
#
#   bench/wg_sweep.sh RUMUS_BENCH OPS SHAPES "WG..." [RUMUS_BENCH_ARGS...]
#
# OPS and SHAPES are rumus-bench's comma-separated lists; WG 0 is the
# library's own choice (which may give long rows a wider work-group).
# Prints one result line of rumus-bench per op, shape and size, prefixed
# with the size.  No peers and no check: only the device times matter.
set -eu
if [ $# -lt 4 ]; then
  echo "usage: $0 RUMUS_BENCH OPS SHAPES \"WG...\" [RUMUS_BENCH_ARGS...]" >&2
  exit 2
fi
bench=$1
ops=$2
shapes=$3
wgs=$4
shift 4
for wg in $wgs; do
  if [ "$wg" = 0 ]; then
    env -u RUMUS_WORKGROUP_SIZE "$bench" --ops "$ops" --shape "$shapes" \
      --no-peer --no-check "$@"
  else
    RUMUS_WORKGROUP_SIZE=$wg "$bench" --ops "$ops" --shape "$shapes" \
      --no-peer --no-check "$@"
  fi 2>/dev/null | awk -v wg="$wg" '$2 ~ /^[0-9]+(x[0-9]+)*$/ { printf "wg %-5s %s\n", wg, $0 }'
done
