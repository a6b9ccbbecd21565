"""Your own Python env behind aiopool's async API: a gymnasium env defined in this file runs in
worker processes, and a coroutine streams its batches while a second task on the same loop
prints progress. The policy is a one-line heuristic that the env rewards.

    python examples/custom_env.py                     # ~3 s
    python examples/custom_env.py --num-envs 64 --batch-size 32 --num-workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

import aiopool


class Corridor(gym.Env[dict[str, np.ndarray], int]):
    """Walk a 1-d corridor to the goal at ``length``: Dict observations (position and the
    distance left), two actions (back, forward), reward 1 at the goal and -0.01 per step."""

    def __init__(self, length: int = 10) -> None:
        self.length = length
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(0, length, (1,), np.int64),
            "left": gym.spaces.Box(0, length, (1,), np.int64)})
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"position": np.array([self.position]),
                "left": np.array([self.length - self.position])}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray], dict]:
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, self.length // 2))
        return self._obs(), {}

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        self.position = max(0, self.position + (1 if action == 1 else -1))
        at_goal = self.position >= self.length
        return self._obs(), 1.0 if at_goal else -0.01, at_goal, False, {}


@dataclass
class Args:
    num_envs: int = 32
    batch_size: int = 16
    num_workers: int = 2
    seconds: float = 3.0
    seed: int = 0


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


async def main(args: Args) -> dict[str, float]:
    steps, returns = 0, []
    done = asyncio.Event()

    async def progress() -> None:  # runs on the same loop as the consumer below
        while not done.is_set():
            await asyncio.sleep(0.5)
            mean = np.mean(returns[-100:]) if returns else float("nan")
            print(f"  {steps:>8,} env-steps  {len(returns):>6,} episodes  mean return {mean:.3f}")

    # A factory (here a class; lambdas work too) makes the envs in the worker processes.
    async with aiopool.make(Corridor, num_envs=args.num_envs, batch_size=args.batch_size,
                            num_workers=args.num_workers, seed=args.seed, length=10) as pool:
        print(f"{pool}\n  obs {pool.single_observation_space}")
        reporter = asyncio.create_task(progress())
        start = time.perf_counter()
        async for batch in pool.stream():
            # Dict observations arrive as a dict of arrays, one row per env of the batch.
            actions = (batch.obs["left"][:, 0] > 0).astype(np.int64)  # always walk forward
            batch.send(actions)
            steps += len(batch)
            ended = batch.terminated | batch.truncated
            returns.extend(batch.info["episode_return"][ended].tolist())
            if time.perf_counter() - start > args.seconds:
                break
        elapsed = time.perf_counter() - start
        done.set()
        await reporter
    out = {"steps": steps, "episodes": len(returns), "steps_per_s": steps / elapsed,
           "mean_return": float(np.mean(returns)) if returns else float("nan")}
    print(f"{steps:,} env-steps in {elapsed:.1f} s ({out['steps_per_s']:,.0f}/s), "
          f"{len(returns):,} episodes, mean return {out['mean_return']:.3f}")
    return out


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
