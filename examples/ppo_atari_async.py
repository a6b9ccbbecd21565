"""PPO for Atari as an asyncio actor-learner over aiopool, CleanRL style.

    python examples/ppo_atari_async.py --env-id Breakout-v5               # overlapped (default)
    python examples/ppo_atari_async.py --env-id Breakout-v5 --strict      # CleanRL's serial loop

This is CleanRL's ``ppo_atari_envpool.py`` with its hyper-parameters (8 envs x 128 steps per
rollout, Nature CNN on 4 stacked 84x84 grayscale frames, 4 epochs x 4 minibatches, Adam at
2.5e-4 annealed to 0, clip 0.1, entropy 0.01, GAE with gamma 0.99 and lambda 0.95) and EnvPool's
environment semantics, which that script relies on:

- episodic life: a lost life ends the training episode (``terminated``, so GAE does not
  bootstrap across it) but not the game. The pool is made with ``life_loss_info=True`` and
  ``soft_reset_on_life_loss=True``: the step after a lost life restarts play as EnvPool's does
  (FIRE and no-ops, the action ignored, reward 0);
- rewards clipped to -1, 0, 1 (``reward_clipping``); next-step autoreset, as EnvPool's, whose
  reset steps CleanRL trains on like any other transition (so does this script);
- logging by game score: an episode's return is logged when the game ends (no lives left, or
  the frame limit), and it is the game's unclipped score, ``info["episode_score"]``, as
  CleanRL's ``RecordEpisodeStatistics`` sums EnvPool's unclipped ``info["reward"]``.

Acting: two consumers iterate ``pool.stream()`` (batches of 4 of the 8 envs) and get their
actions from one ``aiopool.inference.DynamicBatcher``, whose forward runs in a thread (torch
releases the GIL in the convolutions): while one half's forward runs, the C++ workers step the
other half and the loop records its results; calls that arrive in the same loop turn share a
forward. Learning: the PPO epochs run in a learner process while the actor fills the next
rollout with its snapshot of the weights; the acting policy lags the learner by at most one
update (an env that runs a rollout ahead of the others in its batch acts along with them, a
little staler), and the learner uses the decoupled PPO objective (Hilton et al., NeurIPS
2022), as in ``ppo_continuous_async.py`` (see there). ``--strict`` is CleanRL's serial loop:
one consumer, all 8 envs per batch in env order, the update in this process between rollouts,
CleanRL's update op for op; its weights, losses and game scores equal those of CleanRL's loop
over EnvPool's interface on the same envs, bit for bit
(``tests/test_ppo_mujoco_atari_examples.py``).

Threads: inference runs on 1 torch thread, set in the batcher's thread (OpenMP keeps the
count per thread: a forward in a new thread would use every core whatever the main thread
set). The overlapped learner takes the cores the actor leaves: before each minibatch it sets 1
thread while the actor acts (the actor and the envs have the other core; a learner thread
waiting for a busy core stalls every parallel region) and every core while the actor waits
for the update (``--learner-threads N`` fixes it). With ``--strict`` the learner runs alone
and gets every core.

The overlapped learner's CNN is in channels-last memory format (``--no-channels-last``:
CleanRL's), and it scales the rollout's frames (x / 255.0) once per update, each minibatch a
gather of them, where CleanRL's loop converts, and divides, every minibatch: the same floats
(tested bit for bit in CleanRL's layout). One update on one thread took 4.7 s instead of
5.4 s here; channels-last took it from 6.4-7.1 s to 5.7 s before. The channels-last floats
round differently, so ``--strict`` keeps CleanRL's layout and ops.

Devices: ``--device auto`` (the default) is CUDA when torch sees a GPU and the CPU otherwise,
as CleanRL's scripts choose; ``--device cuda`` without one is an error. ``--strict`` puts the
network and the update on the device as CleanRL's loop does: on the CPU its floats are
CleanRL's bit for bit; on CUDA they are equal to CleanRL's loop on the same GPU within
floating-point tolerance (cuDNN is made deterministic, as CleanRL makes it, but CUDA does not
promise bitwise-reproducible kernels). Overlapped on CUDA, the actor's forwards and the
learner's minibatches share the GPU: the learner runs in a thread of this process (``--learner
auto``; ``process`` as on the CPU) on a CUDA stream of its own, and the rollout's frames are on
the GPU before its update starts. The actor stores each batch's frames in the rollout's host
staging array (pinned memory) and starts their copy to the rollout's GPU storage
(``non_blocking``) before its forward; the learner's stream waits for those copies. Its CPU
threads are not juggled (``--learner-threads``, default 1): the GPU does the work. On an H200
with 16 cores this schedule made 0.86-1.19x the env-steps/s of CleanRL's loop over EnvPool at
8 envs and 1.29x at 32 envs / 16 threads with an eager actor. On CUDA the actor's forward
and its action draws are replayed as one CUDA graph (``act_rows``: 0.17 ms a call instead of 1.2
there, ``benchmarks/actor_forward.py``), and the schedule made 1.70-1.72x CleanRL's loop at 8
envs and 1.69-2.00x at 32 / 16 (docs/performance.md). ``--no-cuda-graph`` acts eagerly.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import random
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical

import aiopool
from aiopool.inference import DynamicBatcher


@dataclass
class Args:
    env_id: str = "Breakout-v5"
    seed: int = 1
    total_timesteps: int = 10_000_000
    learning_rate: float = 2.5e-4
    num_envs: int = 8
    num_steps: int = 128
    """steps per env per rollout"""
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.1
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float = 0.0
    """stop an update's epochs once approx_kl exceeds this (0: never, CleanRL's None)"""
    strict: bool = False
    """serial PPO, CleanRL's loop (default: actor and learner overlapped)"""
    num_threads: int = 0
    """aiopool worker threads (0: its default, one less than the cores)"""
    actor_threads: int = 1
    learner_threads: int = 0
    """0: every core with --strict (the learner runs alone); overlapped, 1 while the actor
    acts (it and the envs have the other core) and every core while it waits for the update"""
    channels_last: bool = True
    """overlapped: the learner's CNN in channels-last memory format, faster on CPUs (other
    rounding than CleanRL's layout, which --strict keeps)"""
    device: str = "auto"
    """auto: CUDA when torch sees a GPU, else the CPU; cuda: the GPU or an error"""
    cuda_graph: bool = True
    """overlapped on CUDA: the actor's forward and its action draws (Gumbel-max) replayed as one
    CUDA graph (0.17 ms a call instead of 1.2 on an H200); --no-cuda-graph: eager forwards"""
    learner: str = "auto"
    """overlapped: where the learner runs; process: its own (the CPU's default: no GIL shared
    with the actor); thread: beside the actor (CUDA's default: one CUDA context, the frames
    copied to the GPU as they arrive); auto: thread with CUDA, else process"""
    print_every: float = 10.0
    """seconds between progress lines (0: none)"""


DEVICES = ("auto", "cpu", "cuda")
LEARNERS = ("auto", "process", "thread")
CHOICES = {"device": DEVICES, "learner": LEARNERS}


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in fields(Args):
        default = getattr(Args, f.name)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default, choices=CHOICES.get(f.name))
    args = Args(**vars(p.parse_args(argv)))
    try:
        torch_device(args.device)
    except RuntimeError as e:
        p.error(str(e))
    return args


def torch_device(name: str) -> torch.device:
    """``--device``: ``auto`` is CUDA when torch sees a GPU, else the CPU (CleanRL's choice);
    ``cuda`` without a GPU is an error, not a quiet run on the CPU."""
    if name not in DEVICES:
        raise ValueError(f"device is {name!r}, expected one of {', '.join(DEVICES)}")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        why = ("this torch build has no CUDA support" if torch.version.cuda is None else
               "torch sees no CUDA GPU (check the driver and CUDA_VISIBLE_DEVICES)")
        raise RuntimeError(f"--device cuda, but {why} (torch {torch.__version__}): use "
                           "--device cpu, or --device auto to take a GPU when there is one")
    return torch.device(name)


def layer_init(layer: nn.Module, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Module:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's Nature CNN with policy and value heads, parameters in CleanRL's order."""

    def __init__(self, num_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            layer_init(nn.Conv2d(4, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
            layer_init(nn.Linear(64 * 7 * 7, 512)), nn.ReLU(),
        )
        self.actor = layer_init(nn.Linear(512, num_actions), std=0.01)
        self.critic = layer_init(nn.Linear(512, 1), std=1)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(self.network(x / 255.0))

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None,
                             scaled: bool = False
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``scaled``: ``x`` is already the frames / 255.0."""
        hidden = self.network(x if scaled else x / 255.0)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits, validate_args=False)  # the same values, 0.3 ms sooner
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)


@dataclass
class Rollout:
    """CleanRL's storage, ``[num_steps, num_envs]``; env i fills column i in its own time.

    ``obs`` stays uint8 (the learner makes float32 minibatches of it: the same numbers as
    CleanRL's float32 storage, a quarter of the bytes to the learner process). ``dones[t, i]``
    is 1 where ``obs[t, i]`` follows the end of an episode; ``next_obs`` / ``next_done`` are
    each env's observation after its last step, for the bootstrap value.

    A learner beside the actor (``--learner thread``) reads the frames from ``device_obs``,
    their copy on its device: ``obs`` is then a numpy view of ``staging``, host memory (pinned
    with CUDA) whose rows ``upload`` copies over as the actor stores them.
    """

    obs: np.ndarray
    actions: np.ndarray
    logprobs: np.ndarray  # under the behaviour policy: the actor's snapshot
    rewards: np.ndarray
    dones: np.ndarray
    values: np.ndarray
    next_obs: np.ndarray
    next_done: np.ndarray
    issued: np.ndarray  # per env: actions chosen
    returned: np.ndarray  # per env: results received
    slot: int = -1  # the FrameSlots slot holding obs (-1: obs is private)
    staging: torch.Tensor | None = None  # with device_obs: obs as a tensor
    device_obs: torch.Tensor | None = None  # obs on the learner's device

    @classmethod
    def empty(cls, num_steps: int, num_envs: int, obs_shape: tuple[int, ...],
              frames: FrameSlots | None = None, device: torch.device | None = None) -> Rollout:
        """``frames``: obs in one of these shared slots if one is free; ``device``: obs also
        on this device, staged in host memory that is pinned where the device is CUDA."""
        steps = (num_steps, num_envs)
        slot = frames.take() if frames is not None else -1
        staging = device_obs = None
        if device is not None:
            staging = torch.empty((*steps, *obs_shape), dtype=torch.uint8,
                                  pin_memory=device.type == "cuda")
            obs = staging.numpy()
            device_obs = torch.empty((*steps, *obs_shape), dtype=torch.uint8, device=device)
        elif frames is not None and slot >= 0:
            obs = frames.view(slot)
        else:
            obs = np.zeros((*steps, *obs_shape), np.uint8)
        return cls(obs=obs, slot=slot, staging=staging, device_obs=device_obs,
                   actions=np.zeros(steps, np.int64), logprobs=np.zeros(steps, np.float32),
                   rewards=np.zeros(steps, np.float32), dones=np.zeros(steps, np.float32),
                   values=np.zeros(steps, np.float32),
                   next_obs=np.zeros((num_envs, *obs_shape), np.uint8),
                   next_done=np.zeros(num_envs, np.float32),
                   issued=np.zeros(num_envs, np.int64), returned=np.zeros(num_envs, np.int64))

    @property
    def complete(self) -> bool:
        return bool((self.returned == len(self.rewards)).all())


def upload(rows: list[tuple[Rollout, int, int]]) -> None:
    """Start the copies of frames the actor just stored, ``(rollout, step, env)`` in env order,
    to their rollouts' device storage: one copy per run of consecutive envs at one step of one
    rollout (a consumer's batch is usually one run). From pinned memory a ``non_blocking`` copy
    runs while the actor goes on; it is queued on this thread's current stream, which the
    learner's stream waits for. Rollouts without device storage are skipped."""
    start = 0
    for end in range(1, len(rows) + 1):
        if end < len(rows):
            (r, t, i), (r_next, t_next, i_next) = rows[end - 1], rows[end]
            if r_next is r and t_next == t and i_next == i + 1:
                continue
        r, t, first = rows[start]
        last = first + end - start
        if r.device_obs is not None and r.staging is not None:
            r.device_obs[t, first:last].copy_(r.staging[t, first:last], non_blocking=True)
        start = end


class FrameSlots:
    """Rollouts' frames in shared memory, so the learner process reads them in place: through
    the executor's pipe, a rollout's 29 MB of frames took 0.05-0.15 s per update here.
    ``take`` a free slot (-1: none, the rollout keeps its frames private), ``give`` it back
    once the update that read it is done."""

    def __init__(self, slots: int, shape: tuple[int, ...]) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.shape = shape
        self.buffers = [ctx.RawArray("B", int(np.prod(shape))) for _ in range(slots)]
        self.free = list(range(slots))

    def view(self, slot: int) -> np.ndarray:
        return np.frombuffer(self.buffers[slot], np.uint8).reshape(self.shape)

    def take(self) -> int:
        return self.free.pop() if self.free else -1

    def give(self, slot: int) -> None:
        if slot >= 0:
            self.free.append(slot)

    def __getstate__(self) -> dict[str, Any]:  # to the learner process: the buffers, no slots
        return {"shape": self.shape, "buffers": self.buffers, "free": []}


# x / 255.0 of each uint8 value, by torch's own division: CleanRL's input floats by lookup
# (on one thread here, 0.1 s for a rollout's 29M frame bytes in channels-last layout, against
# 0.25 s for a layout copy and a division).
SCALED = (torch.arange(256, dtype=torch.uint8) / 255.0).numpy()


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, r: Rollout, args: Args,
               lr: float, decoupled: bool, pace: Any = None) -> dict[str, float]:
    """CleanRL's GAE and PPO epochs on a complete rollout, op for op.

    ``decoupled`` (overlapped runs): the old policy and the values are the learner's current
    weights evaluated on the rollout (the proximal policy) instead of the actor's records, and
    each sample's policy loss is weighted by proximal / behaviour probability. ``pace()``, if
    given, runs before each minibatch (the overlapped learner sets its thread count there).
    The update runs on the agent's device, as CleanRL's on its ``device``.
    """
    device = next(agent.parameters()).device
    num_steps, num_envs = r.rewards.shape
    obs_shape = r.obs.shape[2:]
    actions = torch.from_numpy(r.actions).to(device)
    rewards, dones = torch.from_numpy(r.rewards).to(device), torch.from_numpy(r.dones).to(device)
    next_obs = torch.from_numpy(r.next_obs).to(device).float()
    next_done = torch.from_numpy(r.next_done).to(device)
    frames = r.device_obs if r.device_obs is not None else torch.from_numpy(r.obs)
    b_obs_u8 = frames.to(device).reshape((-1, *obs_shape))
    if decoupled and device.type == "cpu":
        # Every frame scaled once, the network's x / 255.0 by lookup (the same float32s), in
        # the learner's layout; a minibatch is then one gather instead of a gather, a
        # conversion, a layout copy and a division.
        frames_u8 = b_obs_u8.numpy()
        if args.channels_last:  # NHWC in memory is channels-last NCHW
            nhwc = np.ascontiguousarray(frames_u8.transpose(0, 2, 3, 1))
            b_scaled = torch.from_numpy(SCALED[nhwc]).permute(0, 3, 1, 2)
        else:
            b_scaled = torch.from_numpy(SCALED[frames_u8])
    elif decoupled:  # on a GPU: the network's own x / 255.0, once for the rollout
        b_scaled = b_obs_u8.float() / 255.0
        if args.channels_last:
            b_scaled = b_scaled.contiguous(memory_format=torch.channels_last)

    def forward(rows: Any, actions: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if decoupled:
            return agent.get_action_and_value(b_scaled[rows], actions, scaled=True)
        return agent.get_action_and_value(b_obs_u8[rows].float(), actions)

    with torch.no_grad():
        if pace is not None:
            pace()
        if decoupled:
            chunks = [forward(slice(i, i + 256), actions.reshape(-1)[i:i + 256])
                      for i in range(0, len(b_obs_u8), 256)]
            logprobs = torch.cat([c[1] for c in chunks]).reshape(num_steps, num_envs)
            values = torch.cat([c[3].flatten() for c in chunks]).reshape(num_steps, num_envs)
            behaviour = torch.from_numpy(r.logprobs).to(device)
            lag_weights = torch.exp(logprobs - behaviour).reshape(-1)
        else:
            logprobs = torch.from_numpy(r.logprobs).to(device)
            values = torch.from_numpy(r.values).to(device)

        # bootstrap value if not done
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam: torch.Tensor | int = 0
        for t in reversed(range(num_steps)):
            if t == num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = (delta + args.gamma * args.gae_lambda * nextnonterminal
                                          * lastgaelam)
        returns = advantages + values

    # flatten the batch
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape(-1)
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = values.reshape(-1)

    optimizer.param_groups[0]["lr"] = lr
    batch_size = num_steps * num_envs
    minibatch_size = batch_size // args.num_minibatches
    b_inds = np.arange(batch_size)
    clipfracs = []
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, batch_size, minibatch_size):
            mb_inds = b_inds[start:start + minibatch_size]
            if pace is not None:
                pace()

            _, newlogprob, entropy, newvalue = forward(mb_inds, b_actions.long()[mb_inds])
            logratio = newlogprob - b_logprobs[mb_inds]
            ratio = logratio.exp()

            with torch.no_grad():
                old_approx_kl = (-logratio).mean()
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

            mb_advantages = b_advantages[mb_inds]
            if args.norm_adv:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std()
                                                                          + 1e-8)

            # Policy loss
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef,
                                                    1 + args.clip_coef)
            if decoupled:
                pg_loss = (lag_weights[mb_inds] * torch.max(pg_loss1, pg_loss2)).mean()
            else:
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

            # Value loss
            newvalue = newvalue.view(-1)
            if args.clip_vloss:
                v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds],
                                                            -args.clip_coef, args.clip_coef)
                v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                v_loss = 0.5 * v_loss_max.mean()
            else:
                v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl and approx_kl > args.target_kl:
            break

    y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
    var_y = np.var(y_true)
    explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
    return {"value_loss": v_loss.item(), "policy_loss": pg_loss.item(),
            "entropy": entropy_loss.item(), "old_approx_kl": old_approx_kl.item(),
            "approx_kl": approx_kl.item(), "clipfrac": float(np.mean(clipfracs)),
            "explained_variance": float(explained_var),
            "lag_weight_max": lag_weights.max().item() if decoupled else 1.0}


# The learner's agent, optimizer and CUDA stream (None: the current one): in the learner process
# or thread when overlapped, in this process (sharing the actor's agent, as CleanRL's one
# agent) with --strict.
_learner: tuple[Agent, torch.optim.Optimizer, Args, torch.cuda.Stream | None] | None = None
# Overlapped with adaptive threads: 1 while the actor acts (shared with the actor process).
_actor_busy: Any = None
_frames: FrameSlots | None = None  # overlapped: the rollouts' frames, shared

Weights = dict[str, np.ndarray]


def learner_init(args: Args, num_actions: int, weights: Weights,
                 agent: Agent | None = None, actor_busy: Any = None,
                 frames: FrameSlots | None = None) -> None:
    global _learner, _actor_busy, _frames
    _actor_busy, _frames = actor_busy, frames
    if multiprocessing.parent_process() is not None:  # the learner process
        threading.Thread(target=exit_with_parent, args=(os.getppid(),), daemon=True).start()
    np.random.seed(args.seed)  # the minibatch shuffles, CleanRL's global numpy stream
    device = torch_device(args.device)
    if agent is None:
        agent = Agent(num_actions)
        agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        agent = agent.to(device)
        if args.channels_last:  # overlapped: see ppo_update
            agent = agent.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    # Overlapped on CUDA, the learner's kernels go on a stream of their own, so that they run
    # beside the actor's forwards (which are on the default stream) instead of behind them.
    stream = torch.cuda.Stream(device) if device.type == "cuda" and not args.strict else None
    _learner = (agent, optimizer, args, stream)


def exit_with_parent(parent: int) -> None:
    """The learner process exits when the actor's does, however it ended: an executor's worker
    whose parent was killed (SIGTERM, SIGKILL) would otherwise wait for work forever, holding
    its memory."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def learner_update(rollout: Rollout, lr: float, decoupled: bool
                   ) -> tuple[Weights | None, dict[str, float]]:
    """One PPO update; returns the new weights (numpy; None with --strict: the agent is
    shared) and statistics."""
    assert _learner is not None, "learner_init runs first"
    agent, optimizer, args, stream = _learner
    if rollout.slot >= 0 and _frames is not None and not rollout.obs.size:
        rollout = replace(rollout, obs=_frames.view(rollout.slot))  # sent without its frames
    threads = torch.get_num_threads()
    pace = None
    if args.learner_threads or _actor_busy is None:  # fixed (no actor to share with: 1)
        torch.set_num_threads(args.learner_threads or 1)
    else:  # adaptive: the other core is the actor's while it acts, the learner's after
        pace = AdaptiveThreads(_actor_busy, len(os.sched_getaffinity(0)))
    start = time.perf_counter()
    weights = None
    try:
        with torch.cuda.stream(stream):  # None: the current stream
            if stream is not None:  # after the copies of the rollout's frames (upload)
                stream.wait_stream(torch.cuda.default_stream(stream.device))
            stats = ppo_update(agent, optimizer, rollout, args, lr, decoupled, pace)
            if decoupled:  # copied on the learner's stream, so after its last step
                weights = host_weights(agent)
    finally:
        torch.set_num_threads(threads)
    stats["seconds"] = time.perf_counter() - start
    if pace is not None:
        stats["wide_minibatches"] = pace.wide / max(pace.calls, 1)
    return weights, stats


def host_weights(agent: nn.Module) -> Weights:
    """The agent's weights as numpy arrays of their own, copied off its device."""
    return {k: v.detach().to("cpu", copy=True).numpy() for k, v in agent.state_dict().items()}


class AdaptiveThreads:
    """The overlapped learner's thread count, set before each minibatch: 1 while the actor
    acts (``busy.value`` nonzero), ``cores`` while it waits for this update. A learner thread
    that waits for a core the actor holds stalls every parallel region of the update; a
    1-thread learner leaves a core idle once the rollout is in."""

    def __init__(self, busy: Any, cores: int) -> None:
        self.busy, self.cores = busy, cores
        self.calls = self.wide = 0

    def __call__(self) -> None:
        threads = 1 if self.busy.value else self.cores
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
        self.calls += 1
        self.wide += threads > 1


NO_FRAMES = np.zeros((0,), np.uint8)  # a rollout's obs when its frames are in a FrameSlots slot

ACTED = np.dtype([("action", np.int64), ("logprob", np.float32), ("value", np.float32)])


def act_rows(agent: Agent, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Each row's action, its log-probability and its value as one float32 ``[n, 3]`` tensor,
    the action drawn with the Gumbel-max trick from ``noise``, uniform in [0, 1) ``[n,
    actions]``: ``argmax(logits - log(-log(u)))`` is a draw from ``Categorical(logits)``, made
    of kernels alone (no host sync), so a CUDA graph can hold it. ``x``: frames as floats."""
    hidden = agent.network(x / 255.0)
    logits = agent.actor(hidden)
    logp = logits - logits.logsumexp(dim=1, keepdim=True)  # Categorical's normalisation
    action = torch.argmax(logits - torch.log(-torch.log(noise)), dim=1, keepdim=True)
    return torch.cat([action.float(), logp.gather(1, action), agent.critic(hidden)], dim=1)


class Acting:
    """The DynamicBatcher's backend: one forward for all rows of the calls it coalesced.

    Runs in the batcher's thread, the only thread that touches the actor's agent; new weights
    are handed over with ``publish`` and loaded before the next forward. torch's thread count
    is set in that thread: OpenMP keeps it per thread, and a new thread gets the default (all
    cores), whatever ``torch.set_num_threads`` said elsewhere. The forward runs on the agent's
    device; the frames go there as uint8 and become floats there, as CleanRL's.

    ``graph_rows`` (CUDA): the forward, the draw and the outputs of up to that many rows as
    one CUDA graph (``act_rows``), captured by ``capture`` before the pool starts. A call
    copies its frames into the graph's input, replays it and copies its ``[n, 3]`` output
    back: one launch and one host sync, where the eager forward launches some 30 kernels and
    syncs three times. Loading new weights copies them into the captured parameters.
    """

    def __init__(self, agent: Agent, num_threads: int, channels_last: bool = False,
                 graph_rows: int = 0) -> None:
        self.agent = agent.to(memory_format=torch.channels_last) if channels_last else agent
        self.layout = torch.channels_last if channels_last else torch.contiguous_format
        self.device = next(agent.parameters()).device
        self.num_threads = num_threads
        self.pending: Weights | None = None
        self.graph_rows = graph_rows
        self.graph: torch.cuda.CUDAGraph | None = None
        self.graph_in = self.graph_out = torch.empty(0)

    def capture(self, obs_shape: tuple[int, ...]) -> None:
        """Capture the graph of ``graph_rows`` rows (after a few eager runs on a side stream,
        where cuDNN picks its convolutions); before any other thread uses the GPU."""
        num_actions = self.agent.actor.out_features
        self.graph_in = torch.zeros((self.graph_rows, *obs_shape), dtype=torch.uint8,
                                    device=self.device)

        def rows() -> torch.Tensor:
            x = self.graph_in.float().contiguous(memory_format=self.layout)
            noise = torch.rand((self.graph_rows, num_actions), device=self.device)
            return act_rows(self.agent, x, noise)

        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.no_grad(), torch.cuda.stream(side):
            for _ in range(3):
                rows()
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(self.graph):
            self.graph_out = rows()

    def publish(self, weights: Weights) -> None:
        self.pending = weights

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        torch.set_num_threads(self.num_threads)
        weights, self.pending = self.pending, None
        if weights is not None:
            self.agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        out = np.empty(len(obs), ACTED)
        if self.graph is not None and len(obs) <= self.graph_rows:
            self.graph_in[:len(obs)].copy_(torch.from_numpy(obs))
            self.graph.replay()
            acted = self.graph_out[:len(obs)].cpu().numpy()
            out["action"], out["logprob"], out["value"] = acted.T
            return out
        x = torch.from_numpy(obs).to(self.device).float()  # CleanRL's torch.Tensor(obs), there
        with torch.no_grad():
            action, logprob, _, value = self.agent.get_action_and_value(
                x.contiguous(memory_format=self.layout))
        out["action"], out["logprob"] = action.cpu(), logprob.cpu()
        out["value"] = value.flatten().cpu()
        return out


async def main(args: Args) -> dict[str, Any]:
    device = torch_device(args.device)  # first: --device cuda without a GPU fails here
    if args.learner not in LEARNERS:
        raise ValueError(f"learner is {args.learner!r}, expected one of {', '.join(LEARNERS)}")
    args = replace(args, device=device.type)  # resolved, for the learner
    num_envs, num_steps = args.num_envs, args.num_steps
    num_updates = args.total_timesteps // (num_envs * num_steps)
    if num_updates < 1:
        raise ValueError(f"total_timesteps ({args.total_timesteps}) is less than one rollout "
                         f"(num_envs * num_steps = {num_envs * num_steps})")
    if (num_envs * num_steps) % args.num_minibatches:
        raise ValueError(f"num_minibatches ({args.num_minibatches}) must divide the rollout "
                         f"({num_envs} envs x {num_steps} steps)")
    # Strict: one consumer, every env in each batch, as EnvPool's step. Overlapped: two
    # consumers, each with half of the envs per batch.
    if args.strict and not args.learner_threads:
        args = replace(args, learner_threads=len(os.sched_getaffinity(0)))
    consumers = 1 if args.strict or num_envs % 2 else 2
    batch_size = num_envs // consumers
    lag = 0 if args.strict else 1  # rollout k acts with weights learned from rollout k-1-lag
    learner_kind = ("strict" if args.strict else
                    args.learner if args.learner != "auto" else
                    "thread" if device.type == "cuda" else "process")

    # TRY NOT TO MODIFY: seeding (CleanRL's order: the agent's init draws from torch's stream)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.actor_threads)
    # CleanRL's torch_deterministic with --strict; overlapped runs are not reproducible anyway,
    # and cuDNN may pick the fastest convolutions for their few shapes (no effect on the CPU).
    torch.backends.cudnn.deterministic = args.strict
    torch.backends.cudnn.benchmark = not args.strict

    # EnvPool's episodic life: a lost life ends the training episode, the game goes on, and
    # the next step restarts play as EnvPool's does.
    env_kwargs = {"life_loss_info": True, "soft_reset_on_life_loss": True,
                  "reward_clipping": True}
    with aiopool.make(args.env_id, **env_kwargs) as probe:
        obs_shape = probe.single_observation_space.shape
        num_actions = int(probe.single_action_space.n)
    agent = Agent(num_actions)  # the actor's; with --strict also the learner's
    weights = {k: v.detach().numpy() for k, v in agent.state_dict().items()}
    agent = agent.to(device)  # after its init on the CPU, as CleanRL's Agent(envs).to(device)
    learner_args = (args, num_actions, weights)
    learner_pool: Executor | None = None  # --strict: none, the update runs in the actor's turn
    # Overlapped on the CPU, adaptive learner threads: nonzero while some consumer acts.
    actor_busy = multiprocessing.get_context("spawn").RawValue("i", 1)
    # A learner process: rollout k is learned while k + 1 fills; k + 2 starts once update k is
    # done and has given its slot back. (Past the last update, envs fill a rollout that is
    # thrown away: no slot is left for it, and it keeps its frames.) A learner thread: each
    # rollout's frames also on its device, copied over as they arrive.
    frames = (FrameSlots(2, (num_steps, num_envs, *obs_shape)) if learner_kind == "process"
              else None)
    storage = device if learner_kind == "thread" else None
    if learner_kind == "strict":
        learner_init(*learner_args, agent=agent)
    elif learner_kind == "thread":
        learner_init(*learner_args)
        learner_pool = ThreadPoolExecutor(1, thread_name_prefix="learner")
    else:
        # Spawned, not forked: a process whose torch already ran on several threads (a test
        # run, a notebook) cannot fork safely, as the child's first parallel region waits
        # forever for OpenMP threads that were not copied. Starting takes a few seconds.
        # Threads are juggled for a learner on the CPU only: on a GPU, the GPU does the work.
        learner_pool = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=learner_init,
            initargs=(*learner_args, None, actor_busy if device.type == "cpu" else None, frames))
        learner_pool.submit(int).result()
    adaptive = learner_kind == "process" and device.type == "cpu" and not args.learner_threads
    learner_threads = (f"1 while the actor acts, {len(os.sched_getaffinity(0))} while it waits"
                       if adaptive else args.learner_threads or 1)
    print(f"{args.env_id}: {'strict (serial, CleanRL loop)' if args.strict else 'overlapped'}, "
          f"{num_envs} envs x {num_steps} steps per rollout, {num_updates} updates, "
          f"{consumers} consumer(s) of {batch_size} envs; device {device}, learner "
          f"{'in the actor' if args.strict else 'in a ' + learner_kind}; torch threads: inference "
          f"{args.actor_threads}, learner {learner_threads}; {env_kwargs}", flush=True)

    pool = aiopool.make(args.env_id, num_envs=num_envs, batch_size=batch_size,
                        num_threads=args.num_threads or None, seed=args.seed, **env_kwargs)
    # Overlapped, the actor's CNN in the learner's layout: a forward of 4 frames stacks took
    # 2.4 ms instead of 2.8 here. --strict keeps CleanRL's (and its floats).
    graphed = device.type == "cuda" and args.cuda_graph and not args.strict
    acting = Acting(agent, args.actor_threads, args.channels_last and not args.strict,
                    graph_rows=num_envs if graphed else 0)
    if graphed:
        acting.capture(obs_shape)
    policy = DynamicBatcher(acting, max_batch_rows=num_envs)

    def new_rollout() -> Rollout:
        return Rollout.empty(num_steps, num_envs, obs_shape, frames, storage)

    rollouts = {0: new_rollout()}
    env_rollout = np.zeros(num_envs, np.int64)  # the rollout each env's next action goes to
    in_flight = np.full(num_envs, -1)  # the rollout of each env's action in flight (-1: none)
    next_obs = np.zeros((num_envs, *obs_shape), np.uint8)
    next_done = np.zeros(num_envs, np.float32)
    learn_queue: asyncio.Queue[int] = asyncio.Queue()  # complete rollouts, in order
    updated = asyncio.Condition()
    updates_done = 0
    final_weights: Weights | None = None  # overlapped: the last update's, maybe not yet loaded
    history: list[dict[str, float]] = []
    episodes: list[tuple[int, float, int]] = []  # (global step, game score, game length)
    recent: collections.deque[float] = collections.deque(maxlen=20)
    global_step = 0
    life_losses = 0
    waiting = 0  # consumers waiting for the learner

    def may_act(env_ids: list[int]) -> bool:
        """Whether these envs may act now: the policy lags the learner by at most `lag`
        updates for the env furthest behind. A batch waits only if every env in it is ahead:
        one that holds an env the learner's next rollout still needs must act, or the actor
        and the learner would wait for each other (envs drift apart as the workers finish in
        varying order). An env a rollout ahead of its batch-mates acts along with them, with
        those weights, and the decoupled objective weighs its steps by the policy that took
        them. Envs past the last rollout only ride along with envs still filling one."""
        live = [k for k in env_rollout[env_ids].tolist() if k < num_updates]
        return bool(live) and updates_done >= min(live) - lag

    async def consumer() -> None:
        nonlocal global_step, life_losses, waiting
        async for batch in pool.stream():
            if updates_done == num_updates:
                return
            order = np.argsort(batch.env_id, kind="stable")  # env order, as EnvPool's
            env_ids = batch.env_id[order].tolist()
            ended = (batch.terminated | batch.truncated)[order]
            next_obs[env_ids] = batch.obs[order]
            next_done[env_ids] = ended
            if ended.any():
                info = batch.info
                game_over = ended & ((info["lives"] == 0) | batch.truncated)[order]
                for j in np.flatnonzero(game_over).tolist():
                    score = float(info["episode_score"][order[j]])
                    episodes.append((global_step + j + 1, score,
                                     int(info["episode_length"][order[j]])))
                    recent.append(score)
                life_losses += int(ended.sum() - game_over.sum())

            # 1. Each row is the result of its env's action in flight (none after the reset).
            for j, i in enumerate(env_ids):
                k = int(in_flight[i])
                if k < 0:
                    continue
                in_flight[i] = -1
                global_step += 1
                if k >= num_updates:
                    continue  # past the last update: discarded
                r = rollouts[k]
                t = int(r.returned[i])
                r.rewards[t, i] = batch.reward[order[j]]
                r.returned[i] += 1
                if r.returned[i] == num_steps:
                    r.next_obs[i], r.next_done[i] = next_obs[i], next_done[i]
                    if r.complete:
                        learn_queue.put_nowait(k)

            # 2. Wait for the learner if the policy would lag it by more than `lag` updates,
            #    or, once these envs are past the last rollout, for the last update.
            if not may_act(env_ids):
                waiting += 1
                actor_busy.value = waiting < consumers
                async with updated:
                    await updated.wait_for(
                        lambda ids=env_ids: may_act(ids) or updates_done == num_updates)
                waiting -= 1
                actor_busy.value = 1
            if updates_done == num_updates:
                return

            # 3. Store the frames, and start their copies to the device storage if the
            #    rollouts have it; act: one DynamicBatcher call, the forward in its thread.
            rows = []
            for i in env_ids:
                k = int(env_rollout[i])
                if k not in rollouts:
                    rollouts[k] = new_rollout()
                r = rollouts[k]
                t = int(r.issued[i])
                r.obs[t, i], r.dones[t, i] = next_obs[i], next_done[i]
                rows.append((r, t, i))
            if storage is not None:
                upload(rows)
            acted = await policy(next_obs[env_ids])
            for j, (r, t, i) in enumerate(rows):
                r.actions[t, i], r.logprobs[t, i] = acted["action"][j], acted["logprob"][j]
                r.values[t, i] = acted["value"][j]
                r.issued[i] += 1
                in_flight[i] = env_rollout[i]
                if r.issued[i] == num_steps:
                    env_rollout[i] += 1
            pool.send(acted["action"], np.asarray(env_ids, np.int32))

    async def learner() -> None:
        nonlocal updates_done, final_weights
        last_print = time.perf_counter()
        for _ in range(num_updates):
            k = await learn_queue.get()
            rollout = rollouts.pop(k)
            frac = 1.0 - (k + 1 - 1.0) / num_updates if args.anneal_lr else 1.0
            lr = frac * args.learning_rate
            if learner_pool is None:  # --strict: learn now, in this process; the actor waits
                weights, stats = learner_update(rollout, lr, False)
            else:
                sent = rollout if rollout.slot < 0 else replace(rollout, obs=NO_FRAMES)
                try:
                    weights, stats = await asyncio.get_running_loop().run_in_executor(
                        learner_pool, learner_update, sent, lr, True)
                finally:
                    if frames is not None:
                        frames.give(rollout.slot)
                assert weights is not None
                acting.publish(weights)
                final_weights = weights
            history.append(stats)
            async with updated:
                updates_done += 1
                updated.notify_all()
            now = time.perf_counter()
            if args.print_every and (now - last_print >= args.print_every
                                     or updates_done == num_updates):
                last_print = now
                mean = np.mean(recent) if recent else float("nan")
                print(f"global_step={global_step:>9,}  SPS={global_step / (now - start):>5,.0f}"
                      f"  updates={updates_done:>5}/{num_updates}  score(last 20)={mean:7.1f}"
                      f"  value_loss={stats['value_loss']:.4f}"
                      f"  explained_var={stats['explained_variance']:.3f}"
                      f"  clipfrac={stats['clipfrac']:.3f}  update={stats['seconds']:.2f} s",
                      flush=True)

    start = time.perf_counter()
    try:
        async with asyncio.TaskGroup() as tasks:
            learning = tasks.create_task(learner())
            for _ in range(consumers):
                tasks.create_task(consumer())
            await learning
            seconds = time.perf_counter() - start
            steps = global_step
    finally:
        pool.close()
        await policy.aclose()
        if learner_pool is not None:
            learner_pool.shutdown(cancel_futures=True)

    mean_score = float(np.mean(recent)) if recent else float("nan")
    stats = policy.stats
    print(f"{args.env_id}: {steps:,} env steps, {updates_done} updates in {seconds:.1f} s "
          f"({steps / seconds:,.0f} steps/s); mean score of the last {len(recent)} games "
          f"{mean_score:.1f}; {stats.rows_per_forward:.1f} rows per forward", flush=True)
    return {"global_step": steps, "updates": updates_done, "seconds": seconds,
            "sps": steps / seconds, "episodes": episodes, "mean_return": mean_score,
            "life_losses": life_losses, "history": history,
            "learner_threads": learner_threads, "device": str(device), "learner": learner_kind,
            "rows_per_forward": stats.rows_per_forward,
            "weights": final_weights or host_weights(agent)}


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
