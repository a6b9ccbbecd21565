"""Env-steps/s of aiopool's Procgen envs against procgen's own ProcgenGym3Env and EnvPool's.

Question: how many env-steps per second does a pool of Procgen games deliver, with 64 envs and
batches of 32, on 1 and 2 worker threads, beside procgen's ``ProcgenGym3Env(num=64,
num_threads=N)`` (its own stepping threads, synchronous: every step is all 64 envs) and EnvPool
1.2.5's Procgen (async, 64 envs, batch 32, N threads), where its wheel has it?

Method: every runner runs in this process, in one run, over the same procgen 0.10.7 library
(aiopool.procgen's cache; ProcgenGym3Env through ``aiopool.procgen.reference_env``). Each
measurement builds its env, warms up, then counts env-steps over a fixed wall time. Repeats
are interleaved (each repeat runs every runner once, in a shuffled order), so slow phases of a
noisy machine hit all alike; the table gives medians over repeats, and a ratio is the median
of the per-repeat ratios. Actions are precomputed random arrays. Distribution mode: easy.

Usage:
    python benchmarks/procgen.py                          # coinrun, starpilot, bigfish
    python benchmarks/procgen.py --games coinrun --repeats 3 --seconds 2

Each cell also gives the process's CPU time per env-step (all its threads), which a busy machine
distorts less than the rate. Writes ``<out>/procgen.json`` (default ``benchmarks/results``) and
prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _machine import load_text, machine_info

import aiopool
from aiopool import procgen

NUM_ENVS, BATCH = 64, 32


class Meter:
    """Counts env-steps after a warm-up of 20 batches, for ``seconds`` of wall time, and the
    CPU time of the whole process (every thread: the runner's own and the library's)."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.batches, self.steps, self.start, self.cpu = seconds, 0, 0, 0.0, 0.0
        self.result = (0.0, 0.0)

    def tick(self, steps: int) -> bool:
        """Count a batch of ``steps``; True once the time is up (``result`` is then set:
        env-steps/s and CPU µs per env-step)."""
        self.batches += 1
        if self.batches == 20:
            self.start, self.cpu = time.perf_counter(), time.process_time()
        elif self.batches > 20:
            self.steps += steps
            elapsed = time.perf_counter() - self.start
            if elapsed >= self.seconds:
                cpu = time.process_time() - self.cpu
                self.result = (self.steps / elapsed, cpu / self.steps * 1e6)
                return True
        return False


def _actions(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(15, size=n) for _ in range(64)]


def run_aiopool(game: str, threads: int, seconds: float) -> tuple[float, float]:
    """``stream()``: each batch of 32 sent back at once."""
    actions = _actions(BATCH)

    async def main() -> tuple[float, float]:
        with aiopool.make(f"{game.title()}Easy-v0", num_envs=NUM_ENVS, batch_size=BATCH,
                          num_threads=threads, seed=0) as pool:
            pool.async_reset()
            meter = Meter(seconds)
            async for batch in pool.stream():
                batch.send(actions[meter.batches % len(actions)])
                if meter.tick(BATCH):
                    return meter.result
        raise AssertionError("the stream ended")

    return asyncio.run(main())


def run_gym3(game: str, threads: int, seconds: float) -> tuple[float, float]:
    """procgen's ProcgenGym3Env: act(all 64) then observe, as gym3's users step it."""
    env = procgen.reference_env(num=NUM_ENVS, env_name=game, distribution_mode="easy",
                                num_threads=threads, rand_seed=0)
    actions = [a.astype(np.int32) for a in _actions(NUM_ENVS)]
    meter = Meter(seconds)
    while True:
        env.act(actions[meter.batches % len(actions)])
        env.observe()
        if meter.tick(NUM_ENVS):
            env.close()
            return meter.result


def envpool_missing(games: list[str]) -> str | None:
    """Why EnvPool's Procgen cannot run here, or None (its wheel needs the system's Qt 5)."""
    try:
        import envpool

        for game in games:
            envpool.make_gymnasium(f"{game.title()}Easy-v0", num_envs=1).close()
    except Exception as e:  # ImportError, or an id its build lacks
        return f"{type(e).__name__}: {e}"
    return None


def run_envpool(game: str, threads: int, seconds: float) -> tuple[float, float]:
    """EnvPool's async mode: send the batch's actions to the envs it came from."""
    import envpool

    env = envpool.make_gymnasium(f"{game.title()}Easy-v0", num_envs=NUM_ENVS, batch_size=BATCH,
                                 num_threads=threads, seed=0)
    actions = _actions(BATCH)
    env.async_reset()
    meter = Meter(seconds)
    while True:
        *_, info = env.recv()
        env.send(actions[meter.batches % len(actions)], info["env_id"])
        if meter.tick(BATCH):
            env.close()
            return meter.result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", default="coinrun,starpilot,bigfish")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = p.parse_args()
    procgen.install()
    games = args.games.split(",")
    threads = [int(t) for t in args.threads.split(",")]
    runners: dict[str, Callable[[str, int, float], tuple[float, float]]] = {
        "aiopool stream": run_aiopool, "gym3 ProcgenGym3Env": run_gym3}
    missing = envpool_missing(games)
    if missing is None:
        runners["EnvPool async"] = run_envpool
    else:
        print(f"EnvPool's Procgen left out: {missing}")
    cases = [(g, t) for g in games for t in threads]
    load_start = os.getloadavg()
    rates: dict[tuple[str, int, str], list[float]] = {}
    cpu: dict[tuple[str, int, str], list[float]] = {}
    for r in range(args.repeats):
        order = [(g, t, name) for g, t in cases for name in runners]
        random.Random(r).shuffle(order)
        for g, t, name in order:
            rate, us = runners[name](g, t, args.seconds)
            rates.setdefault((g, t, name), []).append(rate)
            cpu.setdefault((g, t, name), []).append(us)
        print(f"repeat {r + 1}/{args.repeats} done, load {load_text(os.getloadavg())}",
              flush=True)
    load_end = os.getloadavg()
    peers = [n for n in runners if n != "aiopool stream"]
    header = ["game", "threads", *[f"{n} steps/s (CPU µs/step)" for n in runners],
              *[f"aiopool ÷ {n}" for n in peers]]
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    rows: list[dict[str, Any]] = []
    for g, t in cases:
        med = {n: statistics.median(rates[(g, t, n)]) for n in runners}
        med_cpu = {n: statistics.median(cpu[(g, t, n)]) for n in runners}
        ratios = {n: statistics.median(a / b for a, b in zip(rates[(g, t, "aiopool stream")],
                                                             rates[(g, t, n)], strict=True))
                  for n in peers}
        print(f"| {g} | {t} | " + " | ".join(f"{med[n]:,.0f} ({med_cpu[n]:.1f})" for n in runners)
              + " | " + " | ".join(f"{x:.2f}×" for x in ratios.values()) + " |")
        rows.append({"game": g, "threads": t, "median": med, "cpu_us_per_step": med_cpu,
                     "ratio": ratios, "rates": {n: rates[(g, t, n)] for n in runners},
                     "cpu": {n: cpu[(g, t, n)] for n in runners}})
    print(f"\nload {load_text(load_start)} at the start, {load_text(load_end)} at the end; "
          f"{args.repeats} interleaved repeats of {args.seconds:g} s; {NUM_ENVS} envs, batch "
          f"{BATCH} (ProcgenGym3Env: all {NUM_ENVS} per step); a ratio is the median of the "
          "per-repeat ratios")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "procgen.json").write_text(json.dumps({
        "machine": machine_info("envpool"), "load_start": load_start, "load_end": load_end,
        "repeats": args.repeats, "seconds": args.seconds, "num_envs": NUM_ENVS,
        "batch_size": BATCH, "envpool_missing": missing, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
