#!/usr/bin/env python3
"""isolate.py - run rumus-bench once per op, each in its own process, and merge.

    python3 bench/isolate.py RUMUS_BENCH OUT_JSON [--text OUT_TXT]
        [-- RUMUS_BENCH_ARGS...]

A kernel that faults on a GPU can leave the whole process unable to use the
device (NVIDIA's OpenCL then answers CL_INVALID_COMMAND_QUEUE and
CL_OUT_OF_RESOURCES to every later call, on new contexts too), so one bad op
would turn every later op into a failure.  This runs `RUMUS_BENCH --ops OP
--json ...` for each op (the ops of --op/--ops in the arguments, else every
op of `RUMUS_BENCH --list`), then writes one JSON in rumus-bench's format:
the header of the first run, copy_gbs and stream_gbs the medians of the
runs' copy measurements (each run's values in copy_runs_gbs and
stream_runs_gbs), pct_copy and pct_stream of every case recomputed against
those medians, and the results in order.  An op whose
process died without writing its JSON gets one record with status
"failed" and the exit status.  OUT_TXT (optional) receives every run's
table, one after the other.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def list_ops(bench):
    out = subprocess.run([bench, "--list"], stdout=subprocess.PIPE, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]


def split_ops(args):
    """(ops named by --op/--ops or None, the other arguments)."""
    ops, rest, i = None, [], 0
    while i < len(args):
        if args[i] in ("--op", "--ops") and i + 1 < len(args):
            ops = (ops or []) + args[i + 1].split(",")
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return ops, rest


def run_isolated(bench, args, out_json, out_txt=None, echo=True):
    ops, rest = split_ops(args)
    if ops is None:
        ops = list_ops(bench)
    header, records, texts, copies, streams = None, [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for op in ops:
            j = os.path.join(tmp, op + ".json")
            cmd = [bench, "--ops", op, "--json", j] + rest
            if echo:
                print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
            p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
            texts.append(p.stdout)
            if echo:
                sys.stdout.write(p.stdout)
                sys.stdout.flush()
            if not os.path.exists(j):
                records.append({"op": op, "family": "?", "shape": "-", "dims": [], "trans_a": 0,
                                "trans_b": 0, "memory_bound": False, "bytes": 0, "flops": 0,
                                "status": "failed", "reps": 0,
                                "note": f"rumus-bench --ops {op} exited with status {p.returncode}"})
                continue
            with open(j) as f:
                run = json.load(f)
            copies.append(run["copy_gbs"])
            streams.append(run["stream_gbs"])
            if header is None:
                header = run
            header["load_end"] = run.get("load_end")
            records += run["results"]
    if header is None:
        raise SystemExit("rumus-bench produced no JSON at all")
    merged = dict(header)
    merged["results"] = records
    merged["copy_runs_gbs"] = copies
    merged["copy_gbs"] = statistics.median(copies)
    merged["stream_runs_gbs"] = streams
    merged["stream_gbs"] = statistics.median(streams)
    merged["isolated"] = True
    for r in merged["results"]:
        if r.get("status") == "ok" and r.get("memory_bound") and r.get("gbs"):
            # Large cases on a CPU carry their own copy measurements.
            r["pct_copy"] = 100.0 * r["gbs"] / (r.get("copy_local_gbs") or merged["copy_gbs"])
            r["pct_stream"] = 100.0 * r["gbs"] / (r.get("stream_local_gbs") or merged["stream_gbs"])
    with open(out_json, "w") as f:
        json.dump(merged, f, indent=1)
    if out_txt:
        with open(out_txt, "w") as f:
            f.write("\n".join(texts))
    return merged


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--text"):
        print(__doc__, file=sys.stderr)
        return 2
    run_isolated(argv[0], extra, argv[1], argv[3] if len(argv) == 4 else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
