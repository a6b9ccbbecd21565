"""What serving a policy costs: per-request latency, requests/s and the event loop's lag.

Modes, for 1, 4 and 16 consumers (coroutines each keeping one request in flight), with
CartPole-shaped (float32 [32, 4]) and Pong-shaped (uint8 [32, 4, 84, 84]) requests:

- ``direct``: the policy called on the loop (blocks the loop for every forward);
- ``executor``: one ``run_in_executor`` call per request (``from_callable``);
- ``batcher``: ``DynamicBatcher``, one forward per loop tick.

The policy is a small torch MLP (``torch.set_num_threads(1)``, set deliberately: on 2 cores
the forward's thread leaves the other core to the loop). A probe task wakes every ~1 ms and
times one ``sleep(0)`` round trip: how long a ready task waits for the loop, its lag. Each
(mode, shape, consumers) cell runs in a fresh subprocess, repeats are interleaved, medians
reported. Table on stdout, JSON + PNG in benchmarks/results/, progress on stderr.

    python benchmarks/inference.py            # ~2 min
    python benchmarks/inference.py --quick    # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"cartpole": ((32, 4), "float32"), "pong": ((32, 4, 84, 84), "uint8")}
MODES = ("direct", "executor", "batcher")


def make_policy(shape: str) -> Any:
    import torch

    from aiopool.inference import torch_policy

    torch.manual_seed(0)
    dims, _ = SHAPES[shape]
    width = int(np.prod(dims[1:]))
    hidden = 64 if shape == "cartpole" else 32
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(width, hidden),
                                torch.nn.ReLU(), torch.nn.Linear(hidden, 6))
    return torch_policy(model, num_threads=1)


async def measure(mode: str, shape: str, consumers: int, seconds: float) -> dict[str, Any]:
    from aiopool.inference import DynamicBatcher, from_callable

    fn = make_policy(shape)
    dims, dtype = SHAPES[shape]
    obs = np.random.default_rng(0).integers(0, 255, dims).astype(dtype)
    batcher = DynamicBatcher(fn) if mode == "batcher" else None
    policy = batcher or (from_callable(fn) if mode == "executor" else None)
    latencies: list[float] = []
    lags: list[float] = []
    stop = time.perf_counter() + seconds

    async def consumer() -> None:
        while time.perf_counter() < stop:
            t = time.perf_counter()
            if policy is None:
                fn(obs)
                await asyncio.sleep(0)  # a consumer yields between batches, as stream() does
            else:
                await policy(obs)
            latencies.append(time.perf_counter() - t)

    async def probe() -> None:  # every ~1 ms: how long does a ready task wait for the loop?
        while time.perf_counter() < stop:
            await asyncio.sleep(0.001)
            t = time.perf_counter()
            await asyncio.sleep(0)
            lags.append(time.perf_counter() - t)

    started = time.perf_counter()
    await asyncio.gather(probe(), *(consumer() for _ in range(consumers)))
    elapsed = time.perf_counter() - started
    stats = batcher.stats if batcher else None
    if batcher:
        await batcher.aclose()
    lat = np.array(latencies) * 1e6
    lag = np.array(lags) * 1e6
    return {"median_us": float(np.median(lat)), "p99_us": float(np.percentile(lat, 99)),
            "req_per_s": len(lat) / elapsed, "rows_per_s": len(lat) * dims[0] / elapsed,
            "rows_per_forward": stats.rows_per_forward if stats else float(dims[0]),
            "lag_p99_us": float(np.percentile(lag, 99)), "lag_max_us": float(lag.max())}


def run_cell(mode: str, shape: str, consumers: int, seconds: float) -> dict[str, Any]:
    code = ("import asyncio, json, sys; sys.path.insert(0, 'benchmarks'); import inference;"
            f"print(json.dumps(asyncio.run(inference.measure({mode!r}, {shape!r}, "
            f"{consumers}, {seconds}))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    if out.returncode != 0:
        raise RuntimeError(f"{mode}/{shape}/{consumers} failed:\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=1.5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--consumers", default="1,4,16")
    p.add_argument("--shapes", default="cartpole,pong")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--quick", action="store_true", help="1 repeat of 0.2 s, CartPole, 1 and 4")
    args = p.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.consumers, args.shapes = 0.2, 1, "1,4", "cartpole"
    consumers = [int(c) for c in args.consumers.split(",")]
    shapes = args.shapes.split(",")
    cells = [(m, s, c) for s in shapes for c in consumers for m in MODES]
    load = [os.getloadavg()]
    results: dict[tuple[str, str, int], list[dict[str, Any]]] = {cell: [] for cell in cells}
    for r in range(args.repeats):
        for k, cell in enumerate(cells):
            print(f"repeat {r + 1}/{args.repeats}, {k + 1}/{len(cells)}: {cell}", file=sys.stderr)
            results[cell].append(run_cell(*cell, args.seconds))
    load.append(os.getloadavg())
    keys = ("median_us", "p99_us", "req_per_s", "rows_per_forward", "lag_p99_us", "lag_max_us")
    rows = {cell: {k: statistics.median(x[k] for x in runs) for k in keys}
            for cell, runs in results.items()}
    print(f"# aiopool inference, torch 1 thread, load {load[0][0]:.2f} -> {load[1][0]:.2f}, "
          f"{args.repeats} interleaved repeats x {args.seconds} s, medians\n")
    print("| shape | consumers | mode | median µs | p99 µs | requests/s | rows/forward | "
          "loop lag p99 µs | lag max µs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (m, s, c), v in rows.items():
        print(f"| {s} | {c} | {m} | {v['median_us']:.0f} | {v['p99_us']:.0f} | "
              f"{v['req_per_s']:.0f} | {v['rows_per_forward']:.0f} | {v['lag_p99_us']:.0f} | "
              f"{v['lag_max_us']:.0f} |")
    for s in shapes:
        one = rows.get(("batcher", s, 1)), rows.get(("executor", s, 1))
        if one[0] and one[1]:
            print(f"\n{s}: batcher - executor at 1 consumer: "
                  f"{one[0]['median_us'] - one[1]['median_us']:+.1f} µs per request")
        many = rows.get(("batcher", s, max(consumers))), rows.get(("executor", s, max(consumers)))
        if many[0] and many[1]:
            print(f"{s}: batcher / executor requests/s at {max(consumers)} consumers: "
                  f"{many[0]['req_per_s'] / many[1]['req_per_s']:.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "inference.json").write_text(json.dumps(
        {"load": load, "args": {k: str(v) for k, v in vars(args).items()},
         "cells": [{"mode": m, "shape": s, "consumers": c, **v} for (m, s, c), v in rows.items()],
         "runs": {f"{m}/{s}/{c}": r for (m, s, c), r in results.items()}}, indent=1))
    plot(rows, shapes, consumers, args.out / "inference.png")
    print(f"\nwrote {args.out / 'inference.json'} and {args.out / 'inference.png'}")
    return 0


def plot(rows: dict[tuple[str, str, int], dict[str, Any]], shapes: list[str],
         consumers: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shapes), figsize=(5 * len(shapes), 3.5), squeeze=False)
    for ax, s in zip(axes[0], shapes, strict=True):
        for m in MODES:
            ax.plot(consumers, [rows[(m, s, c)]["req_per_s"] for c in consumers], marker="o",
                    label=m)
        ax.set(title=s, xlabel="consumers", ylabel="requests/s", xscale="log")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    sys.exit(main())
