#!/bin/sh
# gemm-sweep-h200.sh - the GPU variant's GEMM tiles on a GPU: rumus-bench's
# gemm on a list of shapes under each tiling of the tuning override
# RUMUS_GEMM_TILE (docs/DESIGN.md, "GEMM"), printed as one table.
#
#   bench/gemm-sweep-h200.sh BUILD_DIR DEVICE [OUT_DIR [TILING...]]
#
# BUILD_DIR holds a built rumus-bench; DEVICE is its --device; OUT_DIR
# (default gemm-sweep) receives one rumus-bench JSON and table per tiling
# (sweep-TILING.json / .txt) and table.txt.  A TILING is "default" (the
# library's choice, split-K included) or TSMxTSNxTSKxWPTMxWPTN[xDBUF]
# (cl/gemm.cl's macros); one the library rejects runs its default tiles and
# the table marks it "(!)".  SHAPES (rumus-bench's MxNxK[:TT] list; default
# the GPT's linear layers at the h200 preset: 16384 tokens, width 384) and
# REPS (default 10) are variables.  With PyTorch on CUDA importable,
# compare_torch.py times torch.mm (TF32 off) on the default run's cases
# and the table adds its GFLOP/s and each case's best share of it.
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR DEVICE [OUT_DIR [TILING...]]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bench=$1/rumus-bench
device=$2
out=${3:-gemm-sweep}
[ $# -ge 3 ] && shift 3 || shift $#
tilings=${*:-default 128x128x8x8x8 128x128x16x8x8 128x64x16x8x4 64x128x16x4x8}
reps=${REPS:-10}
shapes=${SHAPES:-16384x1152x384:nt,1152x384x16384:tn,16384x384x1152:nn,16384x384x384:nt,384x384x16384:tn,16384x1536x384:nt,1536x384x16384:tn,16384x384x1536:nt,384x1536x16384:tn,16384x384x1536:nn}
mkdir -p "$out"
case " $tilings " in *" default "*) ;; *) tilings="default $tilings" ;; esac

. "$here/sweep-lib.sh"
# shellcheck disable=SC2086
sweep_tilings "$bench" "$device" "$out" RUMUS_GEMM_TILE RUMUS_GEMM_TILE gemm \
  "$shapes" "$reps" $tilings
sweep_torch "$here" "$bench" "$out" "$reps" cuBLAS

python3 - "$out" $tilings <<'PY' | tee "$out/table.txt"
import json, os, sys

out, tilings = sys.argv[1], sys.argv[2:]

def valid(t):
    """src/ops/gemm.c's tiles_from_env, less the device's limits."""
    if t == "default":
        return True
    try:
        f = [int(v) for v in t.lower().split("x")]
    except ValueError:
        return False
    if len(f) not in (5, 6):
        return False
    tsm, tsn, tsk, wm, wn = f[:5]
    dbuf = f[5] if len(f) == 6 else 1
    if wm % 4 or wn % 4 or tsk % 4 or tsm % wm or tsn % wn or dbuf not in (1, 2):
        return False
    wgs = (tsm // wm) * (tsn // wn)
    return (tsm * tsk) % (4 * wgs) == 0 and (tsn * tsk) % (4 * wgs) == 0

res = {}
for t in tilings:
    try:
        with open(os.path.join(out, "sweep-%s.json" % t)) as f:
            for r in json.load(f)["results"]:
                if r.get("status") == "ok":
                    res[(r["shape"], t)] = r
    except (OSError, ValueError):
        pass
torch = {}
try:
    with open(os.path.join(out, "torch", "compare.json")) as f:
        for r in json.load(f)["torch"]["rows"]:
            if r.get("torch_us"):
                torch[r["shape"]] = r["torch_us"]
except (OSError, ValueError, KeyError):
    pass
shapes = []
for (shape, _t) in res:
    if shape not in shapes:
        shapes.append(shape)
names = [t if valid(t) else t + "(!)" for t in tilings]
w = max([14] + [len(n) for n in names])
head = "%-22s" % "shape" + "".join(" %*s" % (w, n) for n in names) + " %16s" % "best"
if torch:
    head += " %9s %7s" % ("cublas", "share")
print("GFLOP/s per tiling (%s; (!) = rejected by the library: the "
      "defaults ran)" % os.path.basename(out))
print(head)
for shape in shapes:
    line = "%-22s" % shape
    best, best_t = 0.0, "-"
    for t in tilings:
        r = res.get((shape, t))
        g = r["gflops"] if r else None
        line += " %*s" % (w, "%.0f" % g if g is not None else "-")
        if g is not None and g > best and valid(t):
            best, best_t = g, t
    line += " %16s" % best_t
    tu = torch.get(shape)
    r = res.get((shape, "default"))
    if torch and r and tu:
        cub = r["flops"] / (tu * 1e3)
        line += " %9.0f %6.0f%%" % (cub, 100.0 * best / cub)
    print(line)
PY
