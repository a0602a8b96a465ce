#!/bin/sh
# run-pocl.sh - the CPU (PoCL) run behind docs/PERFORMANCE.md.
#
#   bench/run-pocl.sh [BUILD_DIR [OUT_DIR]]
#
# BUILD_DIR (default build-bench) holds a built rumus-bench.  Writes into
# OUT_DIR (default bench/results/pocl): rumus-bench.txt, rumus.json and
# rumus.csv (every op at its default shapes with the host peers),
# targets.md (bench/targets.py), sweep.txt and sweep.json (bench/sweep.sh),
# and draws docs/bandwidth-pocl.png.  Run it on an otherwise idle machine:
# the host peers and PoCL share the same cores.
set -eu
here=$(dirname "$0")
build=${1:-build-bench}
out=${2:-bench/results/pocl}
mkdir -p "$out"
"$build/rumus-bench" --json "$out/rumus.json" --csv "$out/rumus.csv" > "$out/rumus-bench.txt" || true
python3 "$here/targets.py" "$out/rumus.json" > "$out/targets.md"
"$here/sweep.sh" "$build/rumus-bench" "$out/sweep.json" 65536 > "$out/sweep.txt" || true
python3 "$here/plot_bandwidth.py" "$out/sweep.json" "$here/../docs/bandwidth-pocl.png"
