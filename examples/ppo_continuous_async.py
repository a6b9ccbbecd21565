"""PPO for MuJoCo (continuous actions) as an asyncio actor-learner over aiopool, CleanRL style.

    python examples/ppo_continuous_async.py --env-id HalfCheetah-v5      # overlapped (default)
    python examples/ppo_continuous_async.py --env-id Hopper-v5 --strict  # CleanRL's loop, exactly
    python examples/ppo_continuous_async.py --env-id dmc/cartpole-swingup  # the Control Suite

This is CleanRL's ``ppo_continuous_action.py`` with its hyper-parameters (1 env, 2048 steps per
rollout, 10 epochs x 32 minibatches, Adam at 3e-4 annealed to 0, GAE with gamma 0.99 and lambda
0.95, clipped value loss, no entropy bonus) and its environment pipeline, which CleanRL builds
from gymnasium wrappers around each env: the action clipped to the action space, the
observation normalized by running statistics and clipped to [-10, 10], the reward divided by
the running standard deviation of a discounted return and clipped to [-10, 10]. Here the
driver does that normalization (``Normalizer``) with gymnasium's own ``RunningMeanStd``, one
set of statistics per env as each wrapped env has its own, and the pool steps the raw MuJoCo
envs (bit-identical to gymnasium's) with ``autoreset="same_step"``, gymnasium 0.29's
semantics, for which CleanRL's loop was written: a row where an episode ended carries the
reset observation, and ``info["final_obs"]`` the terminal one, which updates the statistics
first, as the wrapper does before the vector env resets it.

Two schedules, one data path:

- ``--strict``: serial PPO. One batch holds every env, its rows in env order; when a rollout is
  complete, the actor waits for the update and acts on with the new weights. Same seeds, same
  torch ops in the same order: the weights, losses and episodes are CleanRL's over gymnasium's
  ``SyncVectorEnv``, float for float (``tests/test_ppo_mujoco_atari_examples.py`` checks it).
- overlapped (default): the learner runs the PPO epochs in its own process (a thread would
  share the GIL with the actor; both are mostly Python around small torch ops) while the actor
  fills the next rollout. With two or more envs, batches are halves of the envs, so the C++
  workers step one half while the actor runs inference on the other. A rollout may start
  while the update before it runs, never earlier; one that is full before the learner is free
  waits, and its envs wait with it.

The overlap makes the acting policy lag the learner: rollout k+1 is collected while update k
is still learning. Lag costs returns (with a whole rollout on the weights from before update
k, ``--no-fresh-weights``, HalfCheetah reached 465 at 200k steps against CleanRL's 826), so
the actor keeps it short, with fresh weights:

- the learner publishes its weights in shared memory after every minibatch (``SharedWeights``)
  and the actor acts with the newest ones, each action's log-probability from the same ones;
- the actor starts rollout k+1 only when update k has come far enough that the rollout,
  acting as long as the last one took, ends just as the update does. The overlap is kept (the
  learner never waits for a rollout longer than before), and the whole rollout comes from
  the last stretch of update k, close to the weights update k+1 starts from.

What lag is left, the learner corrects with the decoupled PPO objective (Hilton et al., "Batch
size-invariance for policy optimization", NeurIPS 2022), as ``ppo_cartpole_async.py`` does: at
the start of an update it evaluates the rollout with its current weights, the proximal policy,
whose values give GAE and the value targets and around which the ratio is clipped; each
sample's policy loss is weighted by proximal / behaviour probability (1 without lag, where
this is CleanRL's update). Overlapped runs are not bitwise reproducible: when the learner's
weights reach the actor depends on timing.

Threads: the actor's torch runs on 1 intra-op thread (a forward of a 64-unit MLP on a few rows
takes ~30 us; a second thread only adds wake-ups, and under load makes it milliseconds), the
learner's on ``--learner-threads`` (default 1: its minibatches are 64 rows, too small to split).
The pool's worker threads default to one less than the cores.

Devices: ``--device auto`` (the default) is CUDA when torch sees a GPU and the CPU otherwise,
as CleanRL's scripts choose; ``--device cuda`` without one is an error. ``--strict`` acts and
learns on the device, as CleanRL's loop does: on the CPU its floats are CleanRL's bit for bit;
on CUDA they are equal to CleanRL's loop on the same GPU within floating-point tolerance (CUDA
does not promise bitwise-reproducible kernels). Overlapped, the learner process learns on the
device and the actor acts on the CPU: a forward of the 64-unit MLPs on a row or two takes ~30
us there, which a dozen kernel launches on a GPU and the copy of the action back would not
beat (an estimate: not measured on a GPU yet). The rollout (2048 x 17 floats for HalfCheetah)
goes to the learner's device in one copy per update.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import math
import multiprocessing
import random
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium.wrappers.utils import RunningMeanStd
from torch import nn
from torch.distributions.normal import Normal

import aiopool


@dataclass
class Args:
    env_id: str = "HalfCheetah-v5"
    seed: int = 1
    total_timesteps: int = 1_000_000
    learning_rate: float = 3e-4
    num_envs: int = 1
    num_steps: int = 2048
    """steps per env per rollout"""
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 32
    update_epochs: int = 10
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float = 0.0
    """stop an update's epochs once approx_kl exceeds this (0: never, CleanRL's None)"""
    strict: bool = False
    """serial PPO, CleanRL's loop float for float (default: actor and learner overlapped)"""
    fresh_weights: bool = True
    """overlapped: act with the learner's newest weights, published after every minibatch,
    and start each rollout late enough to end with the update in flight (--no-fresh-weights:
    a whole rollout acts on the weights from before that update)"""
    num_threads: int = 0
    """aiopool worker threads (0: its default, one less than the cores)"""
    actor_threads: int = 1
    learner_threads: int = 1
    device: str = "auto"
    """auto: CUDA when torch sees a GPU, else the CPU; cuda: the GPU or an error (overlapped,
    the learner's device: the actor acts on the CPU)"""
    print_every: float = 5.0
    """seconds between progress lines (0: none)"""


DEVICES = ("auto", "cpu", "cuda")


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in fields(Args):
        default = getattr(Args, f.name)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default,
                           choices=DEVICES if f.name == "device" else None)
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


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """CleanRL's: separate 64-64 tanh MLPs for the value and the Gaussian's mean, and a learned
    state-independent log standard deviation. Parameters are created in CleanRL's order, so
    the same seed gives the same initial weights."""

    def __init__(self, obs_dim: int, act_dim: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


class Normalizer:
    """CleanRL's wrappers on the driver's side, one set of running statistics per env.

    ``obs`` is ``NormalizeObservation`` + ``TransformObservation(clip to +-10)``: update the
    env's statistics with the raw observation, then normalize it with them (float32).
    ``reward`` is ``NormalizeReward(gamma)`` + ``TransformReward(clip to +-10)``: a discounted
    return, reset only on termination, updates the env's return statistics and the reward is
    divided by their standard deviation. gymnasium's RunningMeanStd and gymnasium's
    expressions, so the numbers are the wrappers' to the last bit.
    """

    def __init__(self, num_envs: int, obs_shape: tuple[int, ...], gamma: float,
                 epsilon: float = 1e-8) -> None:
        self.obs_rms = [RunningMeanStd(shape=obs_shape, dtype=np.float32) for _ in range(num_envs)]
        self.return_rms = [RunningMeanStd(shape=()) for _ in range(num_envs)]
        self.discounted_reward = [np.array([0.0]) for _ in range(num_envs)]
        self.gamma, self.epsilon = gamma, epsilon
        self.zero_var = np.zeros(obs_shape)

    def obs(self, env_id: int, observation: np.ndarray) -> np.ndarray:
        rms = self.obs_rms[env_id]
        # rms.update(np.array([observation])) without np.mean / np.var of one row, which are
        # the row and zeros exactly: the same update, 20 us sooner.
        rms.update_from_moments(observation, self.zero_var, 1)
        normalized = np.float32((observation - rms.mean) / np.sqrt(rms.var + self.epsilon))
        return np.clip(normalized, -10, 10)

    def reward(self, env_id: int, reward: float, terminated: bool) -> float:
        rms = self.return_rms[env_id]
        self.discounted_reward[env_id] = (self.discounted_reward[env_id] * self.gamma
                                          * (1 - terminated) + float(reward))
        rms.update_from_moments(self.discounted_reward[env_id][0], 0.0, 1)  # as update(...)
        return float(np.clip(reward / np.sqrt(rms.var + self.epsilon), -10, 10))


@dataclass
class Rollout:
    """CleanRL's storage, ``[num_steps, num_envs]``; env i fills column i in its own time.

    ``obs[t, i]`` .. ``values[t, i]`` are written when env i's t-th action is chosen,
    ``rewards[t, i]`` when its result comes back; ``dones[t, i]`` is 1 where ``obs[t, i]``
    starts an episode (the previous step ended one). ``next_obs`` / ``next_done`` are each
    env's observation after its last step, for the bootstrap value.
    """

    obs: np.ndarray
    actions: np.ndarray  # as sampled; the envs get them clipped to the action space
    logprobs: np.ndarray  # log-probabilities under the behaviour policy: the actor's snapshot
    rewards: np.ndarray  # normalized and clipped
    dones: np.ndarray
    values: np.ndarray
    next_obs: np.ndarray
    next_done: np.ndarray
    issued: np.ndarray  # per env: actions chosen
    returned: np.ndarray  # per env: results received

    @classmethod
    def empty(cls, num_steps: int, num_envs: int, obs_shape: tuple[int, ...],
              act_shape: tuple[int, ...]) -> Rollout:
        steps = (num_steps, num_envs)
        return cls(obs=np.zeros((*steps, *obs_shape), np.float32),
                   actions=np.zeros((*steps, *act_shape), np.float32),
                   logprobs=np.zeros(steps, np.float32), rewards=np.zeros(steps, np.float32),
                   dones=np.zeros(steps, np.float32), values=np.zeros(steps, np.float32),
                   next_obs=np.zeros((num_envs, *obs_shape), np.float32),
                   next_done=np.zeros(num_envs, np.float32),
                   issued=np.zeros(num_envs, np.int64), returned=np.zeros(num_envs, np.int64))

    @property
    def complete(self) -> bool:
        return bool((self.returned == len(self.rewards)).all())


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, r: Rollout, args: Args,
               lr: float, decoupled: bool, publish: Callable[[int], None] | None = None
               ) -> dict[str, float]:
    """CleanRL's GAE and PPO epochs on a complete rollout, op for op.

    ``decoupled`` (overlapped runs): the old policy and the values are the learner's current
    weights evaluated on the rollout (the proximal policy) instead of the actor's records, and
    each sample's policy loss is weighted by proximal / behaviour probability.
    ``publish(n)``, if given, runs after the n-th optimizer step of the update. The update runs
    on the agent's device, as CleanRL's on its ``device``.
    """
    device = agent.actor_logstd.device
    num_steps, num_envs = r.rewards.shape
    obs_shape, act_shape = r.obs.shape[2:], r.actions.shape[2:]
    obs, actions, rewards, dones, next_obs, next_done = (
        torch.from_numpy(x).to(device)
        for x in (r.obs, r.actions, r.rewards, r.dones, r.next_obs, r.next_done))
    with torch.no_grad():
        if decoupled:
            _, proximal, _, v = agent.get_action_and_value(obs.reshape((-1, *obs_shape)),
                                                           actions.reshape((-1, *act_shape)))
            logprobs, values = proximal.reshape(num_steps, num_envs), v.reshape(num_steps, -1)
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
    b_obs = obs.reshape((-1, *obs_shape))
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape((-1, *act_shape))
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = values.reshape(-1)

    optimizer.param_groups[0]["lr"] = lr
    batch_size = num_steps * num_envs
    minibatch_size = batch_size // args.num_minibatches
    b_inds = np.arange(batch_size)
    clipfracs = []
    steps_done = 0
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, batch_size, minibatch_size):
            mb_inds = b_inds[start:start + minibatch_size]

            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds],
                                                                          b_actions[mb_inds])
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
            steps_done += 1
            if publish is not None:
                publish(steps_done)

        if args.target_kl and approx_kl > args.target_kl:
            break

    y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
    var_y = np.var(y_true)
    explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
    return {"value_loss": v_loss.item(), "policy_loss": pg_loss.item(),
            "entropy": entropy_loss.item(), "old_approx_kl": old_approx_kl.item(),
            "approx_kl": approx_kl.item(), "clipfrac": float(np.mean(clipfracs)),
            "explained_variance": float(explained_var),
            "minibatches": steps_done,
            "lag_weight_max": lag_weights.max().item() if decoupled else 1.0,
            # how far the behaviour policy was from the proximal one: KL(behaviour || proximal)
            "lag_kl": -lag_weights.log().mean().item() if decoupled else 0.0}


class SharedWeights:
    """The learner's newest weights in shared memory, and how far its update has come.

    The learner ``publish``es its parameters after every minibatch; the actor's agent has its
    parameters in one flat tensor, which ``refresh`` overwrites with the newest published
    ones, so each action comes from the freshest weights (and its log-probability, the
    behaviour policy's, from the same ones). ``header``: [version, update, minibatches done].
    Built by the actor and passed to the spawned learner with its arguments.
    """

    def __init__(self, agent: Agent, ctx: Any) -> None:
        self.size = sum(p.numel() for p in agent.parameters())
        self.params = ctx.RawArray("f", self.size)
        self.header = ctx.RawArray("q", 3)
        self.lock = ctx.Lock()
        self.seen = 0  # the version the actor acts with

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("flat", None)  # the actor's
        return state

    def bind(self, agent: Agent) -> None:
        """The actor's side: make ``agent``'s parameters views of one flat tensor."""
        self.flat = torch.cat([p.detach().reshape(-1) for p in agent.parameters()])
        offset = 0
        for p in agent.parameters():
            p.data = self.flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        np.frombuffer(self.params, np.float32)[:] = self.flat.numpy()

    def refresh(self) -> None:
        """The actor's side: act with the newest published weights from now on."""
        if np.frombuffer(self.header, np.int64)[0] != self.seen:
            with self.lock:
                self.flat.numpy()[:] = np.frombuffer(self.params, np.float32)
                self.seen = int(np.frombuffer(self.header, np.int64)[0])

    def progress(self, k: int) -> int:
        """Minibatches update ``k`` has done (0 before it starts)."""
        with self.lock:
            _, update, done = np.frombuffer(self.header, np.int64).tolist()
        return done if update == k else 0

    def start(self, k: int) -> None:
        """The learner's side: update ``k`` begins."""
        with self.lock:
            header = np.frombuffer(self.header, np.int64)
            header[1], header[2] = k, 0

    def publish(self, agent: Agent, done: int) -> None:
        """The learner's side: ``agent``'s weights after ``done`` minibatches."""
        flat = torch.cat([p.detach().reshape(-1) for p in agent.parameters()]).cpu().numpy()
        with self.lock:
            np.frombuffer(self.params, np.float32)[:] = flat
            header = np.frombuffer(self.header, np.int64)
            header[0] += 1
            header[2] = done


# The learner's agent and optimizer: in the learner process when overlapped, in this process
# (sharing the actor's agent, as CleanRL's one agent) with --strict.
_learner: tuple[Agent, torch.optim.Optimizer, Args, SharedWeights | None] | None = None

Weights = dict[str, np.ndarray]


def learner_init(args: Args, obs_dim: int, act_dim: int, weights: Weights,
                 agent: Agent | None = None, shared: SharedWeights | None = None) -> None:
    global _learner
    torch.set_num_threads(args.learner_threads)
    np.random.seed(args.seed)  # the minibatch shuffles, CleanRL's global numpy stream
    if agent is None:
        agent = Agent(obs_dim, act_dim)
        agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        agent = agent.to(torch_device(args.device))
    # foreach: the multi-tensor Adam, ~10 % less update time on one CPU thread than the
    # per-parameter loop CleanRL gets by default on CPU, and the same floats (the strict test
    # checks the weights against CleanRL's run).
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5,
                                 foreach=True)
    _learner = (agent, optimizer, args, shared)


def learner_update(rollout: Rollout, lr: float, decoupled: bool, k: int = 0
                   ) -> tuple[Weights, dict[str, float]]:
    """Update ``k``; returns the new weights (numpy, cheap to pickle) and statistics."""
    assert _learner is not None, "learner_init runs first"
    agent, optimizer, args, shared = _learner
    torch.set_num_threads(args.learner_threads)
    start = time.perf_counter()
    publish = None
    if shared is not None:
        shared.start(k)
        publish = lambda done: shared.publish(agent, done)  # noqa: E731
    stats = ppo_update(agent, optimizer, rollout, args, lr, decoupled, publish)
    stats["seconds"] = time.perf_counter() - start
    return host_weights(agent), stats


def host_weights(agent: nn.Module) -> Weights:
    """The agent's weights as numpy arrays of their own, copied off its device."""
    return {k: v.detach().to("cpu", copy=True).numpy() for k, v in agent.state_dict().items()}


def mlp(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """``layers(x)`` for the agent's Linear / Tanh stacks without nn.Module's call machinery:
    the same ops (``F.linear``, ``torch.tanh``), ~40 us sooner on one row."""
    for layer in layers:
        x = F.linear(x, layer.weight, layer.bias) if isinstance(layer, nn.Linear) else x.tanh()
    return x


def act(agent: Agent, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CleanRL's action step: sample from the policy (torch's global RNG), log-prob, value.

    ``agent.get_action_and_value(x)`` op for op, without building a ``Normal`` (whose argument
    checks cost more than the MLPs on one row): the same numbers, ~150 us sooner. On the
    agent's device, as CleanRL's, its RNG included.
    """
    with torch.no_grad():
        x = torch.from_numpy(obs).to(agent.actor_logstd.device)
        loc = mlp(agent.actor_mean, x)
        scale = torch.exp(agent.actor_logstd.expand_as(loc))
        action = torch.normal(loc, scale)  # Normal(loc, scale).sample()
        logprob = (-((action - loc) ** 2) / (2 * scale**2) - scale.log()
                   - math.log(math.sqrt(2 * math.pi))).sum(1)  # Normal.log_prob(action).sum(1)
        value = mlp(agent.critic, x)
    return action.cpu().numpy(), logprob.cpu().numpy(), value.flatten().cpu().numpy()


async def main(args: Args) -> dict[str, Any]:
    device = torch_device(args.device)  # first: --device cuda without a GPU fails here
    args = replace(args, device=device.type)  # resolved, for the learner process
    num_envs, num_steps = args.num_envs, args.num_steps
    num_updates = args.total_timesteps // (num_envs * num_steps)
    if num_updates < 1:
        raise ValueError(f"total_timesteps ({args.total_timesteps}) is less than one rollout "
                         f"(num_envs * num_steps = {num_envs * num_steps})")
    if (num_envs * num_steps) % args.num_minibatches:
        raise ValueError(f"num_minibatches ({args.num_minibatches}) must divide the rollout "
                         f"({num_envs} envs x {num_steps} steps)")
    # Strict: every env in one batch, as SyncVectorEnv steps them. Overlapped: halves, so that
    # one half steps while the actor runs inference on the other.
    batch_size = num_envs if args.strict or num_envs % 2 else num_envs // 2
    lag = 0 if args.strict else 1  # rollout k acts with weights learned from rollout k-1-lag

    # TRY NOT TO MODIFY: seeding (CleanRL's order: the agent's init draws from torch's stream)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.actor_threads)

    # The Control Suite's observations are dicts of named arrays: as one vector, in
    # dm_control's key order (its flat_observation; CleanRL wraps dm_control's envs in
    # FlattenObservation for the same reason).
    env_kwargs: dict[str, Any] = {}
    with aiopool.make(args.env_id) as probe:  # the spaces
        if probe.spec.obs_parts:
            env_kwargs["flat_observation"] = True
    with aiopool.make(args.env_id, **env_kwargs) as probe:
        obs_shape = probe.single_observation_space.shape
        action_space = probe.single_action_space
    act_shape = action_space.shape
    obs_dim, act_dim = int(np.prod(obs_shape)), int(np.prod(act_shape))
    agent = Agent(obs_dim, act_dim)  # the actor's; with --strict also the learner's
    learner_args = (args, obs_dim, act_dim,
                    {k: v.detach().numpy() for k, v in agent.state_dict().items()})
    learner_process = None
    shared: SharedWeights | None = None
    if args.strict:
        agent = agent.to(device)  # after its init on the CPU, as CleanRL's Agent(envs).to(device)
        learner_init(*learner_args, agent=agent)
    else:
        # Spawned, not forked: a process whose torch already ran on several threads (a test
        # run, a notebook) cannot fork safely, as the child's first parallel region waits
        # forever for OpenMP threads that were not copied. Starting takes a few seconds.
        ctx = multiprocessing.get_context("spawn")
        if args.fresh_weights:
            shared = SharedWeights(agent, ctx)
            shared.bind(agent)
        learner_process = ProcessPoolExecutor(
            max_workers=1, mp_context=ctx, initializer=learner_init,
            initargs=(*learner_args, None, shared))
        learner_process.submit(int).result()
    schedule = ("strict (serial, CleanRL loop)" if args.strict else
                "overlapped, fresh weights" if shared else "overlapped, one update behind")
    actor_device = device if args.strict else torch.device("cpu")
    print(f"{args.env_id}: {schedule}, "
          f"{num_envs} envs x {num_steps} steps per rollout, {num_updates} updates; device: "
          f"actor {actor_device}, learner {device}; torch threads: actor {args.actor_threads}, "
          f"learner {args.learner_threads}", flush=True)

    pool = aiopool.make(args.env_id, num_envs=num_envs, batch_size=batch_size,
                        num_threads=args.num_threads or None, seed=args.seed,
                        autoreset="same_step", **env_kwargs)
    normalizer = Normalizer(num_envs, obs_shape, args.gamma)
    low, high = action_space.low, action_space.high

    def new_rollout() -> Rollout:
        return Rollout.empty(num_steps, num_envs, obs_shape, act_shape)

    rollouts = {0: new_rollout()}  # by index; at most lag + 1 of them at once
    env_rollout = np.zeros(num_envs, np.int64)  # the rollout each env's next action goes to
    in_flight = np.full(num_envs, -1)  # the rollout of each env's action in flight (-1: none)
    next_obs = np.zeros((num_envs, *obs_shape), np.float32)  # normalized, as the agent sees it
    next_done = np.zeros(num_envs, np.float32)
    held: set[int] = set()  # envs waiting for an update before they may act
    learn_queue: collections.deque[int] = collections.deque()  # complete rollouts, in order
    update: asyncio.Future[tuple[Weights, dict[str, float]]] | None = None
    updates_done = 0
    # For fresh weights: seconds a rollout takes to act and an update to learn (the last
    # ones seen), and when each rollout began and each update was handed over.
    acting = learning = 0.0
    began: dict[int, float] = {}
    handed_over = 0.0
    minibatches = args.update_epochs * args.num_minibatches  # the last update's
    history: list[dict[str, float]] = []
    episodes: list[tuple[int, float, int]] = []  # (global step, return, length)
    recent: collections.deque[float] = collections.deque(maxlen=20)
    global_step = 0

    def lr_of(k: int) -> float:
        frac = 1.0 - (k + 1 - 1.0) / num_updates if args.anneal_lr else 1.0
        return frac * args.learning_rate

    def may_start(k: int) -> bool | None:
        """Whether an env's rollout ``k`` may start: True; False, not before an update ends;
        None, not before update k-1 has come further (fresh weights).

        Decided once per rollout and pass (the learner's progress moves meanwhile), so that
        the envs of one rollout start together and the batches stay whole.
        """
        if k >= num_updates or updates_done < k - lag:
            return False
        if shared is None or updates_done > k - 1 or not (acting and learning):
            return True
        # Fresh weights: rollout k starts once update k-1 has come far enough that the
        # rollout, acting as long as the last one did, ends when the update does (a little
        # early rather than late, which would leave the learner idle). Progress counts
        # minibatches, of which the last update did `minibatches` (fewer if target_kl
        # stopped it).
        late = 1.0 - 1.2 * acting / learning
        return late <= 0 or shared.progress(k - 1) >= late * minibatches or None

    def issue(env_ids: list[int]) -> None:
        """Choose actions for these envs (rows in env order) and send them."""
        if shared is not None:
            shared.refresh()
        actions, logprobs, values = act(agent, next_obs[env_ids])
        for j, i in enumerate(env_ids):
            k = int(env_rollout[i])
            if k not in rollouts:
                rollouts[k] = new_rollout()
                began[k] = time.perf_counter()
            r = rollouts[k]
            t = int(r.issued[i])
            r.obs[t, i], r.dones[t, i] = next_obs[i], next_done[i]
            r.actions[t, i], r.logprobs[t, i], r.values[t, i] = actions[j], logprobs[j], values[j]
            r.issued[i] += 1
            in_flight[i] = k
            if r.issued[i] == num_steps:
                env_rollout[i] += 1
        pool.send(np.clip(actions, low, high), np.asarray(env_ids, np.int32))

    def finish(result: tuple[Weights, dict[str, float]]) -> None:
        nonlocal updates_done, learning, minibatches
        weights, stats = result
        learning = time.perf_counter() - handed_over
        minibatches = int(stats["minibatches"])
        if learner_process is not None:
            agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
        history.append(stats)
        updates_done += 1

    def start_update() -> None:
        """Give the oldest complete rollout to the learner (at most one update at a time)."""
        nonlocal update, handed_over
        if update is not None or not learn_queue:
            return
        k = learn_queue.popleft()
        rollout, lr = rollouts.pop(k), lr_of(k)
        handed_over = time.perf_counter()
        if learner_process is None:  # --strict: learn now; the actor waits
            finish(learner_update(rollout, lr, False))
            torch.set_num_threads(args.actor_threads)
        else:
            update = asyncio.get_running_loop().run_in_executor(
                learner_process, learner_update, rollout, lr, True, k)

    async def wait_for_update() -> None:
        nonlocal update
        assert update is not None
        result = await update
        update = None
        finish(result)
        start_update()

    start = last_print = time.perf_counter()
    try:
        async for batch in pool.stream():
            order = np.argsort(batch.env_id, kind="stable")  # env order, as SyncVectorEnv's
            env_ids = batch.env_id[order].tolist()
            terminated, truncated = batch.terminated[order], batch.truncated[order]
            ended = terminated | truncated
            info = batch.info if ended.any() else None  # built on demand: ~10 us

            # 1. Each row is the result of its env's action in flight (none after the reset).
            for j, i in enumerate(env_ids):
                if ended[j]:  # the terminal observation counts first, as in the wrapper
                    assert info is not None
                    normalizer.obs(i, info["final_obs"][order[j]])
                    ret = float(info["episode_return"][order[j]])
                    episodes.append((global_step + 1, ret, int(info["episode_length"][order[j]])))
                    recent.append(ret)
                next_obs[i] = normalizer.obs(i, batch.obs[order[j]])
                next_done[i] = ended[j]
                k = int(in_flight[i])
                if k < 0:
                    continue
                r = rollouts[k]
                t = int(r.returned[i])
                r.rewards[t, i] = normalizer.reward(i, batch.reward[order[j]], terminated[j])
                r.returned[i] += 1
                in_flight[i] = -1
                global_step += 1
                if r.returned[i] == num_steps:
                    r.next_obs[i], r.next_done[i] = next_obs[i], next_done[i]
                    if r.complete:
                        learn_queue.append(k)
                        acting = time.perf_counter() - began.pop(k, start)  # 0: from start

            # 2. The learner: a finished update's weights reach the actor between batches.
            if update is not None and update.done():
                await wait_for_update()
            start_update()

            # 3. Act on the envs whose next rollout may start; the others wait for an update.
            held.update(env_ids)
            while True:
                gates: dict[int, bool | None] = {}
                for k in {int(env_rollout[i]) for i in held}:
                    gates[k] = may_start(k)
                ready = sorted(i for i in held if gates[int(env_rollout[i])])
                if ready:
                    held.difference_update(ready)
                    issue(ready)
                if (in_flight >= 0).any() or update is None:
                    break
                # Nothing in flight: every env waits for the learner, to finish or (fresh
                # weights) to come far enough, which it polls for.
                polling = None in gates.values()
                await asyncio.wait([update], timeout=0.002 if polling else None)
                if update.done():
                    await wait_for_update()
            if not (in_flight >= 0).any():
                assert updates_done == num_updates, "nothing in flight, nothing to wait for"
                break  # every update is done

            now = time.perf_counter()
            if args.print_every and now - last_print >= args.print_every:
                last_print = now
                stats = history[-1] if history else {}
                mean = np.mean(recent) if recent else float("nan")
                print(f"global_step={global_step:>9,}  SPS={global_step / (now - start):>6,.0f}"
                      f"  updates={updates_done:>4}/{num_updates}  return(last 20)={mean:8.1f}"
                      f"  value_loss={stats.get('value_loss', float('nan')):.3f}"
                      f"  approx_kl={stats.get('approx_kl', float('nan')):.4f}"
                      f"  update={stats.get('seconds', 0) * 1e3:.0f} ms", flush=True)
        seconds = time.perf_counter() - start
    finally:
        pool.close()
        if learner_process is not None:
            learner_process.shutdown(cancel_futures=True)

    mean_return = float(np.mean(recent)) if recent else float("nan")
    print(f"{args.env_id}: {global_step:,} env steps, {updates_done} updates in {seconds:.1f} s "
          f"({global_step / seconds:,.0f} steps/s); mean return of the last {len(recent)} "
          f"episodes {mean_return:.1f}", flush=True)
    return {"global_step": global_step, "updates": updates_done, "seconds": seconds,
            "sps": global_step / seconds, "episodes": episodes, "mean_return": mean_return,
            "history": history, "learner_threads": args.learner_threads,
            "device": str(device), "weights": host_weights(agent)}


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
