"""Pools through Ray against the same pools in process, same run.

Question: what does a Ray hop cost per batch, and how many env-steps/s does a remote pool keep
of the same pool stepped in this process? Env-steps/s and µs per batch for

- the pool in process, 1 thread (the 1-actor baseline) and 2 threads with twice the envs (the
  2-actor baseline: same cores, same envs in all);
- ``make_remote`` with 1 and 2 actors of 1 CPU each, consumed through ``stream()`` exactly as
  the in-process pool is (the same coroutine runs both: one contract);
- for CartPole, rollout mode (``pool.rollouts(policy, horizon=128)``), where the policy runs in
  the actor and one RPC carries 128 steps of all its envs, against its like in process: the
  same pool (``n`` envs per thread, one batch of ``n``: what each actor holds) consumed through
  ``stream()`` with the same policy called once per batch.

Stream runs send precomputed random ints; rollout mode and its in-process baseline call the
same ``RandomPolicy`` (uniform random actions drawn per batch). Every pool is made
once and warmed up; the runners are then interleaved, ``--repeats`` windows of ``--seconds``
each, and the table shows medians (and the driver process's CPU per batch). Ray runs locally
(``ray.init(num_cpus=8)``: CPUs are Ray's bookkeeping only, so idle pools do not block the
others' actors; the machine's cores are what they are). The load average is recorded.

    python benchmarks/distributed.py             # ~5 min on 2 cores (Pong's ROMs load first)
    python benchmarks/distributed.py --quick     # smoke run
    python benchmarks/distributed.py --only CartPole --rollout   # rollout mode only, ~1 min
    python benchmarks/distributed.py --constants # Ray's cost per call by reply size, ~1 min

``--constants`` measures what the README's scaling model needs, Ray alone: an async actor
returns a prebuilt array of S bytes (8 B; 64 KB, inlined in the reply; 1.8 MB, 7.2 MB and 16
MB, through the object store) to an asyncio driver keeping 1 or 2 calls in flight; wall time
per call, and the CPU time per call of the driver, the actor and the raylet (from /proc).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray

import aiopool
from aiopool.distributed import make_remote


class RandomPolicy:
    """Rollout mode's policy: uniform random actions, drawn in the actor."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.rng = np.random.default_rng(0)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.rng.integers(0, self.n, size=len(obs))


async def measure_stream(pool: Any, seconds: float, warmup: float,
                         policy: RandomPolicy | None = None) -> dict[str, float]:
    """``stream()`` + ``batch.send`` for ``seconds`` after ``warmup``, with precomputed
    actions or ``policy(batch.obs)``; the pool stays usable (every batch received gets its
    actions before the window ends)."""
    n_act = int(pool.single_action_space.n)
    acts = np.random.default_rng(0).integers(0, n_act, size=(64, pool.batch_size))
    k = steps = batches = 0
    start = cpu = 0.0
    t0 = time.perf_counter()
    measuring = False
    async for batch in pool.stream():
        batch.send(acts[k % 64, :len(batch)] if policy is None else policy(batch.obs))
        k += 1
        now = time.perf_counter()
        if not measuring and now - t0 >= warmup:
            measuring, start, cpu = True, now, time.process_time()
            continue
        if measuring:
            steps += len(batch)
            batches += 1
            if now - start >= seconds:
                break
    wall = time.perf_counter() - start
    return {"steps_per_s": steps / wall, "us_per_batch": 1e6 * wall / batches,
            "driver_cpu_us_per_batch": 1e6 * (time.process_time() - cpu) / batches}


async def measure_rollouts(pool: Any, seconds: float, warmup: float,
                           policy: RandomPolicy, horizon: int) -> dict[str, float]:
    steps = frags = 0
    start = cpu = 0.0
    t0 = time.perf_counter()
    measuring = False
    async for f in pool.rollouts(policy, horizon=horizon):
        now = time.perf_counter()
        if not measuring and now - t0 >= warmup:
            measuring, start, cpu = True, now, time.process_time()
            continue
        if measuring:
            steps += f.reward.size
            frags += 1
            if now - start >= seconds:
                break
    wall = time.perf_counter() - start
    return {"steps_per_s": steps / wall, "us_per_batch": 1e6 * wall / max(frags, 1),
            "driver_cpu_us_per_batch": 1e6 * (time.process_time() - cpu) / max(frags, 1)}


def build(env: str, n: int, b: int, horizon: int, rollout_only: bool,
          ) -> list[tuple[str, Any, str]]:
    """(runner name, pool, mode) for one config: ``n`` envs per actor, batches of ``b``."""
    remote = {"num_cpus": 1, "num_threads": 1, "seed": 0}
    runners: list[tuple[str, Any, str]] = []
    if not rollout_only:
        runners += [
            ("in process, 1 thread", aiopool.make(env, num_envs=n, batch_size=b, num_threads=1),
             "stream"),
            ("in process, 2 threads, 2x envs",
             aiopool.make(env, num_envs=2 * n, batch_size=b, num_threads=2), "stream"),
            ("Ray, 1 actor", make_remote(env, num_envs=n, batch_size=b, **remote), "stream"),
            ("Ray, 2 actors", make_remote(env, num_envs=2 * n, batch_size=b, num_actors=2,
                                          **remote), "stream"),
        ]
    if horizon:  # one batch of all an actor's envs: rollouts step them in lockstep
        runners += [
            (f"in process, 1 thread, B={n}, policy",
             aiopool.make(env, num_envs=n, batch_size=n, num_threads=1), "policy"),
            (f"in process, 2 threads, 2x envs, B={n}, policy",
             aiopool.make(env, num_envs=2 * n, batch_size=n, num_threads=2), "policy"),
            (f"Ray rollout T={horizon}, 1 actor",
             make_remote(env, num_envs=n, batch_size=n, **remote), "rollout"),
            (f"Ray rollout T={horizon}, 2 actors",
             make_remote(env, num_envs=2 * n, batch_size=n, num_actors=2, **remote), "rollout"),
        ]
    return runners


async def run_config(env: str, n: int, b: int, horizon: int, repeats: int, seconds: float,
                     warmup: float, rollout_only: bool) -> list[dict[str, Any]]:
    runners = build(env, n, b, horizon, rollout_only)
    rows: list[dict[str, Any]] = []
    policies = {name: RandomPolicy(int(p.single_action_space.n)) for name, p, _ in runners}
    try:
        for name, pool, mode in runners:  # first reset (Atari: ROM loads) and warm-up
            if mode != "rollout":
                await measure_stream(pool, 0.5, 0.5, policies[name] if mode == "policy" else None)
            else:
                await measure_rollouts(pool, 0.5, 0.5, policies[name], horizon)
        for rep in range(repeats):
            for name, pool, mode in runners:
                load = os.getloadavg()[0]
                if mode != "rollout":
                    r = await measure_stream(pool, seconds, warmup,
                                             policies[name] if mode == "policy" else None)
                else:
                    r = await measure_rollouts(pool, seconds, warmup, policies[name], horizon)
                rows.append({"env": env, "envs_per_actor": n, "batch_size": b, "runner": name,
                             "repeat": rep, "load1": load, **r})
                print(f"  {env} n={n} B={b} {name:34s} {r['steps_per_s']:>12,.0f} steps/s "
                      f"{r['us_per_batch']:>9,.0f} us/batch", flush=True)
    finally:
        for _, pool, _ in runners:
            pool.close()
    return rows


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    keys = sorted({(r["env"], r["envs_per_actor"], r["batch_size"]) for r in rows},
                  key=lambda k: (k[0], k[1]))
    for env, n, b in keys:
        mine = [r for r in rows if (r["env"], r["envs_per_actor"], r["batch_size"]) == (env, n, b)]
        names = list(dict.fromkeys(r["runner"] for r in mine))
        med = {name: {k: statistics.median(r[k] for r in mine if r["runner"] == name)
                      for k in ("steps_per_s", "us_per_batch", "driver_cpu_us_per_batch")}
               for name in names}
        for name in names:  # each against its like: same envs, threads (actors), actions
            two = ("2 " in name and "actors" in name) or "2 threads" in name
            base = "in process, 2 threads, 2x envs" if two else "in process, 1 thread"
            if "rollout" in name or "policy" in name:
                base += f", B={n}, policy"
            ratio = med[name]["steps_per_s"] / med[base]["steps_per_s"] if base in med else None
            out.append({"env": env, "envs_per_actor": n, "batch_size": b, "runner": name,
                        **med[name], "vs_in_process": ratio})
    return out


def table(summary: list[dict[str, Any]]) -> str:
    lines = ["| env | n/actor | B | runner | env-steps/s | µs per batch (fragment) | "
             "driver CPU µs per batch | × same-size in-process pool |",
             "|---|---|---|---|---|---|---|---|"]
    for s in summary:
        ratio = "–" if s["vs_in_process"] is None else f"{s['vs_in_process']:.2f}"
        lines.append(f"| {s['env']} | {s['envs_per_actor']} | {s['batch_size']} | "
                     f"{s['runner']} | {s['steps_per_s']:,.0f} | {s['us_per_batch']:,.0f} | "
                     f"{s['driver_cpu_us_per_batch']:,.0f} | {ratio} |")
    return "\n".join(lines)


def plot(summary: list[dict[str, Any]], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    envs = list(dict.fromkeys(s["env"] for s in summary))
    fig, axes = plt.subplots(1, len(envs), figsize=(6 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs, strict=True):
        mine = [s for s in summary if s["env"] == env]
        ax.barh([s["runner"] for s in mine], [s["steps_per_s"] for s in mine])
        ax.set_title(f"{env} (n={mine[0]['envs_per_actor']}/actor, B={mine[0]['batch_size']})")
        ax.set_xlabel("env-steps/s")
        ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


@ray.remote
class _Replier:
    """Returns a prebuilt array of ``nbytes`` (the actor side of ``--constants``)."""

    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}

    async def reply(self, actions: np.ndarray, nbytes: int) -> np.ndarray:
        if nbytes not in self.arrays:
            self.arrays[nbytes] = np.ones(max(nbytes, 8) // 8)
        return self.arrays[nbytes]

    def pid(self) -> int:
        return os.getpid()


def _cpu_seconds(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_constants(scratch: str, calls: int) -> list[dict[str, Any]]:
    """Wall and CPU per call of one actor call returning S bytes (see the module docstring)."""
    actor = _Replier.remote()
    pids = {ray.get(actor.pid.remote()): "actor", os.getpid(): "driver"}
    for entry in Path("/proc").iterdir():  # this Ray's raylet (its command line names scratch)
        with_scratch = entry.name.isdigit() and scratch in _cmdline(entry)
        if with_scratch and "raylet" in _cmdline(entry).split(" ")[0]:
            pids[int(entry.name)] = "raylet"
    actions = np.zeros(64, np.int64)

    async def run(nbytes: int, depth: int, n: int) -> None:
        refs = [actor.reply.remote(actions, nbytes) for _ in range(depth)]
        for _ in range(n):
            await refs.pop(0)
            refs.append(actor.reply.remote(actions, nbytes))
        for ref in refs:
            await ref

    rows = []
    for nbytes in (8, 64_000, 1_810_000, 7_240_000, 16_000_000):
        for depth in (1, 2):
            asyncio.run(run(nbytes, depth, 10))
            n = calls if nbytes < 5_000_000 else max(calls // 3, 1)
            load = os.getloadavg()[0]
            cpu0 = {p: _cpu_seconds(p) for p in pids}
            t0 = time.perf_counter()
            asyncio.run(run(nbytes, depth, n))
            wall = time.perf_counter() - t0
            row: dict[str, Any] = {"bytes": nbytes, "depth": depth, "load1": load,
                                   "ms_per_call": 1e3 * wall / (n + depth)}
            for p, name in pids.items():
                row[f"{name}_cpu_ms"] = 1e3 * (_cpu_seconds(p) - cpu0[p]) / (n + depth)
            rows.append(row)
            print(f"  {nbytes:>10,} B, {depth} in flight: {row['ms_per_call']:6.2f} ms/call, CPU "
                  + ", ".join(f"{k[:-7]} {v:.2f}" for k, v in row.items() if k.endswith("_cpu_ms"))
                  + " ms/call", flush=True)
    ray.kill(actor)
    return rows


def _cmdline(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny budget (smoke test)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--only", default="", help="run configs whose env contains this")
    parser.add_argument("--rollout", action="store_true",
                        help="only rollout mode and its in-process baseline")
    parser.add_argument("--envs", type=int, default=0,
                        help="envs per actor (default: 128; rollout mode's batch is all of them)")
    parser.add_argument("--constants", action="store_true",
                        help="only Ray's cost per call by reply size (the scaling model's)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    configs = [("CartPole-v1", 128, 64, 128), ("Pong-v5", 128, 64, 0)]
    repeats, seconds, warmup = args.repeats, args.seconds, 1.0
    if args.quick:
        configs = [("CartPole-v1", 16, 8, 8)]
        repeats, seconds, warmup = 1, 0.3, 0.1
    configs = [(env, args.envs or n, min(b, args.envs or n), horizon)
               for env, n, b, horizon in configs if args.only in env]
    scratch = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: socket paths <= 107 bytes
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
                      RAY_AUTH_MODE="disabled", RAY_TMPDIR=scratch)  # loopback, no ~/.ray token
    ray.init(num_cpus=8, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    load0 = os.getloadavg()
    if args.constants:
        try:
            constants = measure_constants(scratch, 10 if args.quick else 100)
        finally:
            ray.shutdown()
            shutil.rmtree(scratch, ignore_errors=True)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "distributed_constants.json"
        path.write_text(json.dumps({"ray": ray.__version__, "cpus": os.cpu_count(),
                                    "load1_before": load0[0], "calls": constants}, indent=1))
        print(f"load average {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}; wrote {path}")
        return
    rows: list[dict[str, Any]] = []
    try:
        for env, n, b, horizon in configs:
            if horizon or not args.rollout:
                rows += asyncio.run(run_config(env, n, b, horizon, repeats, seconds, warmup,
                                               args.rollout))
    finally:
        ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)
    summary = summarize(rows)
    print(table(summary))
    result = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "ray": ray.__version__},
              "load1_before": load0[0], "load1_after": os.getloadavg()[0],
              "repeats": repeats, "seconds": seconds, "summary": summary, "measurements": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "distributed_quick" if args.quick else "distributed"
    if args.only:
        stem += "_" + "".join(c for c in args.only if c.isalnum())
    if args.rollout:
        stem += "_rollout"
    if args.envs:
        stem += f"_n{args.envs}"
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    plot(summary, args.out / f"{stem}.png")
    print(f"load average {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}; "
          f"wrote {args.out / (stem + '.json')}")


if __name__ == "__main__":
    main()
