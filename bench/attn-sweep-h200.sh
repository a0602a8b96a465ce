#!/bin/sh
# attn-sweep-h200.sh - attention's GPU-variant tile sizes on a GPU:
# rumus-bench's four attention cases (issue 12's shapes, B = 8, H = 16,
# D = 64) under each tiling of the tuning override RUMUS_ATTENTION_TILE
# (docs/DESIGN.md), printed as one table.
#
#   bench/attn-sweep-h200.sh BUILD_DIR DEVICE [OUT_DIR [TILING...]]
#
# BUILD_DIR holds a built rumus-bench; DEVICE is its --device (an index or
# a name substring, e.g. NVIDIA); OUT_DIR (default attn-sweep) receives one
# rumus-bench JSON and table per tiling (sweep-TILING.json / .txt) and
# table.txt.  A TILING is "default" (the library's own choice: the
# tiled kernels' default tiles for F32), "off" (the work-group kernels,
# RUMUS_ATTENTION_TILE=off), "tiled" (the default tiles forced,
# RUMUS_ATTENTION_TILE=default) or
# BMxBNxRMxRN[xDC[xDCKV]] (cl/attention.cl's macros: rows a group owns,
# rows per loop step, the score block of a work-item, the head-dim chunk
# of the forward and dq, that of dk / dv).  One the library rejects (its
# rules, or more local memory than LOCAL_KB, default 48, at the shape's
# D) runs the work-group kernels, and the table marks it "(!)".  The table gives
# GFLOP/s per case and tiling and the best tiling per case.
#
# With PyTorch on CUDA importable, bench/compare_torch.py also times
# F.scaled_dot_product_attention (FP32, TF32 off) on the same cases
# (--from-json of the default run) and the table adds its GFLOP/s and each
# case's best share of it.  Variables: REPS (timed runs per case, default
# 10), SHAPES (rumus-bench's --shape list), OPS (default the four attention
# ops), LOCAL_KB, TILE_VAR (the override to set, default
# RUMUS_ATTENTION_TILE; RUMUS_ATTENTION_FWD_TILE or RUMUS_ATTENTION_BWD_TILE
# tune one side, e.g. with OPS=attention_fwd,attention_fwd_causal for the
# forward).  RUMUS_ATTENTION_PREFETCH, RUMUS_ATTENTION_DBUF and
# RUMUS_ATTENTION_MAXRREG, exported, apply to every tiling of the run (the
# local-memory check follows RUMUS_ATTENTION_DBUF).
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR DEVICE [OUT_DIR [TILING...]]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bench=$1/rumus-bench
device=$2
out=${3:-attn-sweep}
[ $# -ge 3 ] && shift 3 || shift $#
tilings=${*:-"default tiled 64x64x4x4x8x8 64x64x4x4x32x16 64x64x4x4x16x8 32x64x4x4x16x8 \
32x64x4x4x32x16 32x64x2x4x32x16 64x32x4x4x16x16 32x32x4x4x16x16 \
64x64x8x4x16x8 64x64x4x8x16x8 64x64x8x8x16x8"}
reps=${REPS:-10}
ops=${OPS:-attention_fwd,attention_fwd_causal,attention_fwd_bwd,attention_fwd_bwd_causal}
shapes=${SHAPES:-8x16x512x64,8x16x1024x64,8x16x4096x64}
var=${TILE_VAR:-RUMUS_ATTENTION_TILE}
mkdir -p "$out"

. "$here/sweep-lib.sh"
# shellcheck disable=SC2086
sweep_tilings "$bench" "$device" "$out" "$var" \
  "RUMUS_ATTENTION_TILE RUMUS_ATTENTION_FWD_TILE RUMUS_ATTENTION_BWD_TILE" \
  "$ops" "$shapes" "$reps" $tilings
sweep_torch "$here" "$bench" "$out" "$reps" "PyTorch SDPA"

LOCAL_KB=${LOCAL_KB:-48} TILE_VAR=$var python3 - "$out" $tilings <<'EOF' | tee "$out/table.txt"
import json, os, sys

out, tilings = sys.argv[1], sys.argv[2:]
local = int(os.environ.get("LOCAL_KB", "48")) * 1024

def valid(t, d, op):
    """src/ops/attention.c's tiles_ok at head dim d for the kernels op
    runs under TILE_VAR (local memory LOCAL_KB; the work-group limit of the
    device is not checked)."""
    if t in ("default", "tiled", "off"):
        return True
    try:
        f = [int(v) for v in t.lower().split("x")]
    except ValueError:
        return False
    if len(f) < 4 or len(f) > 6:
        return False
    f += [8, 8][len(f) - 4:]
    bm, bn, rm, rn, dc, dckv = f
    if min(f) < 1 or max(f) > 1024 or rm > 8 or rn > 8 or bm > 256 or bn > 256:
        return False
    if bm % rm or bn % rn or bn % dc or bn % dckv:
        return False
    ntx = bn // rn
    if (bm // rm) * ntx > 1024 or d > 128 or -(-d // ntx) > 16:
        return False
    dpt = -(-d // ntx) * ntx
    ldb = max(bm, bn) + 4
    pt = bn * (bm + 4)
    nbuf = 2 if os.environ.get("RUMUS_ATTENTION_DBUF") == "1" else 1
    half = lambda n, c: max(n * c * ldb, c * dpt)
    fwd = nbuf * half(2, dc) + pt + bm * ntx
    dq = nbuf * half(4, dc) + pt
    kv = nbuf * half(4, dckv) + pt + 2 * bn
    var = os.environ.get("TILE_VAR", "RUMUS_ATTENTION_TILE")
    need = [] if var.endswith("BWD_TILE") else [fwd]
    if "bwd" in op and not var.endswith("FWD_TILE"):
        need += [dq, kv]
    return max(need + [0]) * 4 + 16 <= local - 1024

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
w = max([14] + [len(t) + 3 for t in tilings])
head = "%-26s %-16s" % ("op", "shape") + "".join(" %*s" % (w, t) for t in tilings)
head += " %20s" % "best"
if torch:
    head += " %9s %7s" % ("sdpa", "share")
print("GFLOP/s per tiling (%s; (!) = rejected by the library at this D: "
      "the work-group kernels ran)" % os.path.basename(out))
print(head)
for op, shape in cases:
    try:
        d = int(shape.split("x")[3])
    except (IndexError, ValueError):
        d = 64
    line = "%-26s %-16s" % (op, shape)
    best, best_t = 0.0, "-"
    for t in tilings:
        r = res.get((op, shape, t))
        g = r["gflops"] if r else None
        cell = "%.0f" % g if g is not None else "-"
        if not valid(t, d, op):
            cell += "(!)"
        line += " %*s" % (w, cell)
        if g is not None and g > best and valid(t, d, op):
            best, best_t = g, t
    line += " %20s" % best_t
    tu = torch.get((op, shape))
    r = res.get((op, shape, "default"))
    if torch and r and tu:
        sd = r["flops"] / (tu * 1e3)
        line += " %9.0f %6.0f%%" % (sd, 100.0 * best / sd)
    print(line)
EOF
