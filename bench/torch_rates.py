#!/usr/bin/env python3
"""torch_rates.py - PyTorch's own rates on a CUDA GPU for a few reference
ops (the limits rumus is compared with in docs/PERFORMANCE.md), or with
--xent its F.cross_entropy forward+backward on rumus-bench's default
shapes.  CUDA events around each call, queued behind torch.cuda._sleep as
in compare_torch.py; median of 50 (20 with --xent).

  python3 bench/torch_rates.py [--xent]
"""
import statistics
import sys

import torch
import torch.nn.functional as F


def time_us(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(reps):
        torch.cuda._sleep(5_000_000)
        s.record()
        fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return statistics.median(out)


def rates():
    n = 1 << 26
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    x = torch.rand(65536, 1024, device="cuda")
    nb = 4 * n
    cases = [
        ("copy_ (1R1W)", lambda: c.copy_(a), 2 * nb),
        ("add out-of-place (2R1W)", lambda: torch.add(a, b, out=c), 3 * nb),
        ("add_ in place alpha (axpy, 2R1W)", lambda: b.add_(a, alpha=0.5), 3 * nb),
        ("sum (1R)", lambda: torch.sum(a), nb),
        ("linalg.vector_norm (1R)", lambda: torch.linalg.vector_norm(a), nb),
        ("sum(dim=0) 65536x1024 (bias grad, 1R)", lambda: x.sum(dim=0), 65536 * 1024 * 4),
        ("gelu erf fwd", lambda: F.gelu(a), 2 * nb),
        ("gelu tanh fwd", lambda: F.gelu(a, approximate="tanh"), 2 * nb),
        ("empty-ish: add of 1 element", lambda: torch.add(a[:1], b[:1]), 12),
    ]
    for name, fn, nbytes in cases:
        us = time_us(fn, 50)
        print(f"{name:40s} {us:8.1f} us {nbytes / us / 1e3:8.1f} GB/s")


def xent():
    g = torch.Generator(device="cuda").manual_seed(1)
    for r, cols in [(128, 10), (4096, 1024), (65536, 1024), (16384, 8192), (8192, 32000)]:
        x = (torch.rand(r, cols, device="cuda", generator=g) * 8 - 4).requires_grad_()
        t = torch.randint(0, cols, (r,), device="cuda", generator=g)

        def fn():
            torch.autograd.grad(F.cross_entropy(x, t), x)
        print(f"xent_fwd_bwd {r}x{cols} torch_us {time_us(fn, 20):.1f}")


if __name__ == "__main__":
    xent() if "--xent" in sys.argv[1:] else rates()
