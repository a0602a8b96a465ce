#!/bin/sh
# conv-sweep-h200.sh - conv2d's GPU-variant tile sizes on a GPU: rumus-bench's
# conv2d cases (issue 11's shapes) under each tiling of the tuning override
# RUMUS_CONV2D_TILE (docs/DESIGN.md), printed as one table.
#
#   bench/conv-sweep-h200.sh BUILD_DIR DEVICE [OUT_DIR [TILING...]]
#
# BUILD_DIR holds a built rumus-bench; DEVICE is its --device (an index or
# a name substring, e.g. NVIDIA); OUT_DIR (default conv-sweep) receives one
# rumus-bench JSON and table per tiling (sweep-TILING.json / .txt) and
# table.txt.  A TILING is "default" (the library's own choice, by the
# channels per group) or TMxTNxRMxRN[xTK] (cl/conv.cl's macros; one the
# library rejects runs the defaults, and the table marks it).  The table
# gives GFLOP/s per case and tiling and the best tiling per case.
#
# With PyTorch on CUDA importable, bench/compare_torch.py also times cuDNN
# (TF32 off) on the same cases (--from-json of the default run) and the
# table adds cuDNN's GFLOP/s and each case's best share of it.  Variables:
# REPS (timed runs per case, default 10), SHAPES (rumus-bench's --shape
# list), OPS (default the three conv2d ops), TILE_VAR (the override to
# set, default RUMUS_CONV2D_TILE; e.g. RUMUS_CONV2D_BWD_WEIGHT_TILE).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR DEVICE [OUT_DIR [TILING...]]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bench=$1/rumus-bench
device=$2
out=${3:-conv-sweep}
[ $# -ge 3 ] && shift 3 || shift $#
tilings=${*:-"default 64x64x4x4x16 64x64x4x4x8 64x64x4x4x32 32x64x4x4x16 \
128x64x8x4x16 64x128x4x8x8 64x64x8x8x16 128x128x8x8x8 128x128x8x8x16"}
reps=${REPS:-10}
ops=${OPS:-conv2d_fwd,conv2d_bwd_data,conv2d_bwd_weight}
shapes=${SHAPES:-64x32x64x14,64x64x64x56,64x128x128x28,64x256x256x14,64x3x64x224/k7s2p3,64x256x256x28/g256}
var=${TILE_VAR:-RUMUS_CONV2D_TILE}
mkdir -p "$out"

. "$here/sweep-lib.sh"
# shellcheck disable=SC2086
sweep_tilings "$bench" "$device" "$out" "$var" \
  "RUMUS_CONV2D_TILE RUMUS_CONV2D_FWD_TILE RUMUS_CONV2D_BWD_DATA_TILE RUMUS_CONV2D_BWD_WEIGHT_TILE" \
  "$ops" "$shapes" "$reps" $tilings
sweep_torch "$here" "$bench" "$out" "$reps" cuDNN

python3 - "$out" $tilings <<'EOF' | tee "$out/table.txt"
import json, os, sys

out, tilings = sys.argv[1], sys.argv[2:]

def valid(t):
    """The rule of src/ops/conv.c's tiles_ok, less the device's limits."""
    if t == "default":
        return True
    try:
        f = [int(v) for v in t.lower().split("x")]
    except ValueError:
        return False
    if len(f) not in (4, 5):
        return False
    tm, tn, rm, rn = f[:4]
    tk = f[4] if len(f) == 5 else 16
    if min(tm, tn, rm, rn, tk) < 1 or max(rm, rn) > 16 or rm % 4 or rn % 4:
        return False
    if tm % rm or tn % rn:
        return False
    wgs = (tm // rm) * (tn // rn)
    if wgs % tk or wgs % tn:
        return False
    return not (tm % (wgs // tk) or tn % (wgs // tk) or tk % (wgs // tn))

res = {}
for t in tilings:
    try:
        with open(os.path.join(out, "sweep-%s.json" % t)) as f:
            for r in json.load(f)["results"]:
                if r.get("status") == "ok":
                    res[(r["op"], r["shape"], t)] = r
    except (OSError, ValueError):
        pass
torch = {}
try:
    with open(os.path.join(out, "torch", "compare.json")) as f:
        for r in json.load(f)["torch"]["rows"]:
            if r.get("torch_us"):
                torch[(r["op"], r["shape"])] = r["torch_us"]
except (OSError, ValueError, KeyError):
    pass
cases = []
for (op, shape, _t) in res:
    if (op, shape) not in cases:
        cases.append((op, shape))
names = [t if valid(t) else t + "(!)" for t in tilings]
w = max([14] + [len(n) for n in names])
head = "%-18s %-22s" % ("op", "shape") + "".join(" %*s" % (w, n) for n in names)
head += " %16s" % "best"
if torch:
    head += " %9s %7s" % ("cudnn", "share")
print("GFLOP/s per tiling (%s; (!) = rejected by the library: the "
      "defaults ran)" % os.path.basename(out))
print(head)
for op, shape in cases:
    line = "%-18s %-22s" % (op, shape)
    best, best_t = 0.0, "-"
    for t in tilings:
        r = res.get((op, shape, t))
        g = r["gflops"] if r else None
        line += " %*s" % (w, "%.0f" % g if g is not None else "-")
        if g is not None and g > best and valid(t):
            best, best_t = g, t
    line += " %16s" % best_t
    tu = torch.get((op, shape))
    r = res.get((op, shape, "default"))
    if torch and r and tu:
        cud = r["flops"] / (tu * 1e3)
        line += " %9.0f %6.0f%%" % (cud, 100.0 * best / cud)
    print(line)
EOF
