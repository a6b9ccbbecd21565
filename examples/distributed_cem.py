"""An actor-learner loop on a local two-node Ray cluster, unchanged from the one-machine version
but for how the pool is made.

The cross-entropy method on CartPole-v1 with a linear policy. Each env plays each episode with
its own weights, drawn from a Gaussian. The actor streams batches and acts with each row's
weights; when an episode ends it hands (weights, return) to the learner and draws the env new
weights. The learner, a second task on the same loop, refits the Gaussian to the best fifth of
each generation. ``--nodes 0`` runs the very same loop on ``aiopool.make`` in this process.

    python examples/distributed_cem.py                 # 2 local Ray nodes, one actor on each
    python examples/distributed_cem.py --nodes 0       # one machine, no Ray
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import aiopool


@dataclass
class Args:
    nodes: int = 2              # local Ray nodes, one pool actor on each (0: no Ray)
    num_envs: int = 64
    batch_size: int = 16
    generation: int = 64        # episodes per generation
    elite: float = 0.2
    target: float = 475.0       # stop when a generation's mean return reaches it
    max_generations: int = 30
    seed: int = 0


def make_pool(args: Args) -> Any:
    """The only line that knows where the envs run."""
    if args.nodes == 0:
        return aiopool.make("CartPole-v1", num_envs=args.num_envs, batch_size=args.batch_size,
                            seed=args.seed)
    from aiopool.distributed import make_remote

    return make_remote("CartPole-v1", num_envs=args.num_envs, batch_size=args.batch_size,
                       seed=args.seed, num_actors=args.nodes, num_cpus=1,
                       placement_strategy="STRICT_SPREAD")


async def train(args: Args, pool: Any) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    mean, std = np.zeros(5), np.ones(5)
    weights = rng.normal(mean, std, size=(args.num_envs, 5))
    results: asyncio.Queue[tuple[np.ndarray, float]] = asyncio.Queue()
    history: list[float] = []
    solved = asyncio.Event()

    async def learner() -> None:
        nonlocal mean, std
        while len(history) < args.max_generations:
            gen = [await results.get() for _ in range(args.generation)]
            returns = np.array([r for _, r in gen])
            top = np.argsort(returns)[-max(1, int(args.elite * len(gen))):]
            elite = np.array([gen[k][0] for k in top])
            mean, std = elite.mean(0), elite.std(0) + 0.05 / (1 + len(history))
            history.append(float(returns.mean()))
            print(f"generation {len(history):>3}: mean return {returns.mean():6.1f}, "
                  f"best {returns.max():5.0f}")
            if returns.mean() >= args.target:
                break
        solved.set()

    learner_task = asyncio.create_task(learner())
    steps, start = 0, time.perf_counter()
    async for batch in pool.stream():  # the actor: identical for a local and a remote pool
        ids = batch.env_id
        w = weights[ids]
        ended = batch.terminated | batch.truncated
        for k in np.flatnonzero(ended):  # this row ends an episode played with w[k]
            results.put_nowait((w[k], float(batch.info["episode_return"][k])))
            weights[ids[k]] = rng.normal(mean, std)
        obs = batch.obs
        batch.send((np.einsum("ij,ij->i", obs, w[:, :4]) + w[:, 4] > 0).astype(np.int64))
        steps += len(batch)
        await asyncio.sleep(0)  # the learner runs between batches
        if solved.is_set():
            break
    await learner_task
    return {"generations": len(history), "final_mean_return": history[-1],
            "env_steps": steps, "seconds": time.perf_counter() - start}


def main(args: Args) -> dict[str, Any]:
    if args.nodes == 0:
        with make_pool(args) as pool:
            return asyncio.run(train(args, pool))
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0",
                      RAY_AUTH_MODE="disabled")  # loopback only; no token file in ~/.ray
    os.environ.setdefault("RAY_TMPDIR", tempfile.mkdtemp(prefix="r", dir="/tmp"))
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
    try:
        with make_pool(args) as pool:
            return asyncio.run(train(args, pool))
    finally:
        ray.shutdown()
        cluster.shutdown()


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


if __name__ == "__main__":
    print(main(parse_args()))
