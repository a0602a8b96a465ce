import torch
n = 128 << 20  # floats (512 MiB)
y = torch.empty(n, device="cuda"); x = torch.empty(n, device="cuda").fill_(1)
def t(f):
    for _ in range(3): f()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    best = 1e9
    for _ in range(10):
        s.record(); f(); e.record(); torch.cuda.synchronize(); best = min(best, s.elapsed_time(e))
    return best * 1e-3
b = n * 4
tf = t(lambda: y.fill_(2.0)); print(f"torch fill_: {tf*1e6:.1f} us {b/tf/1e9:.1f} GB/s")
tz = t(lambda: y.zero_()); print(f"torch zero_: {tz*1e6:.1f} us {b/tz/1e9:.1f} GB/s")
tc = t(lambda: y.copy_(x)); print(f"torch copy_: {tc*1e6:.1f} us {2*b/tc/1e9:.1f} GB/s (r+w)")
ts = t(lambda: x.sum()); print(f"torch sum: {ts*1e6:.1f} us {b/ts/1e9:.1f} GB/s (read)")
