"""Python envs in worker processes: aiopool's process backend against the peers, same run.

Question: how many env-steps/s does a user's own Python env get through aiopool's process
backend, against gymnasium's ``AsyncVectorEnv`` (shared memory on), Stable-Baselines3's
``SubprocVecEnv`` and a single-process Python loop over the same envs? Envs: gymnasium's Python
``CartPole-v1`` (32 envs) and ``Ant-v5`` (16 envs, MuJoCo through the ``mujoco`` bindings).
Runners are interleaved and repeated; the table shows medians and the ratios of medians of
per-repeat ratios. A separate script from ``throughput.py`` because the peers (and the lack of
a native "limit") differ; PufferLib's ``Multiprocessing`` is measured when ``pufferlib``
imports, or in the venv ``--pufferlib-python`` names (it is not a dependency: its pins clash with
this project's numpy and gymnasium). PufferLib 1.0.1 is the newest that installs from the
registry alone (2.x and 3.x download during their build); it runs beside gymnasium 1.4:

    python -m venv /tmp/puffer && /tmp/puffer/bin/pip install pufferlib==1.0.1 filelock psutil \\
        packaging imageio gymnasium==1.4.0 mujoco==3.17.0

    python benchmarks/python_envs.py                # ~3 min on 2 cores
    python benchmarks/python_envs.py --pufferlib-python /tmp/puffer/bin/python
    python benchmarks/python_envs.py --quick        # smoke run (the tests use it)
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import aiopool

Runner = Callable[[str, int, float], float]  # (env id, num_envs, seconds) -> env-steps/s


def _actions(space: gym.Space[Any], n: int, count: int = 64) -> list[np.ndarray]:
    space.seed(0)
    return [np.stack([space.sample() for _ in range(n)]) for _ in range(count)]


def run_aiopool_stream(env_id: str, n: int, seconds: float, workers: int = 2) -> float:
    """``stream()`` with half the envs per batch: stepping overlaps the consumer."""
    async def go() -> float:
        with aiopool.make(env_id, num_envs=n, batch_size=n // 2, num_workers=workers,
                          backend="processes") as pool:
            acts = _actions(pool.single_action_space, n // 2)
            steps, k, start = 0, 0, time.perf_counter()
            pool.async_reset()
            async for batch in pool.stream():
                batch.send(acts[k % len(acts)])
                k += 1
                if k == 20:
                    steps, start = 0, time.perf_counter()
                steps += len(batch)
                if time.perf_counter() - start > seconds and k > 20:
                    return steps / (time.perf_counter() - start)
        raise AssertionError("unreachable")
    return asyncio.run(go())


def run_aiopool_gymnasium(env_id: str, n: int, seconds: float) -> float:
    """The gymnasium ``VectorEnv`` adapter over the process backend (sync ``step``)."""
    envs = aiopool.make_gymnasium(env_id, num_envs=n, backend="processes", num_workers=2)
    return _vector_loop(envs, n, seconds)


def run_async_vector_env(env_id: str, n: int, seconds: float) -> float:
    envs = gym.vector.AsyncVectorEnv([lambda: gym.make(env_id)] * n, shared_memory=True)
    return _vector_loop(envs, n, seconds)


def run_subproc_vec_env(env_id: str, n: int, seconds: float) -> float:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    envs = make_vec_env(env_id, n_envs=n, vec_env_cls=SubprocVecEnv,
                        vec_env_kwargs={"start_method": "forkserver"})
    acts = _actions(envs.action_space, n)
    envs.reset()
    for k in range(10):
        envs.step(acts[k % len(acts)])
    steps, k, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(acts[k % len(acts)])
        k += 1
        steps += n
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate


PUFFERLIB_PYTHON: str | None = None  # --pufferlib-python: a venv where PufferLib imports

# PufferLib's Multiprocessing at its best setting, run by PUFFERLIB_PYTHON (its pins clash with
# this project's numpy/gymnasium). Three settings, the fastest reported: 2 workers with every
# env per batch, 2 workers with half the envs per batch (async, as `stream()`), and 1 worker
# (its workers busy-wait, which collapses when workers + the main process exceed the cores).
_PUFFERLIB_SCRIPT = """
import json, sys, time
import gymnasium as gym, numpy as np
import pufferlib, pufferlib.emulation, pufferlib.vector
env_id, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
def make(**kw):
    return pufferlib.emulation.GymnasiumPufferEnv(gym.make(env_id), **kw)
def run(batch, workers):
    envs = pufferlib.vector.make(make, backend=pufferlib.vector.Multiprocessing, num_envs=n,
                                 num_workers=workers, batch_size=batch)
    space = envs.single_action_space
    space.seed(0)
    acts = [np.stack([space.sample() for _ in range(batch)]) for _ in range(64)]
    envs.async_reset(0)
    steps, k = 0, 0
    while True:
        envs.recv()
        envs.send(acts[k % 64])
        k += 1
        if k == 20:
            steps, start = 0, time.perf_counter()
        elif k > 20:
            steps += batch
            if time.perf_counter() - start > seconds:
                break
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate
rates = {f"{w} workers, batch {b}": run(b, w) for b, w in ((n, 2), (n // 2, 2), (n, 1))}
print(json.dumps({"version": pufferlib.__version__, "rates": rates}))
"""


def run_pufferlib(env_id: str, n: int, seconds: float) -> float:
    """PufferLib ``Multiprocessing`` in its own interpreter, the best of three settings."""
    if PUFFERLIB_PYTHON is None:
        import pufferlib  # noqa: F401  (ImportError: skipped, not installed here)
        python = sys.executable
    else:
        python = PUFFERLIB_PYTHON
    proc = subprocess.run([python, "-c", _PUFFERLIB_SCRIPT, env_id, str(n), str(seconds)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode:
        raise RuntimeError(f"PufferLib run failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    best = max(out["rates"], key=out["rates"].get)
    print(f"    PufferLib {out['version']}: " + ", ".join(
        f"{k} {v / 1e3:.1f}k{' (best)' if k == best else ''}" for k, v in out["rates"].items()))
    return float(out["rates"][best])


def run_python_loop(env_id: str, n: int, seconds: float) -> float:
    """One process, a for-loop over ``n`` envs: what the workers must beat."""
    envs = [gym.make(env_id) for _ in range(n)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    acts = _actions(envs[0].action_space, n)
    steps, k, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a = acts[k % len(acts)]
        for i, e in enumerate(envs):
            _, _, term, trunc, _ = e.step(a[i])
            if term or trunc:
                e.reset()
        k += 1
        steps += n
    return steps / (time.perf_counter() - start)


def _vector_loop(envs: Any, n: int, seconds: float) -> float:
    acts = _actions(envs.single_action_space, n)
    envs.reset(seed=0)
    for k in range(10):
        envs.step(acts[k % len(acts)])
    steps, k, start = 0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        envs.step(acts[k % len(acts)])
        k += 1
        steps += n
    rate = steps / (time.perf_counter() - start)
    envs.close()
    return rate


RUNNERS: dict[str, Runner] = {
    "aiopool processes stream()": run_aiopool_stream,
    # One worker leaves the consumer a core of its own: the better setting for cheap envs.
    "aiopool processes stream(), 1 worker": functools.partial(run_aiopool_stream, workers=1),
    "aiopool processes gymnasium adapter": run_aiopool_gymnasium,
    "gymnasium AsyncVectorEnv (shm)": run_async_vector_env,
    "SB3 SubprocVecEnv": run_subproc_vec_env,
    "PufferLib Multiprocessing": run_pufferlib,
    "single-process loop": run_python_loop,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one short repeat, CartPole only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--pufferlib-python", help="interpreter of a venv with PufferLib "
                        "(its pins clash with this project's), e.g. /tmp/pufvenv/bin/python")
    parser.add_argument("--envs", help="a comma-separated subset of CartPole-v1,Ant-v5")
    args = parser.parse_args()
    global PUFFERLIB_PYTHON
    PUFFERLIB_PYTHON = args.pufferlib_python
    cases = [("CartPole-v1", 32), ("Ant-v5", 16)]
    if args.envs:
        cases = [c for c in cases if c[0] in args.envs.split(",")]
    if args.quick:
        cases, args.repeats, args.seconds = [("CartPole-v1", 8)], 1, 0.3
    rates: dict[str, dict[str, list[float]]] = {}
    skipped: dict[str, str] = {}
    for env_id, n in cases:
        rates[env_id] = {name: [] for name in RUNNERS}
        for rep in range(args.repeats):
            for name, runner in RUNNERS.items():
                if name in skipped or f"{name} on {env_id}" in skipped:
                    continue
                try:
                    rate = runner(env_id, n, args.seconds)
                except ImportError as e:
                    skipped[name] = f"not installed ({e.name})"
                    print(f"  skip {name}: {skipped[name]}", flush=True)
                    continue
                except RuntimeError as e:  # a peer that cannot run this env (PufferLib 1.0: Box
                    last = str(e).strip().splitlines()[-1]  # actions); the others go on
                    skipped[f"{name} on {env_id}"] = last
                    print(f"  {name} cannot run {env_id}: {last}", flush=True)
                    continue
                rates[env_id][name].append(rate)
                print(f"{env_id} x{n} repeat {rep + 1}/{args.repeats}  {name:38s}"
                      f"{rate / 1e3:9.1f} k steps/s", flush=True)
    result = {"machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                          "load": os.getloadavg()},
              "rates": rates, "skipped": skipped}
    print(f"\nload average {os.getloadavg()[0]:.2f}; medians of {args.repeats} repeats "
          "(k env-steps/s) and aiopool stream() ÷ each (median of per-repeat ratios)")
    for env_id, by_runner in rates.items():
        ours = by_runner["aiopool processes stream()"]
        print(f"\n{env_id}")
        for name, values in by_runner.items():
            if not values:
                continue
            ratios = [a / b for a, b in zip(ours, values, strict=False)]
            print(f"  {name:38s}{statistics.median(values) / 1e3:9.1f}"
                  f"   stream ÷ this: {statistics.median(ratios):5.2f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / ("python_envs_quick.json" if args.quick else "python_envs.json")
    path.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
