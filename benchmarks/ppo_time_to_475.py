"""Wall-clock time for PPO to reach a mean return of 475 on CartPole-v1: aiopool against
gymnasium's SyncVectorEnv and AsyncVectorEnv.

Question: how long does ``examples/ppo_cartpole_async.py`` take to reach the target with its
actor and learner overlapped, and how long does the same PPO take with the usual serial
collect-then-learn loop over aiopool, over ``SyncVectorEnv`` and over ``AsyncVectorEnv``?

Method: every runner uses the example's ``Args`` defaults (same envs, rollout length,
minibatches, epochs, learning rate, seed), its ``Agent``, its action sampling and its learner
(``learner_init`` / ``learner_update``), so only the rollout loop differs. The gymnasium runners
are the CleanRL loop: ``num_steps`` vector steps, then one update, with next-step autoreset and
the reset steps masked out exactly as the example does. Each run is a fresh subprocess (this
process tree, this run); repeats are interleaved (each seed runs every runner once, in a
shuffled order) so slow phases of a noisy machine hit all runners alike. "seconds" is the
training loop, from the first reset to the target (env creation, the learner process and
imports excluded; "process s" includes them). The table reports medians over the seeds that
reached the target.

Usage:
    python benchmarks/ppo_time_to_475.py                    # 5 seeds x 4 runners, ~4 min
    python benchmarks/ppo_time_to_475.py --seeds 1 --runners aiopool-overlapped,gym-sync
    python benchmarks/ppo_time_to_475.py --busy-neighbour   # a spinning process on one core

Writes ``<out>/ppo_time_to_475.json`` (``ppo_time_to_475_busy.json`` with a busy neighbour;
default ``benchmarks/results``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import ppo_cartpole_async as ppo
from _machine import busy_neighbour, load_text, machine_info

ROOT = Path(__file__).resolve().parents[1]

RUNNERS = {
    "aiopool-overlapped": "aiopool, actor and learner overlapped (the example)",
    "aiopool-serial": "aiopool, serial (example --no-overlap)",
    "gym-sync": "gymnasium SyncVectorEnv, serial",
    "gym-async": "gymnasium AsyncVectorEnv, serial",
}


def run_aiopool(args: ppo.Args) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(io.StringIO()):
        args.plot = str(Path(tmp) / "curve.png")
        out = asyncio.run(ppo.main(args))
    return {k: out[k] for k in ("reached", "mean_return", "global_step", "seconds", "updates",
                                "serial_updates")}


def run_gymnasium(args: ppo.Args, mode: str) -> dict[str, Any]:
    """The same PPO as the example in CleanRL's serial loop over a gymnasium vector env."""
    import gymnasium as gym
    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec(
        args.env_id, num_envs=args.num_envs, vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}))
    obs_shape = envs.single_observation_space.shape
    obs_dim, num_actions = int(np.prod(obs_shape)), int(envs.single_action_space.n)
    actor = ppo.Agent(obs_dim, num_actions)
    ppo.learner_init(args, obs_dim, num_actions,
                     {k: v.numpy() for k, v in actor.state_dict().items()})
    m, rollout_size = args.num_envs, args.num_envs * args.num_steps
    num_updates = args.total_timesteps // rollout_size
    env_ids = np.arange(m)
    recent: collections.deque[float] = collections.deque(maxlen=args.return_window)
    global_step = updates = 0
    reached = False

    start = time.perf_counter()
    obs, _ = envs.reset(seed=args.seed)
    obs = obs.astype(np.float32)
    valid = np.ones(m, bool)  # False right after an episode ended: that step only resets
    while not reached and updates < num_updates:
        r = ppo.Rollout.empty(rollout_size, obs_shape)
        for t in range(args.num_steps):
            rows = slice(t * m, (t + 1) * m)
            actions, logprobs = ppo.act(actor, obs, rng)
            r.obs[rows], r.actions[rows], r.logprobs[rows] = obs, actions, logprobs
            r.env_id[rows], r.valid[rows] = env_ids, valid
            obs, reward, terminated, truncated, info = envs.step(actions)
            obs = obs.astype(np.float32)
            r.reward[rows], r.terminated[rows], r.truncated[rows] = reward, terminated, truncated
            r.next_obs[rows] = obs
            valid = ~(terminated | truncated)
            global_step += m
            if "episode" in info:
                recent.extend(info["episode"]["r"][info["_episode"]].tolist())
            if len(recent) == args.return_window and np.mean(recent) >= args.target_return:
                reached = True
                break
        else:
            lr = (1.0 - updates / num_updates if args.anneal_lr else 1.0) * args.learning_rate
            weights, _stats = ppo.learner_update(r, lr)
            actor.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
            updates += 1
    seconds = time.perf_counter() - start
    envs.close()
    return {"reached": reached, "mean_return": float(np.mean(recent)),
            "global_step": global_step, "seconds": seconds, "updates": updates}


def run_one(runner: str, seed: int) -> dict[str, Any]:
    args = ppo.Args(seed=seed)
    if runner == "aiopool-overlapped":
        return run_aiopool(args)
    if runner == "aiopool-serial":
        args.overlap = False
        return run_aiopool(args)
    return run_gymnasium(args, {"gym-sync": "sync", "gym-async": "async"}[runner])


def measure(runner: str, seed: int, timeout: float) -> dict[str, Any]:
    """One run in a fresh subprocess of this script."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--one", runner, "--seeds", str(seed)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{runner} seed {seed} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"runner": runner, "seed": seed, **result,
            "process_seconds": time.perf_counter() - started, "load": os.getloadavg()}


def summarise(runs: list[dict[str, Any]], runners: list[str]) -> list[dict[str, Any]]:
    rows = []
    for runner in runners:
        mine = [r for r in runs if r["runner"] == runner]
        ok = [r for r in mine if r["reached"]]

        def median(key: str, ok: list[dict[str, Any]] = ok) -> float:
            return statistics.median(r[key] for r in ok) if ok else float("nan")

        rows.append({"runner": runner, "reached": len(ok), "runs": len(mine),
                     "median_seconds": median("seconds"),
                     "median_steps": median("global_step"),
                     "median_sps": statistics.median(r["global_step"] / r["seconds"]
                                                     for r in mine),
                     "median_process_seconds": median("process_seconds"),
                     "seconds": {r["seed"]: round(r["seconds"], 2) for r in mine},
                     "steps": {r["seed"]: r["global_step"] for r in mine}})
    return rows


def render(rows: list[dict[str, Any]]) -> str:
    ref = next((r["median_seconds"] for r in rows if r["runner"] == "gym-sync"), float("nan"))
    lines = ["| runner | reached | median s to 475 | vs SyncVectorEnv | median env steps "
             "| env steps/s | median process s | s per seed |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per_seed = ", ".join(f"{s}: {v:.1f}" for s, v in r["seconds"].items())
        lines.append(f"| {RUNNERS[r['runner']]} | {r['reached']}/{r['runs']} "
                     f"| {r['median_seconds']:.1f} | {ref / r['median_seconds']:.2f}x "
                     f"| {r['median_steps']:,.0f} | {r['median_sps']:,.0f} "
                     f"| {r['median_process_seconds']:.1f} | {per_seed} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="1,2,3,4,5", help="comma-separated seeds")
    p.add_argument("--runners", default=",".join(RUNNERS),
                   help=f"comma-separated subset of {', '.join(RUNNERS)}")
    p.add_argument("--timeout", type=float, default=900, help="seconds per run")
    p.add_argument("--busy-neighbour", action="store_true",
                   help="run a busy process (`while True: pass`) pinned to the last usable core "
                        "for the whole run")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--one", choices=list(RUNNERS), help=argparse.SUPPRESS)  # a child run
    args = p.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.runners = args.runners.split(",")
    if unknown := set(args.runners) - set(RUNNERS):
        p.error(f"unknown runners {sorted(unknown)}; expected some of {list(RUNNERS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args.one, args.seeds[0])))
        return 0

    machine = machine_info("torch", "gymnasium")
    loads = [os.getloadavg()]
    started = time.monotonic()
    runs = []
    order = random.Random(0)
    with busy_neighbour(args.busy_neighbour) as neighbour:
        for seed in args.seeds:
            runners = list(args.runners)
            order.shuffle(runners)
            for runner in runners:
                run = measure(runner, seed, args.timeout)
                runs.append(run)
                serial = (f"  {run['serial_updates']}/{run['updates']} updates serial"
                          if "serial_updates" in run else "")
                print(f"  seed {seed} {runner:<19} {'reached' if run['reached'] else 'MISSED '} "
                      f"{run['seconds']:6.1f} s  {run['global_step']:>8,} steps  "
                      f"load {run['load'][0]:.2f}{serial}", file=sys.stderr, flush=True)
            loads.append(os.getloadavg())
    run_seconds = time.monotonic() - started
    rows = summarise(runs, args.runners)

    defaults = ppo.Args()
    print(f"# PPO CartPole-v1: wall-clock time to a mean return of {defaults.target_return:g}\n")
    print(f"{machine['cpu']}; {machine['cores']} cores ({machine['usable_cores']} usable); "
          f"load average (1/5/15 min) at start {load_text(loads[0])}, "
          f"at end {load_text(loads[-1])}; "
          f"seeds {', '.join(map(str, args.seeds))}; {defaults.num_envs} envs x "
          f"{defaults.num_steps} steps per rollout; run time {run_seconds:.0f} s.\n")
    if neighbour is not None:
        print(f"A busy process was pinned to core {neighbour} for the whole run.\n")
    print(render(rows))

    args.out.mkdir(parents=True, exist_ok=True)
    result = {
        "question": "wall-clock seconds for the same PPO to reach the target return",
        "ppo_args": {k: v for k, v in vars(defaults).items() if k != "plot"},
        "seeds": args.seeds,
        "busy_neighbour_core": neighbour,
        "machine": {**machine, "load_start": loads[0], "load_end": loads[-1],
                    "load_after_each_seed": loads[1:]},
        "run_seconds": run_seconds,
        "summary": rows,
        "runs": runs,
    }
    path = args.out / ("ppo_time_to_475_busy.json" if neighbour is not None
                       else "ppo_time_to_475.json")
    path.write_text(json.dumps(result, indent=1))
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
