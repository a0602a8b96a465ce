#!/bin/sh
# startup.sh - start-up times of a fresh context (rumus-info -s): cold (the
# driver's kernel cache empty) and warm (the same cache again), without and
# with rumus_cache_fill, for both reduction variants.
#
#   bench/startup.sh BUILD_DIR [DEVICE]
#
# The cache of each cold run is a new folder: PoCL's (POCL_CACHE_DIR) and
# NVIDIA's (CUDA_CACHE_PATH) are pointed at it.
set -eu
build=${1:?usage: bench/startup.sh BUILD_DIR [DEVICE]}
dev=${2:-}
for variant in cpu gpu; do
  for fill in "" -f; do
    cache=$(mktemp -d)
    for run in cold warm; do
      what="no fill"
      [ -n "$fill" ] && what="fill"
      printf '%s variant, %-7s %s: ' "$variant" "$what," "$run"
      RUMUS_VARIANT=$variant POCL_CACHE_DIR=$cache CUDA_CACHE_PATH=$cache \
        "$build/rumus-info" ${dev:+-d "$dev"} -s $fill | tail -n 1 |
        sed 's/^ *with the fill: *//; s/^ *without it: *//'
    done
    rm -rf "$cache"
  done
done
