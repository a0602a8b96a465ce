#!/usr/bin/env python3
"""compare_torch.py - rumus (OpenCL) against PyTorch (CUDA) on one GPU.

    python3 bench/compare_torch.py RUMUS_BENCH [--out DIR] [--reps N]
        [--warmup N] [--from-json FILE] [-- RUMUS_BENCH_ARGS...]

Runs RUMUS_BENCH (the rumus-bench program) with --json, then times the
PyTorch counterpart of every case it measured, on the same shapes, on the
CUDA device, with CUDA events (median of N runs after a warm-up).  rumus's
times are device times from OpenCL profiling; PyTorch's are CUDA event
times around the call, so they include the gaps between the kernels of an
op (which matter only for the smallest shapes).  The counterparts:

  xent_fwd_bwd     F.cross_entropy forward + backward (autograd.grad)
  softmax_fwd      torch.softmax          softmax_bwd      autograd of it
  log_softmax_fwd  F.log_softmax          log_softmax_bwd  autograd of it
  gemm             torch.mm (TF32 off: cuBLAS FP32), transposes as views
  gemm_bias        torch.addmm(bias, A, B): the product and its bias row
  bias_add         y.add_(bias)           bias_grad        dy.sum(0)
  add, mul         torch.add / torch.mul into a preallocated out
  axpy             y.add_(x, alpha=0.5)
  relu_fwd/bwd     F.relu and autograd    gelu_fwd/bwd     F.gelu and autograd
  sgd_momentum     torch.optim.SGD(momentum=0.9, weight_decay=1e-4, fused)
  adamw            torch.optim.AdamW(fused=True) step
  sum_squares      torch.linalg.vector_norm (one reduction kernel)
  conv2d_fwd       F.conv2d with the bias, conv2d_bwd_data / _weight
                   nn.grad.conv2d_input / conv2d_weight, with rumus-bench's
                   stride, padding and groups (cuDNN, TF32 off)
  maxpool2d_fwd    F.max_pool2d(return_indices=True)   _bwd  autograd of it
  avgpool2d_fwd    F.avg_pool2d           avgpool2d_bwd  autograd of it
  adaptive_avgpool2d_fwd  F.adaptive_avg_pool2d          _bwd  autograd of it
  batchnorm2d_fwd  F.batch_norm(training=True), F32 gamma / beta / running
                   statistics; batchnorm2d_bwd  autograd of it (dx, dgamma,
                   dbeta)
  channel_bias_add x + b[:, None, None]   channel_bias_grad  dy.sum((0, 2, 3))
  dropout_fwd      F.dropout(p=0.5)       dropout_bwd  autograd of it (reads
                   the stored mask)
  copy             dst.copy_(src), the same bytes as rumus-bench's copy
  attention_fwd[_causal]      F.scaled_dot_product_attention on [B, H, T, D]
                   (is_causal for _causal), in the storage type (FP32 keeps
                   PyTorch off its half-precision flash kernels); the
                   backend its dispatcher picks is named in the call column
  attention_fwd_bwd[_causal]  the same forward, then autograd.grad to q, k, v

rumus-bench runs once per op, each op in its own process (bench/isolate.py:
a kernel that faults on the GPU then spoils only its own op), unless
--single.  Writes into DIR (default .): rumus-bench.txt (its tables), rumus.json,
compare.md (the table of times and ratios rumus time / PyTorch time, and
the targets judged by bench/targets.py) and compare.json; prints
compare.md.  --from-json reuses a rumus-bench JSON instead of running it.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import isolate  # noqa: E402
import targets  # noqa: E402


# Cycles of torch.cuda._sleep before each timed call (about 2.5 ms on an
# H200): the GPU is busy while the host runs PyTorch's Python, dispatcher
# and autograd code, so the events time the GPU's work, not host overhead.
SLEEP_CYCLES = 5_000_000

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def cuda_time_us(fn, reps, warmup, budget_s=2.0):
    """Median CUDA-event time of fn() in microseconds, and the reps used."""
    for _ in range(max(warmup, 1)):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once():
        torch.cuda._sleep(SLEEP_CYCLES)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1e3

    one = once()
    reps = max(5, min(reps, int(budget_s * 1e6 / max(one, 1.0))))
    return statistics.median(once() for _ in range(reps)), reps


def sdpa_backend(q, k, v, causal):
    """The backend F.scaled_dot_product_attention picks for these inputs."""
    try:
        i = torch._fused_sdp_choice(q, k, v, None, 0.0, causal)
        return torch.nn.attention.SDPBackend(i).name
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return "default dispatch"


def make_case(rec, dev):
    """(callable, description) for one rumus-bench record, or None."""
    op, d = rec["op"], rec["dims"]
    g = torch.Generator(device=dev).manual_seed(1)
    # The storage of rumus-bench --dtype: the same type on both sides.
    dt = DTYPES[rec.get("dtype", "f32")]

    def rand(*shape, lo=-1.0, hi=1.0):
        return (torch.rand(*shape, device=dev, generator=g) * (hi - lo) + lo).to(dt)

    def rows_cols():
        cols = d[-1]
        rows = 1
        for x in d[:-1]:
            rows *= x
        return rows, cols

    n = 1
    for x in d:
        n *= x
    if op == "xent_fwd_bwd":
        r, c = rows_cols()
        x = rand(r, c, lo=-4, hi=4).requires_grad_()
        t = torch.randint(0, c, (r,), device=dev, generator=g)

        def fn():
            loss = F.cross_entropy(x, t)
            torch.autograd.grad(loss, x)
        return fn, "F.cross_entropy fwd+bwd"
    if op in ("softmax_fwd", "log_softmax_fwd"):
        r, c = rows_cols()
        x = rand(r, c, lo=-4, hi=4)
        f = torch.softmax if op == "softmax_fwd" else F.log_softmax
        return (lambda: f(x, -1)), f"{'torch.softmax' if op == 'softmax_fwd' else 'F.log_softmax'}"
    if op in ("softmax_bwd", "log_softmax_bwd"):
        r, c = rows_cols()
        x = rand(r, c, lo=-4, hi=4).requires_grad_()
        y = torch.softmax(x, -1) if op == "softmax_bwd" else F.log_softmax(x, -1)
        dy = rand(r, c)
        return (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), "autograd.grad"
    if op in ("gemm", "gemm_bias"):
        m, nn_, k = d
        a = rand(k, m).t() if rec["trans_a"] else rand(m, k)
        b = rand(nn_, k).t() if rec["trans_b"] else rand(k, nn_)
        out = torch.empty(m, nn_, device=dev, dtype=dt)
        kind = 'FP32' if dt == torch.float32 else str(dt)[6:]
        if op == "gemm_bias":  # F.linear's product and bias, one cuBLASLt call
            bias = rand(nn_)
            return (lambda: torch.addmm(bias, a, b, out=out)), f"torch.addmm {kind}"
        return (lambda: torch.mm(a, b, out=out)), f"torch.mm {kind}"
    if op == "bias_add":
        r, c = rows_cols()
        y, b = rand(r, c), rand(c)
        return (lambda: y.add_(b)), "y.add_(bias)"
    if op == "bias_grad":
        r, c = rows_cols()
        dy, out = rand(r, c), torch.empty(c, device=dev, dtype=dt)
        return (lambda: torch.sum(dy, 0, out=out)), "dy.sum(0)"
    if op in ("add", "mul"):
        a, b, out = rand(n), rand(n), torch.empty(n, device=dev, dtype=dt)
        f = torch.add if op == "add" else torch.mul
        return (lambda: f(a, b, out=out)), f"torch.{op}(out=)"
    if op == "axpy":
        x, y = rand(n), rand(n)
        return (lambda: y.add_(x, alpha=0.5)), "y.add_(x, alpha)"
    if op in ("relu_fwd", "gelu_fwd"):
        x = rand(n, lo=-3, hi=3)
        f = F.relu if op == "relu_fwd" else F.gelu
        return (lambda: f(x)), f"F.{op[:4]}"
    if op in ("relu_bwd", "gelu_bwd"):
        x = rand(n, lo=-3, hi=3).requires_grad_()
        y = (F.relu if op == "relu_bwd" else F.gelu)(x)
        dy = rand(n)
        return (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), "autograd.grad"
    if op in ("sgd_momentum", "adamw"):
        p = torch.nn.Parameter(rand(n))
        p.grad = rand(n)
        if op == "adamw":
            opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.01, fused=True)
            what = "AdamW(fused=True).step"
        else:
            try:
                opt = torch.optim.SGD([p], lr=0.01, momentum=0.9, weight_decay=1e-4, fused=True)
                what = "SGD(fused=True).step"
            except (TypeError, RuntimeError):
                opt = torch.optim.SGD([p], lr=0.01, momentum=0.9, weight_decay=1e-4, foreach=True)
                what = "SGD(foreach=True).step"
        opt.step()  # creates the state: later steps are the steady state
        return opt.step, what
    if op.startswith("conv2d_"):
        # rumus-bench's NxCxOCxS/kKsSpPgG: x [N, C, S, S], w [OC, C / G, K, K],
        # the geometry as rumus-bench used it (its JSON's "geom").
        nb, ci, co, sz = d
        gm = rec.get("geom") or {"k": 3, "s": 1, "p": 1, "g": 1}
        k, st, pd, gr = gm["k"], gm["s"], gm["p"], gm["g"]
        osz = (sz + 2 * pd - k) // st + 1
        kw = dict(stride=st, padding=pd, groups=gr)
        x, w, dy = rand(nb, ci, sz, sz), rand(co, ci // gr, k, k), rand(nb, co, osz, osz)
        if op == "conv2d_fwd":
            b = rand(co)  # rumus's forward adds the bias in the same kernel
            return (lambda: F.conv2d(x, w, b, **kw)), "F.conv2d + bias (cuDNN)"
        if op == "conv2d_bwd_data":
            return (lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, **kw)), \
                "nn.grad.conv2d_input (cuDNN)"
        return (lambda: torch.nn.grad.conv2d_weight(x, w.shape, dy, **kw)), \
            "nn.grad.conv2d_weight (cuDNN)"
    if op.endswith("pool2d_fwd") or op.endswith("pool2d_bwd"):
        # NxCxS[xW] with the geometry rumus-bench used: kernel k, stride s,
        # padding p (max / avg), or output o x o (adaptive).
        nb, ch, h = d[:3]
        wd = d[3] if len(d) == 4 else h
        gm = rec.get("geom") or {}
        if op.startswith("adaptive"):
            o = gm.get("o", 1)
            f, what = (lambda t: F.adaptive_avg_pool2d(t, o)), "F.adaptive_avg_pool2d"
        else:
            k, st, pd = gm.get("k", 2), gm.get("s", gm.get("k", 2)), gm.get("p", 0)
            if op.startswith("max"):
                f = lambda t: F.max_pool2d(t, k, st, pd, return_indices=True)  # noqa: E731
                what = "F.max_pool2d(return_indices=True)"
            else:
                f, what = (lambda t: F.avg_pool2d(t, k, st, pd)), "F.avg_pool2d"
        if op.endswith("_fwd"):
            x = rand(nb, ch, h, wd)
            return (lambda: f(x)), what
        x = rand(nb, ch, h, wd).requires_grad_()
        y = f(x)
        y = y[0] if isinstance(y, tuple) else y
        dy = rand(*y.shape)
        return (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), f"autograd of {what}"
    if op in ("batchnorm2d_fwd", "batchnorm2d_bwd", "channel_bias_add", "channel_bias_grad"):
        nb, ch, h = d[:3]
        wd = d[3] if len(d) == 4 else h
        # Batch norm's per-channel tensors stay F32 (rumus's rule, and
        # PyTorch's under autocast).
        f32 = dict(device=dev, dtype=torch.float32)
        if op == "channel_bias_add":
            x, b = rand(nb, ch, h, wd), rand(ch)
            out = torch.empty(nb, ch, h, wd, device=dev, dtype=dt)
            bv = b.view(1, ch, 1, 1)
            return (lambda: torch.add(x, bv, out=out)), "torch.add(x, b[:, None, None], out=)"
        if op == "channel_bias_grad":
            dy = rand(nb, ch, h, wd)
            return (lambda: dy.sum(dim=(0, 2, 3))), "dy.sum((0, 2, 3))"
        gamma = torch.rand(ch, **f32) + 0.5
        beta = torch.rand(ch, **f32) - 0.5
        rm, rv = torch.zeros(ch, **f32), torch.ones(ch, **f32)
        x = rand(nb, ch, h, wd, lo=-1.0, hi=3.0)
        if op == "batchnorm2d_fwd":
            return (lambda: F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=0.1,
                                         eps=1e-5)), "F.batch_norm(training=True)"
        x.requires_grad_()
        gamma.requires_grad_()
        beta.requires_grad_()
        y = F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=0.1, eps=1e-5)
        dy = rand(nb, ch, h, wd)
        return (lambda: torch.autograd.grad(y, (x, gamma, beta), dy, retain_graph=True)), \
            "autograd of F.batch_norm(training=True)"
    if op == "dropout_fwd":
        x = rand(n)
        return (lambda: F.dropout(x, 0.5, training=True)), "F.dropout(p=0.5)"
    if op == "dropout_bwd":
        # PyTorch's backward reads the mask its forward stored (1 byte an
        # element); rumus's draws it again from the seed.
        x = rand(n).requires_grad_()
        y = F.dropout(x, 0.5, training=True)
        dy = rand(n)
        return (lambda: torch.autograd.grad(y, x, dy, retain_graph=True)), "autograd of F.dropout"
    if op.startswith("attention_"):
        b, h, t, dh = d
        causal = "causal" in op
        bwd = "bwd" in op
        q, k, v = rand(b, h, t, dh, lo=-2, hi=2), rand(b, h, t, dh, lo=-2, hi=2), rand(b, h, t, dh)
        if bwd:
            for x in (q, k, v):
                x.requires_grad_()
        backend = sdpa_backend(q, k, v, causal)
        if not bwd:
            return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)), \
                f"F.scaled_dot_product_attention ({backend})"
        dout = rand(b, h, t, dh)

        def fn():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.autograd.grad(o, (q, k, v), dout)
        return fn, f"SDPA + autograd.grad ({backend})"
    if op == "sum_squares":
        x = rand(n)
        return (lambda: torch.linalg.vector_norm(x)), "linalg.vector_norm"
    return make_tensorops_case(op, d, rand, dev, dt) or make_norm_embed_case(op, d, rand, dev, dt)


def make_norm_embed_case(op, d, rand, dev, dt):
    """Layer norm, RMS norm (F.layer_norm / F.rms_norm over the last axis,
    affine) and embedding (F.embedding with rumus-bench's skewed ids: id =
    floor(V u^4)), forward or forward's autograd."""
    if op.startswith(("layernorm_", "rmsnorm_")) and len(d) == 2:
        r, c = d
        x = rand(r, c, lo=-1.0, hi=3.0)
        g, b = rand(c, lo=0.5, hi=1.5), rand(c, lo=-0.5, hi=0.5)
        if op.startswith("layernorm_"):
            f, what = (lambda t, w: F.layer_norm(t, (c,), w, b, 1e-5)), "F.layer_norm"
        else:
            f, what = (lambda t, w: F.rms_norm(t, (c,), w, 1e-5)), "F.rms_norm"
        if op.endswith("_fwd"):
            return (lambda: f(x, g)), what
        x.requires_grad_()
        g.requires_grad_()
        y = f(x, g)
        dy = rand(r, c)
        return (lambda: torch.autograd.grad(y, (x, g), dy, retain_graph=True)), f"autograd of {what}"
    if op.startswith("embedding_") and len(d) == 3:
        p, v, dim = d
        u = torch.rand(p, device=dev, dtype=torch.float64)
        ids = torch.clamp((v * u ** 4).floor().long(), max=v - 1)
        w = rand(v, dim)
        if op == "embedding_fwd":
            return (lambda: F.embedding(ids, w)), "F.embedding"
        w.requires_grad_()
        y = F.embedding(ids, w)
        dy = rand(p, dim)
        return (lambda: torch.autograd.grad(y, w, dy, retain_graph=True)), "autograd of F.embedding"
    return None


def make_tensorops_case(op, d, rand, dev, dt):
    """The layout ops of rumus-bench (permute_0213, transpose,
    broadcast_add, reduce_sum0/1), each written into a preallocated output
    as rumus writes into its own."""
    if op == "permute_0213":
        b, t, h, hd = d
        x = rand(b, t, h, hd)
        out = torch.empty(b, h, t, hd, device=dev, dtype=dt)
        return (lambda: out.copy_(x.permute(0, 2, 1, 3))), "out.copy_(x.permute(0, 2, 1, 3))"
    if len(d) != 2:
        return None
    r, c = d
    if op == "transpose":
        x = rand(r, c)
        out = torch.empty(c, r, device=dev, dtype=dt)
        return (lambda: out.copy_(x.t())), "out.copy_(x.t())"
    if op == "broadcast_add":
        a, b = rand(r, c), rand(c)
        out = torch.empty(r, c, device=dev, dtype=dt)
        return (lambda: torch.add(a, b, out=out)), "torch.add(a, b, out=)"
    if op in ("reduce_sum0", "reduce_sum1"):
        x = rand(r, c)
        dim = 0 if op == "reduce_sum0" else 1
        out = torch.empty(c if dim == 0 else r, device=dev, dtype=dt)
        return (lambda: torch.sum(x, dim, out=out)), f"torch.sum(x, {dim}, out=)"
    return None


def fmt_rate(rec, us):
    if not rec["memory_bound"]:  # gemm and conv2d: flops
        return f'{rec["flops"] / us / 1e3:.0f} GFLOP/s'
    return f'{rec["bytes"] / us / 1e3:.0f} GB/s'


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rumus_bench", help="path of the rumus-bench program")
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--from-json", help="use this rumus-bench JSON instead of running it")
    ap.add_argument("--single", action="store_true",
                    help="one rumus-bench process for every op (default: one per op, bench/isolate.py)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rjson = os.path.join(a.out, "rumus.json")
    if a.from_json:
        rjson = a.from_json
    elif a.single:
        cmd = [a.rumus_bench, "--json", rjson] + extra
        print("+ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        with open(os.path.join(a.out, "rumus-bench.txt"), "w") as f:
            f.write(p.stdout)
        print(p.stdout, flush=True)
        if p.returncode not in (0, 1) or not os.path.exists(rjson):
            print(f"rumus-bench failed with status {p.returncode}", file=sys.stderr)
            return 1
    else:
        isolate.run_isolated(a.rumus_bench, extra, rjson, os.path.join(a.out, "rumus-bench.txt"))
    with open(rjson) as f:
        run = json.load(f)

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    # Half GEMMs accumulate in float, as rumus's do (cuBLAS still picks its
    # tensor-core kernels for 16-bit inputs: the ratio says so).
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    dev = torch.device("cuda")
    gpu = torch.cuda.get_device_name(dev)

    # Copy bandwidth: the same bytes as rumus-bench's copy kernel.
    nf = run["copy_bytes"] // 4
    src, dst = torch.rand(nf, device=dev), torch.empty(nf, device=dev)
    copy_us, _ = cuda_time_us(lambda: dst.copy_(src), a.reps, a.warmup)
    torch_copy_gbs = 2 * run["copy_bytes"] / copy_us / 1e3
    del src, dst
    torch.cuda.empty_cache()

    rows = []
    for rec in run["results"]:
        row = {"op": rec["op"], "shape": rec["shape"], "torch_us": None, "torch_call": None}
        case = make_case(rec, dev) if rec.get("dims") else None
        if case is not None:
            fn, what = case
            try:
                us, reps = cuda_time_us(fn, max(a.reps, rec.get("reps") or 0), a.warmup)
                row.update(torch_us=us, torch_call=what, torch_reps=reps)
            except RuntimeError as e:  # out of memory, unsupported option
                row["torch_call"] = f"failed: {str(e).splitlines()[0]}"
            del fn
        rows.append(row)
        torch.cuda.empty_cache()
        print(f'  torch {rec["op"]} {rec["shape"]}: {row["torch_us"]}', file=sys.stderr, flush=True)

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md = [f"## rumus (OpenCL) against PyTorch (CUDA) on {gpu}", "",
          f"- run: {date}; rumus-bench {run['version']} at {run['date']}; PyTorch {torch.__version__}, "
          f"CUDA {torch.version.cuda}",
          f"- OpenCL device: {run['device']} ({run['variant']} variant)",
          f"- storage: {run['results'][0].get('dtype', 'f32') if run['results'] else 'f32'} on both sides "
          "(rumus-bench --dtype; ops without 16-bit storage in F32)",
          f"- copy, 2 x {run['copy_bytes'] / 2**20:.0f} MiB: OpenCL copy kernel {run['copy_gbs']:.0f} GB/s"
          + (f" (median of {len(run['copy_runs_gbs'])} processes, "
             f"{min(run['copy_runs_gbs']):.0f} to {max(run['copy_runs_gbs']):.0f})" if run.get("copy_runs_gbs") else "")
          + f"; PyTorch `copy_` {torch_copy_gbs:.0f} GB/s",
          "- times: median; rumus: OpenCL profiling (device time of the op's kernels); PyTorch: CUDA events "
          "around the call, queued behind a 2.5 ms `torch.cuda._sleep` so that host overhead is hidden; "
          "ratio = rumus time / PyTorch time (below 1: rumus is faster); % = of the same side's copy bandwidth",
          ""]
    failed = [r for r in run["results"] if r["status"] == "failed"]
    for r in failed:
        md.append(f'- rumus FAILED {r["op"]} {r["shape"]}: {r.get("note", "")}')
    md += ["",
          "| op | shape | rumus us | PyTorch us | rumus / PyTorch | rumus rate | PyTorch rate | PyTorch call |",
          "|---|---|---:|---:|---:|---:|---:|---|"]
    for rec, row in zip(run["results"], rows):
        tu = row["torch_us"]
        if rec["status"] != "ok":
            ru, ratio, rrate = ("n/a" if rec["status"] == "n/a" else "FAILED"), "-", "-"
        else:
            ru = f'{rec["rumus_us"]:.1f}'
            ratio = f'{rec["rumus_us"] / tu:.2f}' if tu else "-"
            rrate = fmt_rate(rec, rec["rumus_us"])
            if rec["memory_bound"]:
                rrate += f' ({rec["pct_copy"]:.0f}%)'
        trate = "-"
        if tu:
            trate = fmt_rate(rec, tu)
            if rec["memory_bound"]:
                trate += f' ({100 * rec["bytes"] / tu / 1e3 / torch_copy_gbs:.0f}%)'
        md.append(f'| {rec["op"]} | {rec["shape"]} | {ru} | {f"{tu:.1f}" if tu else "-"} | {ratio} | '
                  f'{rrate} | {trate} | {row["torch_call"] or "-"} |')
    md += ["", "### Targets (H200)", "", targets.markdown(targets.gpu_targets(run, rows)), ""]
    text = "\n".join(md)
    with open(os.path.join(a.out, "compare.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "compare.json"), "w") as f:
        json.dump({"rumus": run, "torch": {"date": date, "gpu": gpu, "version": torch.__version__,
                                           "cuda": torch.version.cuda, "copy_gbs": torch_copy_gbs,
                                           "rows": rows}}, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
