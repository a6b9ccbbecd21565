"""A quick look at aiopool: CartPole-v1 envs stepped by C++ workers, consumed by an asyncio
task while a second task on the same loop keeps printing progress.

    python examples/demo.py            # ~3 s
    python examples/demo.py --seconds 10 --num-envs 256 --batch-size 128
    python examples/demo.py --env-id StarpilotEasy-v0    # Procgen (fetches its library once)
"""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import dataclass

import numpy as np

import aiopool


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    num_envs: int = 64
    batch_size: int = 32
    seconds: float = 3.0
    seed: int = 0


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


async def main(args: Args) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    steps = episodes = 0
    returns: list[float] = []
    done = asyncio.Event()

    async def progress() -> None:  # runs on the same loop as the consumer below
        while not done.is_set():
            await asyncio.sleep(0.5)
            mean = np.mean(returns[-100:]) if returns else float("nan")
            print(f"  {steps:>10,} env-steps  {episodes:>6,} episodes  "
                  f"mean return (last 100) {mean:6.1f}")

    async with aiopool.make(args.env_id, num_envs=args.num_envs, batch_size=args.batch_size,
                            seed=args.seed) as pool:
        print(f"{pool}\n  obs {pool.single_observation_space}, "
              f"actions {pool.single_action_space}")
        # A random policy, drawn ahead of time: numpy's per-call overhead would otherwise cost
        # more than stepping the envs.
        actions = rng.integers(0, int(pool.single_action_space.n), size=(1024, args.batch_size))
        reporter = asyncio.create_task(progress())
        start = 0.0  # from the first batch: the resets before it may load assets (Procgen)
        async for batch in pool.stream():
            if not steps:
                start = time.perf_counter()
            batch.send(actions[steps // args.batch_size % 1024])
            steps += len(batch)
            ended = np.flatnonzero(batch.terminated | batch.truncated)
            if len(ended):
                episodes += len(ended)
                returns.extend(batch.info["episode_return"][ended].tolist())
            if time.perf_counter() - start > args.seconds:
                break
        elapsed = time.perf_counter() - start
        done.set()
        await reporter
    rate = steps / elapsed
    print(f"{steps:,} env-steps in {elapsed:.2f} s = {rate / 1e6:.2f} M env-steps/s; "
          f"{episodes:,} episodes, mean return {np.mean(returns):.1f}"
          + (" (a random CartPole policy scores ~22)" if args.env_id == "CartPole-v1" else ""))
    return {"steps": steps, "episodes": episodes, "rate": rate,
            "mean_return": float(np.mean(returns))}


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
