#!/bin/sh
# sweep.sh - every memory-bound op of rumus-bench over a range of sizes, for
# bench/plot_bandwidth.py.
#
#   bench/sweep.sh RUMUS_BENCH OUT_JSON [MAX_ROWS [RUMUS_BENCH_ARGS...]]
#
# Shapes Rx1024 for R = 16, 64, 256, ... up to MAX_ROWS (default 65536, a
# 256 MiB tensor; 262144 on a GPU with room for 1 GiB tensors).  The
# element-wise ops read the shape as R * 1024 elements.  No peers and no
# check: only the device times matter for the plot.  Each op runs in its own
# process (bench/isolate.py); the tables go to stdout.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 RUMUS_BENCH OUT_JSON [MAX_ROWS [RUMUS_BENCH_ARGS...]]" >&2
  exit 2
fi
here=$(dirname "$0")
bench=$1
out=$2
max=${3:-65536}
if [ $# -ge 3 ]; then shift 3; else shift $#; fi
shapes=""
r=16
while [ "$r" -le "$max" ]; do
  shapes="$shapes${shapes:+,}${r}x1024"
  r=$((r * 4))
done
ops=xent_fwd_bwd,softmax_fwd,log_softmax_fwd,softmax_bwd,log_softmax_bwd
ops=$ops,bias_add,bias_grad,add,mul,axpy,relu_fwd,relu_bwd,gelu_fwd,gelu_bwd
ops=$ops,sgd_momentum,adamw,sum_squares
exec python3 "$here/isolate.py" "$bench" "$out" -- --ops "$ops" --shape "$shapes" \
  --no-peer --no-check "$@"
