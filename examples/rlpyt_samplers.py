"""rlpyt's three samplers, rebuilt over ``pool.stream()``: where the envs step and where the
actions are computed.

    python examples/rlpyt_samplers.py --sampler serial        # one loop, no overlap
    python examples/rlpyt_samplers.py --sampler alternating   # two halves take turns
    python examples/rlpyt_samplers.py --sampler central       # many consumers, one forward
    python examples/rlpyt_samplers.py --sampler all           # the three, one after another

- ``serial`` (rlpyt's ``SerialSampler``): one batch holds every env (``batch_size =
  num_envs``). The envs step, then the agent computes every action, then the envs step again:
  nothing overlaps, and the forward runs on the loop.
- ``alternating`` (rlpyt's ``AlternatingSampler``): ``batch_size = num_envs // 2``. While one
  half waits for its actions, only the other half is in flight, so the next batch is exactly
  that half: the halves alternate, and each half's forward (in a thread) runs while the other
  half steps in the C++ workers.
- ``central`` (rlpyt's ``GpuSampler``, parallel workers with central batched inference): one
  consumer coroutine per batch of envs (``num_envs // batch_size``) streams small batches;
  their calls meet in a ``DynamicBatcher``, which runs one forward per loop tick for all.

The agent is a small torch MLP acting greedily (argmax of its logits; Discrete actions). Each
iteration collects ``num_envs * batch_T`` rows into ``Samples`` (rlpyt's ``[batch_T,
batch_B]`` buffer, flat: rows in arrival order, each env's rows in time order), where a learner
would take them. Prints env-steps/s per iteration and overall.

Which one wins depends on what a step and a forward cost (2-core VM, one run each, load ~2):
on CartPole with the default agent, serial ran 280-400k env-steps/s, alternating and central
85-110k: a CartPole step and this forward take microseconds, less than the hop to the
forward's thread that the other two pay. With ``--env-id Pong-v5 --num-envs 16 --batch-size 4
--batch-T 32 --hidden 256``, where a batch's steps and its forward both take milliseconds, the
overlap pays: after the first iteration (ROM loading), serial ran ~0.9k, alternating ~1.1k and
central ~1.3k env-steps/s.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

import aiopool
from aiopool.inference import DynamicBatcher, from_callable, torch_policy

SAMPLERS = ("serial", "alternating", "central")
# torch.as_tensor shares the batch's read-only memory (the agent only reads it)
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


@dataclass
class Args:
    sampler: str = "central"
    """serial | alternating | central | all"""
    env_id: str = "CartPole-v1"
    num_envs: int = 64
    batch_size: int = 8
    """central only: envs per batch and per consumer (serial: num_envs; alternating:
    num_envs // 2)"""
    batch_T: int = 64
    """steps per env in one iteration's samples (rlpyt's batch_T)"""
    iterations: int = 20
    hidden: int = 64
    """the agent's hidden units: a larger agent makes the forward costlier"""
    seed: int = 0
    num_threads: int = 0
    """aiopool worker threads (0: its default, one less than the cores)"""


class Samples:
    """One iteration's samples: each row is an observation as it arrived, with the reward and
    done that came with it (from the env's previous action) and the action sent for it. The
    rows of one env are in time order; group them by ``env_id`` for per-env trajectories."""

    def __init__(self, size: int, pool: aiopool.Pool) -> None:
        space = pool.single_observation_space
        self.obs = np.zeros((size, *space.shape), space.dtype)
        self.action = np.zeros(size, np.int64)
        self.reward = np.zeros(size, np.float32)
        self.done = np.zeros(size, bool)
        self.env_id = np.zeros(size, np.int32)
        self.rows = 0

    def add(self, batch: aiopool.Batch, actions: np.ndarray) -> bool:
        """Copy the batch's rows in (the batch's arrays are views the pool reuses); True when
        the buffer is full."""
        rows = slice(self.rows, self.rows + len(batch))
        self.obs[rows], self.action[rows], self.env_id[rows] = batch.obs, actions, batch.env_id
        self.reward[rows], self.done[rows] = batch.reward, batch.terminated | batch.truncated
        self.rows += len(batch)
        return self.rows == len(self.env_id)


class Collector:
    """Fills ``Samples`` an iteration at a time; ``add`` says when the run is over."""

    def __init__(self, args: Args, pool: aiopool.Pool) -> None:
        self.args, self.pool = args, pool
        self.samples = Samples(args.num_envs * args.batch_T, pool)
        self.last: Samples | None = None  # the last full iteration: where a learner takes it
        self.iterations = self.steps = 0
        self.start = self.lap = time.perf_counter()

    def add(self, batch: aiopool.Batch, actions: np.ndarray) -> bool:
        self.steps += len(batch)
        if not self.samples.add(batch, actions):
            return False
        now = time.perf_counter()
        self.iterations += 1
        print(f"  itr {self.iterations:>3}  {self.samples.rows:,} samples  "
              f"{self.samples.rows / (now - self.lap):>10,.0f} env-steps/s")
        self.last, self.lap = self.samples, now
        if self.iterations == self.args.iterations:
            return True
        self.samples = Samples(len(self.samples.env_id), self.pool)
        return False


Agent = Callable[[np.ndarray], np.ndarray]


async def serial(pool: aiopool.Pool, agent: Agent, collector: Collector) -> None:
    async for batch in pool.stream():  # every env's row
        actions = agent(batch.obs)  # on the loop: the envs are idle meanwhile anyway
        batch.send(actions)
        if collector.add(batch, actions):
            return


async def alternating(pool: aiopool.Pool, agent: Agent, collector: Collector) -> None:
    policy = from_callable(agent)  # the forward in a thread, the loop stays free
    async for batch in pool.stream():  # one half; the other half steps meanwhile
        actions = await policy(batch.obs)
        batch.send(actions)
        if collector.add(batch, actions):
            return


async def central(pool: aiopool.Pool, agent: Agent, collector: Collector) -> DynamicBatcher:
    policy = DynamicBatcher(agent)  # one forward per loop tick for every consumer's request

    async def consumer() -> None:
        async for batch in pool.stream():
            actions = await policy(batch.obs)
            if pool.closed:
                return
            batch.send(actions)
            if collector.add(batch, actions):
                pool.close()  # ends the other consumers' streams
                return

    # One consumer per batch: each has a batch in flight whenever it waits for one.
    await asyncio.gather(*(consumer() for _ in range(pool.num_envs // pool.batch_size)))
    await policy.aclose()
    return policy


def make_agent(pool: aiopool.Pool, args: Args) -> nn.Module:
    torch.manual_seed(args.seed)
    obs_dim = int(np.prod(pool.single_observation_space.shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(obs_dim, args.hidden), nn.Tanh(),
                         nn.Linear(args.hidden, int(pool.single_action_space.n)))


async def main(args: Args) -> dict[str, object]:
    if args.sampler not in SAMPLERS:
        raise ValueError(f"--sampler {args.sampler!r}: expected one of {', '.join(SAMPLERS)}")
    batch_size = {"serial": args.num_envs, "alternating": args.num_envs // 2,
                  "central": args.batch_size}[args.sampler]
    if args.num_envs % batch_size:
        raise ValueError(f"num_envs ({args.num_envs}) must be a multiple of the batch size "
                         f"({batch_size}): an iteration is whole batches")
    async with aiopool.make(args.env_id, num_envs=args.num_envs, batch_size=batch_size,
                            num_threads=args.num_threads or None, seed=args.seed) as pool:
        model = make_agent(pool, args)
        agent = torch_policy(model)  # greedy; torch.set_num_threads(1)
        collector = Collector(args, pool)
        print(f"{args.sampler} sampler: {args.env_id}, {args.num_envs} envs in batches of "
              f"{batch_size}" + (f", {args.num_envs // batch_size} consumers"
                                 if args.sampler == "central" else ""))
        batcher = None
        if args.sampler == "serial":
            await serial(pool, agent, collector)
        elif args.sampler == "alternating":
            await alternating(pool, agent, collector)
        else:
            batcher = await central(pool, agent, collector)
    seconds = time.perf_counter() - collector.start
    rate = collector.steps / seconds
    print(f"{args.sampler}: {collector.steps:,} env-steps in {seconds:.2f} s = "
          f"{rate:,.0f} env-steps/s"
          + (f"; {batcher.stats.rows_per_forward:.0f} rows per forward" if batcher else ""))
    return {"sampler": args.sampler, "steps": collector.steps, "seconds": seconds,
            "rate": rate, "iterations": collector.iterations, "samples": collector.last,
            "model": model, "batch_size": batch_size,
            "stats": batcher.stats if batcher else None}


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


if __name__ == "__main__":
    cli = parse_args()
    for sampler in SAMPLERS if cli.sampler == "all" else (cli.sampler,):
        asyncio.run(main(replace(cli, sampler=sampler)))
