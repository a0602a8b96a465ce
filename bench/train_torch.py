#!/usr/bin/env python3
"""train_torch.py - rumus-train's models in PyTorch eager, for the epoch-time
comparison of docs/TRAINING.md and docs/PERFORMANCE.md (same data, batch,
optimizer, schedule and initialisation rule; run it on the machine that
runs rumus-train):

    python3 bench/train_torch.py --model cnn [--epochs 10] [--batch-size 128]
        [--lr 1e-3] [--seed 42] [--data DIR] [--device cuda] [--load FILE]

The modules are named as rumus-train's safetensors files name their
tensors (tools/train/checkpoint.h): the MLP is nn.Sequential(Linear, ReLU,
..., Linear), the CNN has conv1, bn1, conv2, bn2, fc1, fc2.  --load FILE
reads a file written by `rumus-train --save` into the model and only
evaluates it (the two libraries agree on the model when the accuracy
matches rumus-train --eval-only).  TF32 is off: FP32 arithmetic on both
sides.  Prints per-epoch loss, test accuracy and time (CUDA-synchronised).
"""
import argparse
import gzip
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range(magic & 0xFF)]
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def load_set(d, prefix):
    x = read_idx(os.path.join(d, prefix + "-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(d, prefix + "-labels-idx1-ubyte.gz"))
    return torch.from_numpy(x.astype(np.float32) / 255.0), torch.from_numpy(y.astype(np.int64))


class CNN(nn.Module):
    def __init__(self, c1=32, c2=64, hidden=128):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1)
        self.conv2, self.bn2 = nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2)
        self.fc1, self.fc2 = nn.Linear(c2 * 49, hidden), nn.Linear(hidden, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = F.dropout(x, 0.25, self.training).flatten(1)
        x = F.dropout(F.relu(self.fc1(x)), 0.5, self.training)
        return self.fc2(x)


def mlp(widths=(784, 256, 128, 10)):
    layers = []
    for i in range(len(widths) - 1):
        layers += [nn.Linear(widths[i], widths[i + 1]), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def evaluate(model, x, y, kind, mean, std, dev, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            xb = ((x[i:i + batch] - mean) / std).to(dev)
            xb = xb.unsqueeze(1) if kind == "cnn" else xb.flatten(1)
            correct += (model(xb).argmax(1).cpu() == y[i:i + batch]).sum().item()
    return correct


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--data", default=os.environ.get("RUMUS_FASHION_MNIST", DEFAULT_DATA))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--load")
    a = ap.parse_args()
    epochs = a.epochs or (10 if a.model == "cnn" else 5)
    torch.manual_seed(a.seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(a.device)
    xtr, ytr = load_set(a.data, "train")
    xte, yte = load_set(a.data, "t10k")
    mean, std = xtr.mean().item(), xtr.std().item()
    model = (CNN() if a.model == "cnn" else mlp()).to(dev)
    if a.load:
        from safetensors.torch import load_file
        state = load_file(a.load)
        model.load_state_dict(state, strict=False)
        print(f"loaded {a.load}: test accuracy "
              f"{100 * evaluate(model, xte, yte, a.model, mean, std, dev) / len(xte):.2f}%")
        return
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.01)
    steps = epochs * math.ceil(len(xtr) / a.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: 0.5 * (1 + math.cos(math.pi * min(t, steps) / steps)))
    xtr_dev = ((xtr - mean) / std).to(dev)
    ytr_dev = ytr.to(dev)
    for e in range(1, epochs + 1):
        model.train()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        perm = torch.randperm(len(xtr), device=dev)
        total = 0.0
        for i in range(0, len(xtr), a.batch_size):
            idx = perm[i:i + a.batch_size]
            xb = xtr_dev[idx]
            xb = xb.unsqueeze(1) if a.model == "cnn" else xb.flatten(1)
            loss = F.cross_entropy(model(xb), ytr_dev[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(idx)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        acc = 100 * evaluate(model, xte, yte, a.model, mean, std, dev) / len(xte)
        print(f"epoch {e}/{epochs}: train loss {total / len(xtr):.4f} | test acc {acc:.2f}% | "
              f"{t1 - t0:.2f} s", flush=True)


if __name__ == "__main__":
    main()
