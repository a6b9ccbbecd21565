"""Memory per Atari env: the resident-set growth of a pool of M envs, divided by M.

Question: how much memory does one aiopool Atari env cost, beside EnvPool's and ale-py's
AtariVectorEnv's? Method: each measurement runs in a fresh Python process, which imports
everything first, reads its RSS, builds the pool (default settings: 84x84 gray, 4 stacked),
resets it and steps it 20 times, then reads its RSS again. (after - before) / M is the cost of
one env, including its share of the pool's batch buffers and worker threads.

Usage:
    python benchmarks/atari_memory.py                  # Pong-v5, M = 64, 3 repeats
    python benchmarks/atari_memory.py --env Breakout-v5 --num-envs 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import asyncio, json, sys
import numpy as np

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

runner, env_id, rom, m = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import aiopool, envpool
from ale_py.vector_env import AtariVectorEnv
actions = np.zeros(m, dtype=np.int64)
before = rss()
if runner == "aiopool":
    async def run():
        pool = aiopool.make(env_id, num_envs=m, seed=0)
        pool.async_reset()
        await pool.recv()
        for _ in range(20):
            await pool.step(actions)
        return pool
    keep = asyncio.run(run())
elif runner == "envpool":
    keep = envpool.make_gymnasium(env_id, num_envs=m, seed=0)
    keep.reset()
    for _ in range(20):
        keep.step(actions)
else:
    keep = AtariVectorEnv(rom, m)
    keep.reset(seed=0)
    for _ in range(20):
        keep.step(actions)
print(json.dumps({"before": before, "after": rss()}))
"""

RUNNERS = ("aiopool", "envpool", "ale-py")


def measure(runner: str, env_id: str, rom: str, m: int) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, runner, env_id, rom, str(m)],
                         check=True, capture_output=True, text=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return (r["after"] - r["before"]) / m


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="Pong-v5")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    rom = "".join("_" + c.lower() if c.isupper() else c
                  for c in args.env.removesuffix("-v5")).lstrip("_")
    per_env: dict[str, list[float]] = {r: [] for r in RUNNERS}
    for _ in range(args.repeats):
        for runner in RUNNERS:
            per_env[runner].append(measure(runner, args.env, rom, args.num_envs))
    print(f"# RSS growth per env, {args.env}, M = {args.num_envs}, median of {args.repeats}\n")
    print("| runner | MiB per env (median) | min–max |\n|---|---|---|")
    for runner, values in per_env.items():
        print(f"| {runner} | {statistics.median(values) / 2**20:.2f} | "
              f"{min(values) / 2**20:.2f}–{max(values) / 2**20:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
