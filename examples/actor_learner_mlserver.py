"""PPO on CartPole-v1 with its policy served by MLServer: actors over ``pool.stream()`` ask the
server for actions, the learner publishes new weights to the running server after each update.

    python examples/actor_learner_mlserver.py              # reaches 475 in ~1 min on 2 cores
    python examples/actor_learner_mlserver.py --target 127.0.0.1:8081   # a server you run

Needs ``pip install -e ".[mlserver,examples]"`` (mlserver 1.7.1: Python < 3.13).

Three processes:

- **the server**: ``mlserver start`` on loopback, started (free ports) and stopped (nothing left
  behind) by this script with ``aiopool.inference.testing.mlserver_process``, the helper the
  tests use. It serves ``serve_agent`` below with aiopool's ``PolicyRuntime``: observations in,
  the actor head's logits out.
- **the actors**: one coroutine per batch of envs (``num_envs // batch_size``), each ``async
  for batch in pool.stream()``, send their observations through one
  ``DynamicBatcher(KServePolicy(...))`` (calls made in the same loop tick share one
  ``ModelInfer``), sample actions from the logits, record the transitions and send the
  actions back to the pool.
- **the learner**: PPO in torch in a process of its own (``learner_init`` / ``learner_update``
  of ``examples/ppo_cartpole_async.py``, one torch thread), fed each complete rollout by a
  learner task on the actors' loop, which then publishes the new weights to the server
  (``KServePolicy.publish_weights``: the runtime calls ``serve_agent(..., weights=blob)`` and
  swaps the result in; no restart). Every answer carries the version of the weights that
  computed it.

The actors keep acting with the served weights while the learner trains, so the acting policy
lags the learner: at most by one update, because actions for rollout ``k + 2`` go out only once
update ``k`` is published (an actor that gets there first waits for it, holding its batch).
The learner's objective corrects for the lag (decoupled PPO, as in ppo_cartpole_async.py: each
sample weighted by proximal / behaviour probability, the behaviour log-probability being the one
of the logits the actor sampled from).

To use a server you run yourself, serve ``serve_agent`` from this folder (``PYTHONPATH`` =
``examples/``) and pass ``--target``; its ``model-settings.json``::

    {"name": "cartpole", "implementation": "aiopool.inference.mlserver_runtime.PolicyRuntime",
     "parameters": {"extra": {"factory": "actor_learner_mlserver:serve_agent",
                              "kwargs": {"obs_dim": 4, "num_actions": 2},
                              "output_name": "logits"}}}
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import io
import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import ppo_cartpole_async as ppo  # the PPO pieces: Agent, Rollout, learner_init/update
import torch

import aiopool
from aiopool.inference import DynamicBatcher
from aiopool.inference.kserve import KServePolicy


@dataclass
class Args(ppo.Args):
    """ppo_cartpole_async's arguments (its hyper-parameters), and the serving ones."""

    target: str = ""
    """host:port of a running V2 server that serves serve_agent (default: start MLServer)"""
    model: str = "cartpole"
    plot: str = "runs/actor_learner_mlserver.png"


def pack(weights: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **weights)
    return buf.getvalue()


def serve_agent(obs_dim: int, num_actions: int,
                weights: bytes | None = None) -> Callable[[np.ndarray], np.ndarray]:
    """The server's policy factory: obs [B, obs_dim] -> the actor head's logits [B, actions],
    with the weights the learner published (``pack``ed state dict), or fresh ones."""
    torch.set_num_threads(1)
    agent = ppo.Agent(obs_dim, num_actions)
    if weights is not None:
        with np.load(io.BytesIO(weights)) as npz:
            agent.load_state_dict({k: torch.from_numpy(npz[k]) for k in npz.files})

    def logits(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return agent.actor(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    return logits


def sample(logits: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Actions drawn from the logits (Gumbel-max) and their log-probabilities."""
    logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    actions = np.argmax(logp - np.log(-np.log(rng.random(logp.shape))), axis=1)
    return actions, logp[np.arange(len(actions)), actions]


async def train(args: Args, target: str, learner: ProcessPoolExecutor,
                weights: dict[str, np.ndarray], obs_shape: tuple[int, ...]) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    rollout_size = args.num_envs * args.num_steps
    num_updates = args.total_timesteps // rollout_size
    served = KServePolicy(target, args.model, timeout=30)
    await served.wait_ready(60)
    await served.publish_weights(pack(weights), version=0)  # the learner's initial weights
    policy = DynamicBatcher(served)
    pool = aiopool.make(args.env_id, num_envs=args.num_envs, batch_size=args.batch_size,
                        num_threads=args.num_threads or None, seed=args.seed)

    # Per env: the rollout and slot of its action in flight (rollout -1: none).
    pending_rollout = np.full(args.num_envs, -1)
    pending_slot = np.zeros(args.num_envs, np.int64)
    rollouts = {0: ppo.Rollout.empty(rollout_size, obs_shape)}
    issuing = 0  # the rollout new actions go to
    published = 0  # updates whose weights the server has
    full: asyncio.Queue[ppo.Rollout | None] = asyncio.Queue()  # complete rollouts, to learn
    new_weights = asyncio.Event()  # set (and replaced) at each update published, and at stop
    stats: dict[str, float] = {}
    global_step = 0
    episodes: list[tuple[int, float, float]] = []  # (global step, seconds, return)
    recent: collections.deque[float] = collections.deque(maxlen=args.return_window)
    reached = stopped = False
    start = last_print = time.perf_counter()

    def record(batch: aiopool.Batch, obs: np.ndarray, env_ids: np.ndarray) -> None:
        """Each row completes the transition its env had in flight; a rollout whose every
        action has come back goes to the learner."""
        nonlocal global_step
        for rid in np.unique(pending_rollout[env_ids]):
            if rid < 0:
                continue  # the first observation after reset: nothing was in flight
            rows = pending_rollout[env_ids] == rid
            r, slots = rollouts[rid], pending_slot[env_ids[rows]]
            r.reward[slots] = batch.reward[rows]
            r.terminated[slots] = batch.terminated[rows]
            r.truncated[slots] = batch.truncated[rows]
            r.next_obs[slots] = obs[rows]
            r.returned += int(rows.sum())
            global_step += int(rows.sum())
            if r.returned == rollout_size:
                full.put_nowait(rollouts.pop(rid))
        pending_rollout[env_ids] = -1

    def room() -> bool:
        """May an action go out now? Into the rollout being filled, or into the next one if
        that keeps the acting weights at most one update behind the learner's."""
        nonlocal issuing
        if issuing in rollouts and rollouts[issuing].issued < rollout_size:
            return True
        if issuing + 1 > published + 1:
            return False
        issuing += 1
        rollouts[issuing] = ppo.Rollout.empty(rollout_size, obs_shape)
        return True

    def act(obs: np.ndarray, logits: np.ndarray, valid: np.ndarray,
            env_ids: np.ndarray) -> None:
        """Sample, record and send these envs' actions."""
        actions, logprobs = sample(logits, rng)
        r = rollouts[issuing]
        slots = np.arange(r.issued, r.issued + len(env_ids))
        r.obs[slots], r.actions[slots], r.logprobs[slots] = obs, actions, logprobs
        r.env_id[slots], r.valid[slots] = env_ids, valid
        r.issued += len(env_ids)
        pending_rollout[env_ids], pending_slot[env_ids] = issuing, slots
        pool.send(actions, env_ids)

    def stop() -> None:
        nonlocal stopped
        stopped = True
        pool.close()  # ends every actor's stream
        new_weights.set()  # wakes the actors that wait for an update
        full.put_nowait(None)  # and ends the learner task's loop

    async def actor() -> None:
        nonlocal reached, last_print
        async for batch in pool.stream():
            env_ids = batch.env_id.astype(np.int64)
            obs = np.array(batch.obs)  # a copy: batch arrays are views the pool will reuse
            ended = batch.terminated | batch.truncated
            record(batch, obs, env_ids)
            now = time.perf_counter()
            for ret in batch.info["episode_return"][ended].tolist():
                episodes.append((global_step, now - start, ret))
                recent.append(ret)
            if len(recent) == args.return_window and np.mean(recent) >= args.target_return:
                reached = True
            if reached or global_step >= args.total_timesteps:
                stop()
                return
            while True:
                while not (stopped or room()):
                    await new_weights.wait()  # rollout k + 2 waits for update k
                logits = await policy(obs)
                if stopped:
                    return
                if room():  # still, after the await (else: the next update, new logits)
                    # An observation right after an episode ended only resets: valid=False.
                    act(obs, logits, ~ended, env_ids)
                    break
            if now - last_print >= args.print_every:
                last_print = now
                mean = np.mean(recent) if recent else float("nan")
                print(f"global_step={global_step:>8,}  SPS={global_step / (now - start):>6,.0f}"
                      f"  weights={served.weights_version:>3}  mean_return={mean:6.1f}"
                      f"  approx_kl={stats.get('approx_kl', float('nan')):.4f}"
                      f"  rows/call={policy.stats.rows_per_forward:4.1f}", flush=True)

    async def learn() -> None:
        nonlocal published, stats, new_weights
        loop = asyncio.get_running_loop()
        while (rollout := await full.get()) is not None:
            lr = (1.0 - published / num_updates if args.anneal_lr else 1.0) * args.learning_rate
            update, stats = await loop.run_in_executor(learner, ppo.learner_update, rollout, lr)
            await served.publish_weights(pack(update), version=published + 1)
            published += 1
            new_weights.set()
            new_weights = asyncio.Event()

    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(learn())
            for _ in range(args.num_envs // args.batch_size):  # one actor per batch in flight
                tasks.create_task(actor())
    finally:
        pool.close()
        await policy.aclose()  # and the KServePolicy behind it
    seconds = time.perf_counter() - start
    mean_return = float(np.mean(recent)) if recent else float("nan")
    print(f"{'reached' if reached else 'did not reach'} {args.target_return:g}: mean return "
          f"{mean_return:.1f} over the last {len(recent)} episodes after {global_step:,} env "
          f"steps, {published} updates published, {seconds:.1f} s "
          f"({global_step / seconds:,.0f} steps/s, {policy.stats.rows_per_forward:.1f} rows "
          f"per server call)")
    return {"reached": reached, "mean_return": mean_return, "global_step": global_step,
            "seconds": seconds, "sps": global_step / seconds, "updates": published,
            "weights_version": served.weights_version, "episodes": episodes,
            "calls": policy.stats.forwards, "requests": policy.stats.requests}


def main(args: Args) -> dict[str, Any]:
    if args.num_envs % args.batch_size:
        raise ValueError(f"num_envs ({args.num_envs}) must be a multiple of batch_size "
                         f"({args.batch_size}): actions go out a whole batch at a time")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    with aiopool.make(args.env_id) as probe:
        obs_shape = probe.single_observation_space.shape
        obs_dim, num_actions = int(np.prod(obs_shape)), int(probe.single_action_space.n)
    weights = {k: v.numpy() for k, v in ppo.Agent(obs_dim, num_actions).state_dict().items()}
    # The learner's process, forked before any thread of ours starts (the pool's, gRPC's).
    learner = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"),
                                  initializer=ppo.learner_init,
                                  initargs=(args, obs_dim, num_actions, weights))
    learner.submit(int).result()
    server: dict[str, Any] = {}
    try:
        with contextlib.ExitStack() as stack:
            target = args.target
            if not target:
                from aiopool.inference.testing import mlserver_process, policy_model_settings

                models = {args.model: policy_model_settings(
                    f"{Path(__file__).stem}:serve_agent", output_name="logits",
                    kwargs={"obs_dim": obs_dim, "num_actions": num_actions})}
                started = time.perf_counter()
                mls = stack.enter_context(
                    mlserver_process(models, pythonpath=[Path(__file__).resolve().parent]))
                target = mls.grpc_target
                server = {"pid": mls.process.pid if mls.process else None,
                          "repository": str(mls.repository)}
                print(f"MLServer serving {args.model!r} on {target} (ready in "
                      f"{time.perf_counter() - started:.1f} s)")
            out = asyncio.run(train(args, target, learner, weights, obs_shape))
    finally:
        learner.shutdown(cancel_futures=True)
    if args.plot:
        ppo.save_plot(args.plot, out["episodes"], args,
                      f"PPO {args.env_id} served by MLServer, {args.num_envs} envs, "
                      f"seed {args.seed}: {out['seconds']:.1f} s")
        print(f"learning curve: {args.plot}")
    return {**out, "episodes": len(out["episodes"]), "server": server, "plot": args.plot}


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in fields(Args):
        if f.name == "overlap":
            continue  # always overlapped here
        default = getattr(Args, f.name)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default)
    return Args(**vars(p.parse_args()))


if __name__ == "__main__":
    main(parse_args())
