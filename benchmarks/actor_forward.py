"""The Atari actor's forward: how long one call of the example's ``Acting`` takes, by device.

Question: where should the overlapped Atari example (examples/ppo_atari_async.py) act — on the
CPU or on the GPU, eagerly or as a CUDA graph — for the batch sizes its consumers send?
One call: the Nature CNN on ``rows`` stacks of 4 84x84 frames, an action drawn for each row,
its log-probability and value, back in host memory (what the DynamicBatcher's thread runs).

Method: for each (way, rows), 20 warm-up calls, then the median of 5 repeats of the mean over
50 calls; random frames, CleanRL's initial weights.

Usage:
    python benchmarks/actor_forward.py                 # CPU, and CUDA where torch sees a GPU
    python benchmarks/actor_forward.py --rows 4,8,16
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from _machine import machine_info  # noqa: E402
from ppo_atari_async import Acting, Agent  # noqa: E402


def ways() -> dict[str, dict[str, object]]:
    cores = len(os.sched_getaffinity(0))
    out: dict[str, dict[str, object]] = {
        "cpu, 1 thread": {"device": "cpu", "threads": 1},
        f"cpu, {cores} threads": {"device": "cpu", "threads": cores},
    }
    if torch.cuda.is_available():
        out["cuda, eager"] = {"device": "cuda", "threads": 1}
        out["cuda, graph"] = {"device": "cuda", "threads": 1, "graph": True}
    return out


def per_call(acting: Acting, rows: int, calls: int = 50, repeats: int = 5) -> float:
    """Median over repeats of the mean seconds per call."""
    obs = np.random.default_rng(0).integers(0, 255, (rows, 4, 84, 84), dtype=np.uint8)
    for _ in range(20):
        acting(obs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            acting(obs)
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", default="1,4,8,16,32", help="rows per call, comma-separated")
    args = p.parse_args()
    rows_list = [int(r) for r in args.rows.split(",")]
    machine = machine_info("torch")
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(f"# The Atari actor's forward, ms per call\n\n{machine['cpu']}, "
          f"{machine['usable_cores']} cores, GPU {gpu}, torch {torch.__version__}, load "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| way | " + " | ".join(f"{r} rows" for r in rows_list) + " |")
    print("|---|" + "---|" * len(rows_list))
    for name, way in ways().items():
        torch.manual_seed(0)
        agent = Agent(4).to(str(way["device"]))
        cells = []
        for rows in rows_list:
            acting = Acting(agent, int(str(way["threads"])), channels_last=True,
                            graph_rows=rows if way.get("graph") else 0)
            if way.get("graph"):
                acting.capture((4, 84, 84))
            cells.append(f"{per_call(acting, rows) * 1e3:.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
