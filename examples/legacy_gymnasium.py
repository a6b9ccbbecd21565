"""Existing gymnasium vector-env code, switched to aiopool by changing one line.

The loop below is ordinary gymnasium 1.x code: a vector env, gymnasium's RecordEpisodeStatistics
wrapper, reset(seed=...), step(), episode statistics from the infos. Only the line that builds
the vector env changes:

    envs = gym.make_vec(args.env_id, args.num_envs, vectorization_mode="sync")   # before
    envs = aiopool.make_gymnasium(args.env_id, args.num_envs)                    # after

Observations, rewards and episode ends stay exactly the same for the same seeds.

    python examples/legacy_gymnasium.py                 # ~1 s
    python examples/legacy_gymnasium.py --num-envs 64 --steps 5000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

import aiopool


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    num_envs: int = 8
    steps: int = 2000
    seed: int = 0


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


def main(args: Args) -> dict[str, float]:
    # envs = gym.make_vec(args.env_id, args.num_envs, vectorization_mode="sync")  # before
    envs = aiopool.make_gymnasium(args.env_id, args.num_envs)  # after: the one-line change
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)

    obs, _ = envs.reset(seed=args.seed)
    returns: list[float] = []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        actions = (obs[:, 2] + 0.5 * obs[:, 3] > 0).astype(np.int64)  # lean into the fall
        obs, _, _, _, infos = envs.step(actions)
        if "episode" in infos:
            returns.extend(infos["episode"]["r"][infos["_episode"]].tolist())
        if step % 500 == 0:
            mean = np.mean(returns[-100:]) if returns else float("nan")
            print(f"  step {step:>6,}  {len(returns):>5,} episodes  mean return {mean:6.1f}")
    elapsed = time.perf_counter() - start
    envs.close()

    rate = args.steps * args.num_envs / elapsed
    mean_return = float(np.mean(returns)) if returns else float("nan")
    print(f"{args.steps * args.num_envs:,} env-steps in {elapsed:.2f} s = {rate:,.0f} "
          f"env-steps/s; {len(returns)} episodes, mean return {mean_return:.1f}")
    return {"episodes": len(returns), "mean_return": mean_return, "rate": rate}


if __name__ == "__main__":
    main(parse_args())
