"""Env-steps/s of a jitted ``lax.scan`` of ``step`` (``xla()``), aiopool against EnvPool.

Question: how fast does a rollout run when the env steps are inside one jitted program, on
aiopool's native ``xla()`` (XLA FFI handlers, no Python per step) and on EnvPool 1.2.5's
``xla()``, and how close does aiopool's come to its own Python loop of ``send`` +
``recv_blocking``? CartPole-v1 (64 envs), Pong-v5 (8 envs) and HalfCheetah-v5 (16 envs), on 1
and 2 threads, sync mode, a fixed policy (the same action every step).

Method: every runner is built once (envs made and reset, the scan compiled and run once), then
timed in interleaved repeats: each repeat runs every runner once, in a shuffled order, for
about ``--seconds`` of wall time (whole calls of the scan, ``--steps`` steps each), and counts
env-steps. The table gives medians over repeats; a ratio is the median of the per-repeat
ratios (both runners measured in the same repeat). Both libraries' envs are made through
EnvPool's ``make`` (aiopool's drop-in ``aiopool.envpool``) with the same kwargs; the Python
loop uses ``aiopool.make`` with the same thread count.

Usage:
    python benchmarks/xla.py                  # ~4 min on 2 cores
    python benchmarks/xla.py --quick          # one repeat of 0.3 s: a smoke test

Writes ``<out>/xla.json`` (default ``benchmarks/results``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _machine import load_text, machine_info

import aiopool
import aiopool.envpool as ours

CASES = [("CartPole-v1", 64, 1000), ("Pong-v5", 8, 50), ("HalfCheetah-v5", 16, 200)]


def fixed_action(space: Any, n: int) -> np.ndarray:
    """The same action every step: 1 (discrete), 0.1 (continuous), of the space's dtype
    (EnvPool's xla() takes exactly that: float64 for its MuJoCo envs, so jax runs with x64)."""
    if hasattr(space, "n"):
        return np.ones(n, dtype=np.int32) % int(space.n)
    return np.full((n, *space.shape), 0.1, dtype=space.dtype)


def scan_runner(module: Any, env_id: str, n: int, threads: int, steps: int) -> Callable[[], int]:
    """A jitted scan of ``steps`` steps of ``module.make(...).xla()``; returns env-steps."""
    env = module.make(env_id, env_type="gymnasium", num_envs=n, num_threads=threads, seed=0)
    env.reset()
    handle, _, _, step = env.xla()
    action = jnp.asarray(fixed_action(env.action_space, n))

    @jax.jit
    def rollout(handle: Any) -> Any:
        def body(carry: Any, _: Any) -> Any:
            handle, total = carry
            handle, (_, reward, *_) = step(handle, action)
            return (handle, total + reward.sum()), None

        return jax.lax.scan(body, (handle, jnp.float32(0)), None, length=steps)[0]

    state = {"handle": handle}
    jax.block_until_ready(rollout(handle))

    def run() -> int:
        state["handle"], total = rollout(state["handle"])
        jax.block_until_ready(total)
        return n * steps

    run.env = env  # type: ignore[attr-defined]  # kept alive with the runner
    return run


def loop_runner(env_id: str, n: int, threads: int, steps: int) -> Callable[[], int]:
    """aiopool's own sync loop: ``send`` + ``recv_blocking``, ``steps`` times."""
    pool = aiopool.make(env_id, num_envs=n, num_threads=threads, seed=0)
    pool.async_reset()
    pool.recv_blocking()
    space = pool.single_action_space
    action = fixed_action(space, n).astype(np.int64 if hasattr(space, "n") else space.dtype)

    def run() -> int:
        for _ in range(steps):
            pool.send(action)
            pool.recv_blocking()
        return n * steps

    run.env = pool  # type: ignore[attr-defined]
    return run


def measure(run: Callable[[], int], seconds: float) -> float:
    done, t0 = 0, time.perf_counter()
    while True:
        done += run()
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--envs", default=",".join(c[0] for c in CASES))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)
    if args.quick:
        args.repeats, args.seconds = 1, 0.3
    try:
        import envpool
    except ImportError:
        envpool = None
        print("EnvPool is not installed: its column is left out (pip install envpool==1.2.5)")
    load0 = os.getloadavg()
    rows = []
    for env_id, n, steps in CASES:
        if env_id not in args.envs.split(","):
            continue
        for threads in (int(t) for t in args.threads.split(",")):
            runners = {"aiopool xla()": scan_runner(ours, env_id, n, threads, steps),
                       "aiopool recv_blocking loop": loop_runner(env_id, n, threads, steps)}
            if envpool is not None:
                runners["EnvPool xla()"] = scan_runner(envpool, env_id, n, threads, steps)
            per: dict[str, list[float]] = {name: [] for name in runners}
            for _ in range(args.repeats):
                order = list(runners)
                random.shuffle(order)
                for name in order:
                    per[name].append(measure(runners[name], args.seconds))
            row: dict[str, Any] = {"env": env_id, "num_envs": n, "threads": threads,
                                   "steps_per_call": steps}
            row.update({name: statistics.median(v) for name, v in per.items()})
            ours_xla = per["aiopool xla()"]
            row["xla / loop"] = statistics.median(
                a / b for a, b in zip(ours_xla, per["aiopool recv_blocking loop"], strict=True))
            if "EnvPool xla()" in per:
                row["xla / EnvPool xla"] = statistics.median(
                    a / b for a, b in zip(ours_xla, per["EnvPool xla()"], strict=True))
            rows.append(row)
            for r in runners.values():
                r.env.close()  # type: ignore[attr-defined]
            print(f"{env_id} {n} envs {threads} thread(s): done", flush=True)
    load1 = os.getloadavg()
    cols = ["aiopool xla()", "EnvPool xla()", "aiopool recv_blocking loop"]
    print(f"\nenv-steps/s, medians of {args.repeats} interleaved repeats; load "
          f"{load_text(load0)} -> {load_text(load1)}\n")
    print("| env | envs | threads | " + " | ".join(cols) + " | xla ÷ EnvPool xla | xla ÷ loop |")
    print("|---|---|---|" + "---|" * (len(cols) + 2))
    for row in rows:
        vals = " | ".join(f"{row[c]:,.0f}" if c in row else "—" for c in cols)
        ratio = f"{row['xla / EnvPool xla']:.2f}" if "xla / EnvPool xla" in row else "—"
        print(f"| {row['env']} | {row['num_envs']} | {row['threads']} | {vals} | {ratio} | "
              f"{row['xla / loop']:.2f} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "xla.json").write_text(json.dumps(
        {"machine": machine_info("jax", "jaxlib", "envpool"), "load": [load0, load1],
         "repeats": args.repeats, "seconds": args.seconds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
