#!/usr/bin/env python3
"""train_gpt_torch.py - rumus-train's GPT (--model gpt) in PyTorch eager, for
the step-time and loss comparison of docs/TRAINING.md and PERFORMANCE.md:

    python3 bench/train_gpt_torch.py [--preset pocl|h200] [--steps N]
        [--layers N --heads N --width N --context N --batch-size N]
        [--lr X] [--warmup N] [--eval-batches N] [--untied] [--seed N]
        [--data DIR] [--device cuda] [--precision f32|bf16|f16] [--load FILE]

The same model (nanoGPT's GPT with bias = True, dropout 0: token and
position embeddings, pre-norm blocks of causal multi-head attention
through F.scaled_dot_product_attention and a GELU (erf) MLP, a final layer
norm, the output layer tied to the token embedding unless --untied), the
same data (the fortune files of DIR without .dat / .u8, in name order,
concatenated; the vocabulary is the distinct bytes in byte order; 90/10
split by position), the same batches (windows at starts drawn by
rumus-train's splitmix64 with Lemire's rejection, seed ^ the batch salt),
the same optimizer (AdamW betas (0.9, 0.99), eps 1e-8, weight decay 0.1 on
the 2-D tensors only; gradient clipping to norm 1), the same schedule
(linear warm-up, cosine to lr / 10) and the same evaluation windows
(eval-batches x batch evenly spaced windows per split).  The
initialisation follows the same rule (N(0, 0.02), c_proj weights
N(0, 0.02 / sqrt(2 L))) from torch's generator, not the same numbers.
TF32 is off: FP32 arithmetic, as rumus-train's.  Prints the mean step
time (CUDA-synchronised) over the steps after the first 10 (which are part
of the run and of its schedule), and the train / validation loss at the
end.

--precision bf16|f16 runs the forward under torch.autocast (F32 master
weights; f16 with torch.amp.GradScaler), as rumus-train --precision.

--load FILE evaluates a file written by `rumus-train --model gpt --save`
(its tensors are nanoGPT's state_dict names) on the same windows: the two
libraries agree on the model when the losses match rumus-train's
--eval-only.
"""
import argparse
import json
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DATA = "/usr/share/games/fortunes"
BATCH_SALT = 0x4750544241544348
M64 = (1 << 64) - 1
PRESETS = {"pocl": dict(layers=2, heads=4, width=128, context=64, batch=32, steps=1000,
                        eval_batches=8, lr=2e-3),
           "h200": dict(layers=6, heads=6, width=384, context=256, batch=64, steps=5000,
                        eval_batches=20, lr=1e-3)}


class SplitMix64:
    """rumus-train's mlp_rng (tools/train/common.c)."""

    def __init__(self, seed):
        self.s = seed & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, n):
        prod = (self.next() >> 32) * n
        low = prod & 0xFFFFFFFF
        if low < n:
            threshold = ((1 << 32) - n) % n
            while low < threshold:
                prod = (self.next() >> 32) * n
                low = prod & 0xFFFFFFFF
        return prod >> 32


def load_text(d):
    if os.path.isfile(d):
        return open(d, "rb").read()
    names = sorted(n for n in os.listdir(d) if not n.startswith(".")
                   and not n.endswith(".dat") and not n.endswith(".u8"))
    return b"".join(open(os.path.join(d, n), "rb").read() for n in names
                    if os.path.isfile(os.path.join(d, n)))


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.attn = nn.Module()
        self.attn.c_attn, self.attn.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.mlp = nn.Module()
        self.mlp.c_fc, self.mlp.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, V, L, H, C, T, tied=True):
        super().__init__()
        self.transformer = nn.Module()
        self.transformer.wte, self.transformer.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.transformer.h = nn.ModuleList(Block(C, H) for _ in range(L))
        self.transformer.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        if tied:
            self.lm_head.weight = self.transformer.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
        for n, p in self.named_parameters():
            if n.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe.weight[:T]
        for b in self.transformer.h:
            x = b(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def lr_at(lr, it, warmup, steps):
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if steps <= warmup:
        return lr
    ratio = min(1.0, (it - warmup) / (steps - warmup))
    return lr / 10 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - lr / 10)


def random_batch(tok, n, T, B, rng):
    starts = [rng.below(n - T) for _ in range(B)]
    x = np.stack([tok[s:s + T] for s in starts])
    y = np.stack([tok[s + 1:s + T + 1] for s in starts])
    return x, y


def fixed_batch(tok, T, B, first, count):
    span, div = len(tok) - T - 1, max(count - 1, 1)
    starts = [((first + b) % count) * span // div for b in range(B)]
    return (np.stack([tok[s:s + T] for s in starts]),
            np.stack([tok[s + 1:s + T + 1] for s in starts]))


@torch.no_grad()
def evaluate(model, tok, T, B, nb, dev):
    total = 0.0
    for b in range(nb):
        x, y = fixed_batch(tok, T, B, b * B, nb * B)
        total += model(torch.from_numpy(x).long().to(dev),
                       torch.from_numpy(y).long().to(dev)).item()
    return total / nb


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    meta = head.pop("__metadata__", {})
    out = {}
    for name, t in head.items():
        a, b = t["data_offsets"]
        assert t["dtype"] == "F32", name
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=np.float32)
                                     .reshape(t["shape"]).copy())
    return out, meta


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=PRESETS, default="pocl")
    for k in ("layers", "heads", "width", "context", "batch-size", "steps", "eval-batches"):
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--precision", choices=("f32", "bf16", "f16"), default="f32")
    ap.add_argument("--load")
    a = ap.parse_args()
    pre = PRESETS[a.preset]
    L, H, C, T = (a.layers or pre["layers"], a.heads or pre["heads"],
                  a.width or pre["width"], a.context or pre["context"])
    B, steps = a.batch_size or pre["batch"], a.steps or pre["steps"]
    nb = a.eval_batches or pre["eval_batches"]
    a.lr = a.lr or pre["lr"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    text = load_text(a.data)
    vocab = sorted(set(text))
    if a.load:
        sd, meta = read_safetensors(a.load)
        vocab = list(bytes.fromhex(meta["rumus.vocab"]))
        L, H = int(meta["n_layer"]), int(meta["n_head"])
        C, T = int(meta["n_embd"]), int(meta["block_size"])
    ids = {b: i for i, b in enumerate(vocab)}
    tok = np.array([ids[b] for b in text], dtype=np.int32)
    ntrain = len(tok) - len(tok) // 10
    train, val = tok[:ntrain], tok[ntrain:]
    counts = np.bincount(tok, minlength=len(vocab)) / len(tok)
    h = -(counts[counts > 0] * np.log(counts[counts > 0])).sum()
    print(f"data   : {a.data} ({len(text)} bytes, vocabulary {len(vocab)}, unigram "
          f"entropy {h:.4f} nats = {h / math.log(2):.4f} bits/char)")
    model = GPT(len(vocab), L, H, C, T, tied=not a.untied).to(dev)
    if a.load:
        model.load_state_dict({k: v.to(dev) for k, v in sd.items()}, strict=True)
        tl, vl = evaluate(model, train, T, B, nb, dev), evaluate(model, val, T, B, nb, dev)
        print(f"loss: train {tl:.4f} nats | val {vl:.4f} nats")
        return
    n = sum(p.numel() for p in model.parameters())
    print(f"model  : GPT {L} layers, {H} heads, width {C}, context {T}, {n} parameters; "
          f"batch {B}, {steps} steps, device {dev}")
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    rng = SplitMix64(a.seed ^ BATCH_SALT)
    amp = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.precision)
    scaler = torch.amp.GradScaler(dev.type, enabled=a.precision == "f16")
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = None
    for it in range(steps):
        if it == min(10, steps - 1):
            sync()
            t0, timed = time.perf_counter(), steps - it
        for g in opt.param_groups:
            g["lr"] = lr_at(a.lr, it, a.warmup, steps)
        x, y = random_batch(train, len(train), T, B, rng)
        with torch.autocast(dev.type, dtype=amp or torch.float32, enabled=amp is not None):
            loss = model(torch.from_numpy(x).long().to(dev),
                         torch.from_numpy(y).long().to(dev))
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        if (it + 1) % max(1, steps // 10) == 0:
            print(f"step {it + 1}/{steps} loss {loss.item():.4f}", flush=True)
    sync()
    dt = (time.perf_counter() - t0) / timed
    tl, vl = evaluate(model, train, T, B, nb, dev), evaluate(model, val, T, B, nb, dev)
    print(f"step time {dt * 1e3:.2f} ms ({B * T / dt:.0f} tokens/s)")
    print(f"after {steps} steps: train {tl:.4f} nats ({tl / math.log(2):.3f} bits/char) | "
          f"val {vl:.4f} nats ({vl / math.log(2):.3f} bits/char)")


if __name__ == "__main__":
    main()
