#!/bin/sh
# run-h200.sh - the GPU run behind docs/PERFORMANCE.md, on a machine with an
# NVIDIA GPU, its OpenCL driver reachable, and PyTorch with CUDA.
#
#   bench/run-h200.sh BUILD_DIR OUT_DIR [MAX_SWEEP_ROWS]
#
# BUILD_DIR holds a built rumus-bench.  Writes into OUT_DIR: nvidia-smi.txt;
# rumus-bench.txt, rumus.json, compare.md and compare.json from
# bench/compare_torch.py (every op at its default shapes, rumus on OpenCL
# and PyTorch on CUDA); sweep.txt and sweep.json from bench/sweep.sh (the
# memory-bound ops over sizes up to MAX_SWEEP_ROWS x 1024, default 262144).
set -u
here=$(dirname "$0")
build=$1
out=$2
max=${3:-262144}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total \
  --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 "$here/compare_torch.py" "$build/rumus-bench" --out "$out" -- --device NVIDIA
"$here/sweep.sh" "$build/rumus-bench" "$out/sweep.json" "$max" --device NVIDIA > "$out/sweep.txt"
