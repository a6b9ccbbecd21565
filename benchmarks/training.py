"""Training speed end to end: PPO env-steps/s and return at fixed step budgets, aiopool beside
CleanRL.

Question: with the loops RL engineers run, how much faster does PPO train on aiopool, and does
it learn as well? For HalfCheetah-v5 and Hopper-v5 (CleanRL's ``ppo_continuous_action.py``)
and Breakout-v5 (CleanRL's ``ppo_atari_envpool.py``), three runners with the same
hyper-parameters:

- ``aiopool-overlapped``: ``examples/ppo_continuous_async.py`` / ``examples/ppo_atari_async.py``
  (actor over ``pool.stream()``, learner in its own process; the MuJoCo actor acts with the
  learner's newest weights, the Atari one lags it by at most one update);
- ``aiopool-strict``: the same examples with ``--strict`` (serial, CleanRL's loop over the pool);
- ``cleanrl``: CleanRL's loop as CleanRL ships it, over gymnasium's ``SyncVectorEnv`` with
  CleanRL's wrappers (MuJoCo) or over EnvPool (Atari): ``cleanrl_continuous`` and
  ``cleanrl_atari`` below, CleanRL's scripts ported to gymnasium 1.4 / EnvPool's gymnasium API
  with nothing else changed. The MuJoCo one is the reference that the example's strict mode
  matches float for float (``tests/test_ppo_mujoco_atari_examples.py``).

Method: each (env, seed, runner) is a fresh subprocess of this script; for every env and seed
the runners go in a shuffled order (interleaved), so slow phases of a shared machine hit them
alike. env-steps/s is the training loop's (env creation, process start-up and imports
excluded). "return at N steps" is the mean return of the episodes that ended in the last 10 %
of the budget before N (game scores for Atari). Torch threads are set, not left to torch's
default (2 on 2 cores, which made a tiny forward pass take ms under load): MuJoCo 1 for
everything; Atari 1 for inference, and for the learner, when overlapped, 1 while the actor
acts (it has the other core) and every core while the actor waits for the update, and every
core when serial (the strict example and CleanRL, whose learner runs alone). The table gives
medians over seeds.

Device: ``--device`` (default ``auto``: CUDA when torch sees a GPU, else the CPU, as CleanRL's
scripts) is every runner's: CleanRL's loop and the strict examples act and learn on it; the
overlapped Atari example acts on it and learns on it in a thread beside the actor (a process on
the CPU); the overlapped MuJoCo example learns on it and acts on the CPU. On CUDA the learners'
torch threads are not juggled (1 for the overlapped ones). ``--device cuda`` without a GPU stops
before any run.

Usage:
    python benchmarks/training.py                       # 200k steps, 3 seeds: hours on 2 cores
    python benchmarks/training.py --quick               # 2 updates per env, 1 seed: ~4 min
    python benchmarks/training.py --envs Hopper-v5 --steps 50000 --seeds 1
    python benchmarks/training.py --runners aiopool-overlapped,cleanrl --reuse old/training.json
    python benchmarks/training.py --envs Breakout-v5 --device cuda   # on a GPU machine

Writes ``<out>/training.json`` and ``<out>/training.png`` (learning curves; default
``benchmarks/results``) and prints a markdown table; ``<out>/training.partial.json`` holds the
runs so far while it runs. ``--reuse`` takes CleanRL's runs (deterministic: the same episodes
every run) from an earlier result instead of running them again; their speed is then that
run's, so compare speeds within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections import deque
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

from _machine import load_text, machine_info  # noqa: E402

RUNNERS = {
    "aiopool-overlapped": "aiopool, actor and learner overlapped (the example)",
    "aiopool-strict": "aiopool, serial (the example's --strict)",
    "cleanrl": "CleanRL: SyncVectorEnv (MuJoCo) / EnvPool (Atari)",
}
MUJOCO_ENVS = ("HalfCheetah-v5", "Hopper-v5")
ATARI_ENVS = ("Breakout-v5",)


# --------------------------------------------------------------------------------------------
# CleanRL's ppo_continuous_action.py, over gymnasium 1.4's SyncVectorEnv.
#
# Ported, not rewritten: gymnasium 1.x's TransformObservation needs the observation space, and
# its SyncVectorEnv resets on the next step unless told otherwise, so it is told
# AutoresetMode.SAME_STEP, the semantics of gymnasium 0.29 that CleanRL's loop was written for;
# final_info is a dict of arrays in 1.x. TensorBoard and wandb are left out.
# --------------------------------------------------------------------------------------------

def env_id_is_dmc(env_id: str) -> bool:
    return env_id.startswith("dmc/")


class DmControlEnv(gym.Env):  # type: ignore[type-arg]
    """dm_control's task ``dmc/<domain>-<task>`` as a gymnasium env for CleanRL's loop (what
    shimmy's DmControlCompatibilityV0 does): a Dict of its named arrays, its action bounds,
    ``terminated`` where dm_control's discount is 0 and ``truncated`` at its time limit; a reset
    with a seed loads the task with that seed (``task_kwargs={"random": seed}``), as
    ``aiopool.make(..., seed=)`` seeds it."""

    def __init__(self, env_id: str) -> None:
        from dm_control import suite

        self._suite = suite
        self._task = env_id.removeprefix("dmc/").split("-", 1)
        self._env = suite.load(*self._task, task_kwargs={"random": 0})
        action = self._env.action_spec()
        self.action_space = gym.spaces.Box(action.minimum, action.maximum, dtype=np.float64)
        self.observation_space = gym.spaces.Dict({
            key: gym.spaces.Box(-np.inf, np.inf, spec.shape, np.float64)
            for key, spec in self._env.observation_spec().items()})

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._env = self._suite.load(*self._task, task_kwargs={"random": seed})
        return dict(self._env.reset().observation), {}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        ts = self._env.step(action)
        terminated = bool(ts.last() and ts.discount == 0.0)
        return (dict(ts.observation), float(ts.reward), terminated,
                bool(ts.last()) and not terminated, {})

    def close(self) -> None:
        self._env.close()


def cleanrl_continuous(args: Any) -> dict[str, Any]:
    """CleanRL's loop for ``args`` (the example's ``Args``: CleanRL's names and defaults)."""
    import gymnasium as gym
    import torch
    import torch.nn as nn
    import torch.optim as optim
    from ppo_continuous_async import torch_device
    from torch.distributions.normal import Normal

    if env_id_is_dmc(args.env_id) and args.env_id not in gym.registry:
        gym.register(args.env_id, entry_point=DmControlEnv, kwargs={"env_id": args.env_id})

    def make_env(env_id: str, idx: int, gamma: float) -> Any:
        def thunk() -> Any:
            env = gym.make(env_id)
            env = gym.wrappers.FlattenObservation(env)  # deal with dm_control's Dict obs
            env = gym.wrappers.RecordEpisodeStatistics(env)
            env = gym.wrappers.ClipAction(env)
            env = gym.wrappers.NormalizeObservation(env)
            env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10),
                                                    env.observation_space)
            env = gym.wrappers.NormalizeReward(env, gamma=gamma)
            env = gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))
            return env

        return thunk

    def layer_init(layer: Any, std: float = np.sqrt(2), bias_const: float = 0.0) -> Any:
        torch.nn.init.orthogonal_(layer.weight, std)
        torch.nn.init.constant_(layer.bias, bias_const)
        return layer

    class Agent(nn.Module):
        def __init__(self, envs: Any) -> None:
            super().__init__()
            self.critic = nn.Sequential(
                layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, 1), std=1.0),
            )
            self.actor_mean = nn.Sequential(
                layer_init(nn.Linear(np.array(envs.single_observation_space.shape).prod(), 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, 64)),
                nn.Tanh(),
                layer_init(nn.Linear(64, np.prod(envs.single_action_space.shape)), std=0.01),
            )
            self.actor_logstd = nn.Parameter(
                torch.zeros(1, np.prod(envs.single_action_space.shape)))

        def get_value(self, x: Any) -> Any:
            return self.critic(x)

        def get_action_and_value(self, x: Any, action: Any = None) -> Any:
            action_mean = self.actor_mean(x)
            action_logstd = self.actor_logstd.expand_as(action_mean)
            action_std = torch.exp(action_logstd)
            probs = Normal(action_mean, action_std)
            if action is None:
                action = probs.sample()
            return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)

    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.set_num_threads(args.actor_threads)
    device = torch_device(args.device)  # CleanRL's: CUDA if available and args.cuda

    # env setup
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, i, args.gamma) for i in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )
    assert isinstance(envs.single_action_space, gym.spaces.Box), \
        "only continuous action space is supported"

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros(
        (args.num_steps, args.num_envs, *envs.single_observation_space.shape)).to(device)
    actions = torch.zeros(
        (args.num_steps, args.num_envs, *envs.single_action_space.shape)).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    episodes: list[tuple[int, float, int]] = []
    history: list[dict[str, float]] = []

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs).to(device)
    next_done = torch.zeros(args.num_envs).to(device)

    for iteration in range(1, num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = (torch.Tensor(next_obs).to(device),
                                   torch.Tensor(next_done).to(device))

            if "final_info" in infos and "episode" in infos["final_info"]:
                info = infos["final_info"]
                for idx in np.flatnonzero(info["_episode"]):
                    episodes.append((global_step, float(info["episode"]["r"][idx]),
                                     int(info["episode"]["l"][idx])))

        # bootstrap value if not done
        update_start = time.perf_counter()
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam)
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1, *envs.single_observation_space.shape))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1, *envs.single_action_space.shape))
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, minibatch_size):
                end = start + minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
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
        history.append({"value_loss": v_loss.item(), "policy_loss": pg_loss.item(),
                        "entropy": entropy_loss.item(), "old_approx_kl": old_approx_kl.item(),
                        "approx_kl": approx_kl.item(), "clipfrac": float(np.mean(clipfracs)),
                        "explained_variance": float(explained_var),
                        "seconds": time.perf_counter() - update_start})

    seconds = time.time() - start_time
    envs.close()
    recent = [e[1] for e in episodes[-20:]]
    return {"global_step": global_step, "updates": num_iterations, "seconds": seconds,
            "sps": global_step / seconds, "episodes": episodes,
            "mean_return": float(np.mean(recent)) if recent else float("nan"),
            "history": history, "device": str(device),
            "weights": {k: v.detach().cpu().numpy().copy()
                        for k, v in agent.state_dict().items()}}


# --------------------------------------------------------------------------------------------
# CleanRL's ppo_atari_envpool.py, over EnvPool 1.2.5's gymnasium interface.
#
# Ported: env_type="gymnasium" (EnvPool's gym interface needs the old gym package), so step
# returns terminated and truncated, whose union is CleanRL's done. CleanRL's
# RecordEpisodeStatistics is a plain class here (gymnasium's Wrapper wants a gymnasium.Env).
# Torch threads as the example's --strict: args.actor_threads while acting, for the update
# args.learner_threads or (0) every core. The device is args.device's, as the example's.
# --------------------------------------------------------------------------------------------

class RecordEpisodeStatistics:
    """CleanRL's: game returns from EnvPool's unclipped ``info["reward"]``, reset on game over
    (``info["terminated"]``), not on the lost lives that end training episodes."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space

    def reset(self, **kwargs: Any) -> Any:
        observations = self.env.reset(**kwargs)
        self.episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        self.lives = np.zeros(self.num_envs, dtype=np.int32)
        self.returned_episode_returns = np.zeros(self.num_envs, dtype=np.float32)
        self.returned_episode_lengths = np.zeros(self.num_envs, dtype=np.int32)
        return observations

    def step(self, action: Any) -> Any:
        observations, rewards, terminations, truncations, infos = self.env.step(action)
        self.episode_returns += infos["reward"]
        self.episode_lengths += 1
        self.returned_episode_returns[:] = self.episode_returns
        self.returned_episode_lengths[:] = self.episode_lengths
        self.episode_returns *= 1 - infos["terminated"]
        self.episode_lengths *= 1 - infos["terminated"]
        infos["r"] = self.returned_episode_returns
        infos["l"] = self.returned_episode_lengths
        return observations, rewards, terminations, truncations, infos

    def close(self) -> None:
        self.env.close()


class AiopoolAsEnvPool:
    """EnvPool's gymnasium interface over an aiopool pool made as ``ppo_atari_async.py`` makes
    it (one batch of every env, rows put in env order), so that CleanRL's loop can run on the
    very envs of the example: the test of the example's strict mode."""

    def __init__(self, env_id: str, num_envs: int, seed: int) -> None:
        import aiopool

        self.pool = aiopool.make(env_id, num_envs=num_envs, batch_size=num_envs, seed=seed,
                                 life_loss_info=True, soft_reset_on_life_loss=True,
                                 reward_clipping=True)
        self.num_envs = num_envs
        self.single_observation_space = self.pool.single_observation_space
        self.single_action_space = self.pool.single_action_space

    def _receive(self) -> Any:
        batch = self.pool.recv_blocking()
        order = np.argsort(batch.env_id, kind="stable")
        info = batch.info
        infos = {"reward": info["reward_unclipped"][order].astype(np.float32),
                 "lives": info["lives"][order],
                 "terminated": (batch.terminated & (info["lives"] == 0))[order].astype(np.int32)}
        return (batch.obs[order], batch.reward[order].astype(np.float32),
                batch.terminated[order], batch.truncated[order], infos)

    def reset(self) -> Any:
        self.pool.async_reset()
        obs, *_, infos = self._receive()
        return obs, infos

    def step(self, actions: np.ndarray) -> Any:
        self.pool.send(actions)
        return self._receive()

    def close(self) -> None:
        self.pool.close()


def cleanrl_atari(args: Any, envs: Any = None) -> dict[str, Any]:
    """CleanRL's loop for ``args`` (the example's ``Args``), over EnvPool unless ``envs``."""
    import torch
    import torch.nn as nn
    import torch.optim as optim
    from ppo_atari_async import torch_device
    from torch.distributions.categorical import Categorical

    def layer_init(layer: Any, std: float = np.sqrt(2), bias_const: float = 0.0) -> Any:
        torch.nn.init.orthogonal_(layer.weight, std)
        torch.nn.init.constant_(layer.bias, bias_const)
        return layer

    class Agent(nn.Module):
        def __init__(self, envs: Any) -> None:
            super().__init__()
            self.network = nn.Sequential(
                layer_init(nn.Conv2d(4, 32, 8, stride=4)),
                nn.ReLU(),
                layer_init(nn.Conv2d(32, 64, 4, stride=2)),
                nn.ReLU(),
                layer_init(nn.Conv2d(64, 64, 3, stride=1)),
                nn.ReLU(),
                nn.Flatten(),
                layer_init(nn.Linear(64 * 7 * 7, 512)),
                nn.ReLU(),
            )
            self.actor = layer_init(nn.Linear(512, envs.single_action_space.n), std=0.01)
            self.critic = layer_init(nn.Linear(512, 1), std=1)

        def get_value(self, x: Any) -> Any:
            return self.critic(self.network(x / 255.0))

        def get_action_and_value(self, x: Any, action: Any = None) -> Any:
            hidden = self.network(x / 255.0)
            logits = self.actor(hidden)
            probs = Categorical(logits=logits)
            if action is None:
                action = probs.sample()
            return action, probs.log_prob(action), probs.entropy(), self.critic(hidden)

    batch_size = int(args.num_envs * args.num_steps)
    minibatch_size = int(batch_size // args.num_minibatches)
    num_iterations = args.total_timesteps // batch_size

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = True
    torch.set_num_threads(args.actor_threads)
    device = torch_device(args.device)  # CleanRL's: CUDA if available and args.cuda

    # env setup
    if envs is None:
        import envpool

        envs = envpool.make(
            args.env_id,
            env_type="gymnasium",
            num_envs=args.num_envs,
            episodic_life=True,
            reward_clip=True,
            seed=args.seed,
            # not CleanRL's: the thread count of --num-threads, the same for both engines
            **({"num_threads": args.num_threads} if args.num_threads else {}),
        )
    envs = RecordEpisodeStatistics(envs)

    agent = Agent(envs).to(device)
    optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # ALGO Logic: Storage setup
    obs = torch.zeros(
        (args.num_steps, args.num_envs, *envs.single_observation_space.shape)).to(device)
    actions = torch.zeros(
        (args.num_steps, args.num_envs, *envs.single_action_space.shape)).to(device)
    logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
    rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
    dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
    values = torch.zeros((args.num_steps, args.num_envs)).to(device)
    avg_returns: deque[float] = deque(maxlen=20)
    episodes: list[tuple[int, float, int]] = []
    history: list[dict[str, float]] = []

    # TRY NOT TO MODIFY: start the game
    global_step = 0
    start_time = time.time()
    next_obs = torch.Tensor(envs.reset()[0]).to(device)
    next_done = torch.zeros(args.num_envs).to(device)

    for iteration in range(1, num_iterations + 1):
        # Annealing the rate if instructed to do so.
        if args.anneal_lr:
            frac = 1.0 - (iteration - 1.0) / num_iterations
            lrnow = frac * args.learning_rate
            optimizer.param_groups[0]["lr"] = lrnow

        for step in range(0, args.num_steps):
            global_step += args.num_envs
            obs[step] = next_obs
            dones[step] = next_done

            # ALGO LOGIC: action logic
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob

            # TRY NOT TO MODIFY: execute the game and log data.
            next_obs, reward, terminations, truncations, info = envs.step(action.cpu().numpy())
            next_done = np.logical_or(terminations, truncations)
            rewards[step] = torch.tensor(reward).to(device).view(-1)
            next_obs, next_done = (torch.Tensor(next_obs).to(device),
                                   torch.Tensor(next_done).to(device))

            for idx, d in enumerate(next_done):
                if d and info["lives"][idx] == 0:
                    avg_returns.append(float(info["r"][idx]))
                    episodes.append((global_step, float(info["r"][idx]), int(info["l"][idx])))

        # bootstrap value if not done
        update_start = time.perf_counter()
        torch.set_num_threads(args.learner_threads or len(os.sched_getaffinity(0)))
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards).to(device)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = (
                    delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam)
            returns = advantages + values

        # flatten the batch
        b_obs = obs.reshape((-1, *envs.single_observation_space.shape))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape((-1, *envs.single_action_space.shape))
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # Optimizing the policy and value network
        b_inds = np.arange(batch_size)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, minibatch_size):
                end = start + minibatch_size
                mb_inds = b_inds[start:end]

                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb_inds], b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()

                with torch.no_grad():
                    # calculate approx_kl http://joschu.net/blog/kl-approx.html
                    old_approx_kl = (-logratio).mean()
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (
                        mb_advantages.std() + 1e-8)

                # Policy loss
                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(
                    ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                # Value loss
                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds],
                        -args.clip_coef,
                        args.clip_coef,
                    )
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
        torch.set_num_threads(args.actor_threads)

        y_pred, y_true = b_values.cpu().numpy(), b_returns.cpu().numpy()
        var_y = np.var(y_true)
        explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
        history.append({"value_loss": v_loss.item(), "policy_loss": pg_loss.item(),
                        "entropy": entropy_loss.item(), "old_approx_kl": old_approx_kl.item(),
                        "approx_kl": approx_kl.item(), "clipfrac": float(np.mean(clipfracs)),
                        "explained_variance": float(explained_var),
                        "seconds": time.perf_counter() - update_start})

    seconds = time.time() - start_time
    envs.close()
    return {"global_step": global_step, "updates": num_iterations, "seconds": seconds,
            "sps": global_step / seconds, "episodes": episodes,
            "mean_return": float(np.mean(avg_returns)) if avg_returns else float("nan"),
            "history": history, "device": str(device),
            "weights": {k: v.detach().cpu().numpy().copy()
                        for k, v in agent.state_dict().items()}}


# --------------------------------------------------------------------------------------------
# The benchmark: runners in fresh subprocesses, interleaved; JSON, table and learning curves.
# --------------------------------------------------------------------------------------------

def is_atari(env_id: str) -> bool:
    """Atari games go to the Atari example and CleanRL's EnvPool loop; gymnasium's MuJoCo envs
    and the Control Suite's tasks to the continuous ones."""
    return not (env_id.endswith(MUJOCO_ENVS) or env_id_is_dmc(env_id))


def example_args(env_id: str, seed: int, steps: int, device: str = "auto",
                 num_envs: int = 0, num_threads: int = 0, cuda_graph: bool = True) -> Any:
    """The example's Args (CleanRL's hyper-parameters) for a budget of ``steps`` env steps;
    ``num_envs`` and ``num_threads`` other than 0 replace CleanRL's env count and the engines'
    default thread counts; ``cuda_graph``: the Atari example's graphed actor on CUDA."""
    sizes = {"num_envs": num_envs} if num_envs else {}
    if is_atari(env_id):
        import ppo_atari_async as atari

        return atari.Args(env_id=env_id, seed=seed, total_timesteps=steps, print_every=0,
                          device=device, num_threads=num_threads, cuda_graph=cuda_graph, **sizes)
    import ppo_continuous_async as mujoco

    return mujoco.Args(env_id=env_id, seed=seed, total_timesteps=steps, print_every=0,
                       device=device, num_threads=num_threads, **sizes)


def run_one(runner: str, env_id: str, seed: int, steps: int, device: str = "auto",
            num_envs: int = 0, num_threads: int = 0, cuda_graph: bool = True) -> dict[str, Any]:
    args = example_args(env_id, seed, steps, device, num_envs, num_threads, cuda_graph)
    atari = is_atari(env_id)
    with contextlib.redirect_stdout(io.StringIO()):
        if runner == "cleanrl":
            out = cleanrl_atari(args) if atari else cleanrl_continuous(args)
        else:
            import ppo_atari_async
            import ppo_continuous_async

            example = ppo_atari_async if atari else ppo_continuous_async
            out = asyncio.run(example.main(replace(args, strict=runner == "aiopool-strict")))
    return {"global_step": out["global_step"], "updates": out["updates"],
            "seconds": out["seconds"], "sps": out["sps"], "episodes": out["episodes"],
            "update_seconds": statistics.median(h.get("seconds", float("nan"))
                                                for h in out["history"]),
            # overlapped: KL(behaviour || proximal) per update, how stale the acting policy was
            "lag_kl": [h["lag_kl"] for h in out["history"] if "lag_kl" in h],
            "torch_threads": {"actor": args.actor_threads,
                              "learner": out.get("learner_threads", args.learner_threads)},
            "device": device_name(out["device"]), "args": asdict(args)}


def device_name(device: str) -> str:
    """``cpu``, or ``cuda (its name)``."""
    if device == "cpu":
        return device
    import torch

    return f"{device} ({torch.cuda.get_device_name(device)})"


def measure(runner: str, env_id: str, seed: int, steps: int, timeout: float,
            device: str = "auto", num_envs: int = 0, num_threads: int = 0,
            cuda_graph: bool = True) -> dict[str, Any]:
    """One run in a fresh subprocess of this script."""
    started = time.perf_counter()
    load_before = os.getloadavg()
    proc = subprocess.run([sys.executable, __file__, "--one", runner, "--envs", env_id,
                           "--seeds", str(seed), "--steps", str(steps), "--device", device,
                           "--num-envs", str(num_envs), "--num-threads", str(num_threads),
                           "--cuda-graph" if cuda_graph else "--no-cuda-graph"],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{runner} {env_id} seed {seed} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"runner": runner, "env": env_id, "seed": seed, **result,
            "process_seconds": time.perf_counter() - started,
            "load_before": load_before, "load_after": os.getloadavg()}


def return_at(episodes: list[list[float]], step: int, window: float = 0.1) -> float:
    """Mean return of the episodes that ended in the last ``window`` of the steps up to ``step``
    (the last 5 episodes before ``step`` if none did)."""
    ended = [e for e in episodes if e[0] <= step]
    recent = [e[1] for e in ended if e[0] > step * (1 - window)] or [e[1] for e in ended[-5:]]
    return float(np.mean(recent)) if recent else float("nan")


def budget_steps(budget: float, steps: int) -> int:
    """A budget of --budgets: a fraction of the run's steps if <= 1, else env steps."""
    return int(budget * steps) if budget <= 1 else int(budget)


def budget_label(budget: float) -> str:
    return f"{budget:.0%} of the steps" if budget <= 1 else f"{budget / 1000:g}k steps"


def summarise(runs: list[dict[str, Any]], envs: list[str], runners: list[str],
              budgets: list[float]) -> list[dict[str, Any]]:
    rows = []
    for env_id in envs:
        ref = {r["seed"]: r["sps"] for r in runs if r["env"] == env_id and r["runner"] == "cleanrl"}
        for runner in runners:
            mine = [r for r in runs if r["env"] == env_id and r["runner"] == runner]
            if not mine:
                continue
            steps = mine[0]["args"]["total_timesteps"]
            ratios = [r["sps"] / ref[r["seed"]] for r in mine if r["seed"] in ref]
            rows.append({
                "env": env_id, "runner": runner, "seeds": len(mine), "steps": steps,
                "median_sps": statistics.median(r["sps"] for r in mine),
                "sps_vs_cleanrl": statistics.median(ratios) if ratios else float("nan"),
                "median_update_seconds": statistics.median(r["update_seconds"] for r in mine),
                "returns": {budget_label(b): [return_at(r["episodes"], budget_steps(b, steps))
                                              for r in mine] for b in budgets},
                "sps": {r["seed"]: round(r["sps"], 1) for r in mine},
            })
    return rows


def render(rows: list[dict[str, Any]], budgets: list[float]) -> str:
    labels = [budget_label(b) for b in budgets]
    head = " | ".join(f"return at {label}" for label in labels)
    lines = [f"| env | runner | steps | env-steps/s | vs CleanRL | update s | {head} |",
             "|---|---|---|---|---|---|" + "---|" * len(budgets)]
    for r in rows:
        cells = []
        for label in labels:
            vals = [v for v in r["returns"][label] if not np.isnan(v)]
            cells.append(f"{statistics.median(vals):.1f} ({min(vals):.0f}..{max(vals):.0f})"
                         if vals else "-")
        lines.append(f"| {r['env']} | {r['runner']} | {r['steps']:,} | {r['median_sps']:,.0f} "
                     f"| {r['sps_vs_cleanrl']:.2f}x | {r['median_update_seconds']:.2f} "
                     f"| {' | '.join(cells)} |")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], envs: list[str], runners: list[str], path: Path,
         title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env_id in zip(axes[0], envs, strict=True):
        for c, runner in enumerate(runners):
            mine = [r for r in runs if r["env"] == env_id and r["runner"] == runner]
            for n, r in enumerate(mine):
                eps = np.array(r["episodes"], dtype=float).reshape(-1, 3)
                if not len(eps):
                    continue
                k = max(1, min(10, len(eps) // 3))
                smooth = np.convolve(eps[:, 1], np.ones(k) / k, mode="valid")
                sps = statistics.median(x["sps"] for x in mine)
                ax.plot(eps[k - 1:, 0], smooth, color=f"C{c}", alpha=0.8, linewidth=1,
                        marker="." if len(smooth) < 20 else None,
                        label=f"{runner} ({sps:,.0f} steps/s)" if n == 0 else None)
        ax.set_title(env_id)
        ax.set_xlabel("env steps")
        ax.set_ylabel("episodic return (running mean of up to 10)")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", default=",".join(MUJOCO_ENVS + ATARI_ENVS))
    p.add_argument("--seeds", default="1,2,3", help="comma-separated seeds")
    p.add_argument("--runners", default=",".join(RUNNERS),
                   help=f"comma-separated subset of {', '.join(RUNNERS)}")
    p.add_argument("--steps", type=int, default=200_000, help="env steps per run (the budget)")
    p.add_argument("--budgets", default="0.25,0.5,1",
                   help="where to report the return: fractions of the run's steps (<= 1) or "
                        "env steps (> 1)")
    p.add_argument("--quick", action="store_true",
                   help="a tiny budget (2 updates per env, 1 seed): checks that it all runs")
    p.add_argument("--timeout", type=float, default=6 * 3600, help="seconds per run")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="every runner's torch device (auto: CUDA when torch sees a GPU, as "
                        "CleanRL's scripts; overlapped MuJoCo acts on the CPU)")
    p.add_argument("--num-envs", type=int, default=0,
                   help="envs per run (0: CleanRL's, 8 for Atari and 1 for MuJoCo)")
    p.add_argument("--num-threads", type=int, default=0,
                   help="the engines' worker threads, aiopool's and EnvPool's (0: their default)")
    p.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=True,
                   help="on CUDA, the overlapped Atari example's actor as one CUDA graph (its "
                        "default; --no-cuda-graph: eager, as its --no-cuda-graph)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--reuse", type=Path,
                   help="an earlier training.json: take its runs of the --reuse-runners with the "
                        "same env, seed and steps instead of running them again")
    p.add_argument("--reuse-runners", default="cleanrl",
                   help="the runners --reuse takes (CleanRL's and strict runs are deterministic: "
                        "the same episodes; their speed is from the earlier run's load)")
    p.add_argument("--one", choices=list(RUNNERS), help=argparse.SUPPRESS)  # a child run
    args = p.parse_args(argv)
    args.envs = args.envs.split(",")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.runners = args.runners.split(",")
    if unknown := set(args.runners) - set(RUNNERS):
        p.error(f"unknown runners {sorted(unknown)}; expected some of {list(RUNNERS)}")
    if args.quick and not args.one:
        args.seeds = args.seeds[:1]
    args.budgets = [float(b) for b in args.budgets.split(",")]
    from ppo_atari_async import torch_device

    try:
        args.device = torch_device(args.device).type  # --device cuda without a GPU: now
    except RuntimeError as e:
        p.error(str(e))
    return args


def steps_for(env_id: str, args: argparse.Namespace) -> int:
    if not args.quick:
        return int(args.steps)
    return 2 * (8 * 128 if is_atari(env_id) else 2048)  # two rollouts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.one:
        out = run_one(args.one, args.envs[0], args.seeds[0], args.steps, args.device,
                      args.num_envs, args.num_threads, args.cuda_graph)
        print(json.dumps(out))
        return 0

    machine = machine_info("torch", "gymnasium", "envpool")
    loads = [os.getloadavg()]
    started = time.monotonic()
    runs = []
    reusable = {}
    if args.reuse:
        for r in json.loads(args.reuse.read_text())["runs"]:
            # runs of this device only (runs from before --device were on the CPU)
            same_device = r.get("device", "cpu").split()[0] == args.device
            if r["runner"] in args.reuse_runners.split(",") and same_device:
                reusable[r["runner"], r["env"], r["seed"], r["args"]["total_timesteps"],
                         r["args"]["num_envs"], r["args"]["num_threads"]] = r
    name = "training_quick" if args.quick else "training"
    args.out.mkdir(parents=True, exist_ok=True)
    partial = args.out / f"{name}.partial.json"  # the runs so far, should this one be stopped
    order = random.Random(0)
    total = len(args.envs) * len(args.seeds) * len(args.runners)
    for env_id in args.envs:
        steps = steps_for(env_id, args)
        for seed in args.seeds:
            runners = list(args.runners)
            order.shuffle(runners)
            for runner in runners:
                size = example_args(env_id, seed, steps, args.device, args.num_envs,
                                    args.num_threads)
                key = (runner, env_id, seed, steps, size.num_envs, size.num_threads)
                if key in reusable:
                    run = {**reusable[key], "reused": True}
                else:
                    run = measure(runner, env_id, seed, steps, args.timeout, args.device,
                                  args.num_envs, args.num_threads, args.cuda_graph)
                    partial.write_text(json.dumps({"runs": [*runs, run]}))
                runs.append(run)
                last = run["episodes"][-1][1] if run["episodes"] else float("nan")
                reused = " (reused)" if key in reusable else ""
                print(f"  [{len(runs)}/{total}] {env_id} seed {seed} {runner:<19}{reused} "
                      f"{run['sps']:7,.0f} steps/s  {run['seconds']:6.1f} s  last return "
                      f"{last:8.1f}  load {run['load_after'][0]:.2f}  "
                      f"({time.monotonic() - started:.0f} s so far)", file=sys.stderr, flush=True)
            loads.append(os.getloadavg())
    run_seconds = time.monotonic() - started
    budgets = args.budgets
    rows = summarise(runs, args.envs, args.runners, budgets)

    title = (f"PPO, CleanRL's hyper-parameters, {'quick budget' if args.quick else args.steps}"
             f" env steps, seeds {','.join(map(str, args.seeds))}"
             + (f", {args.num_envs} envs" if args.num_envs else "")
             + (f", {args.num_threads} engine threads" if args.num_threads else "")
             + (", the Atari actor eager (--no-cuda-graph)" if not args.cuda_graph else "")
             + "; torch device "
             f"{', '.join(sorted({r.get('device', 'cpu') for r in runs}))}; {machine['cpu']}, "
             f"{machine['usable_cores']} cores, load {load_text(loads[0])} -> "
             f"{load_text(loads[-1])}"
             + (f"; {args.reuse_runners} from an earlier run" if reusable else ""))
    print(f"# PPO training: env-steps/s and return at fixed budgets\n\n{title}; run time "
          f"{run_seconds:.0f} s. Torch threads: MuJoCo 1 (actor and learner); Atari 1 for "
          "inference; for the learner, overlapped, 1 while the actor acts and every core while "
          "it waits (on CUDA: 1), and every core serial (strict, CleanRL).\n")
    print(render(rows, budgets))

    result = {"question": "PPO env-steps/s and return at fixed step budgets, aiopool vs "
                          "CleanRL's loop over SyncVectorEnv / EnvPool",
              "envs": args.envs, "seeds": args.seeds, "runners": args.runners,
              "budgets": budgets, "quick": args.quick, "device": args.device,
              "num_envs": args.num_envs, "num_threads": args.num_threads,
              "machine": {**machine, "load_start": loads[0], "load_end": loads[-1],
                          "load_after_each_seed": loads[1:]},
              "run_seconds": run_seconds, "reused_from": str(args.reuse or ""),
              "summary": rows, "runs": runs}
    path = args.out / f"{name}.json"
    path.write_text(json.dumps(result, indent=1))
    partial.unlink(missing_ok=True)
    plot(runs, args.envs, args.runners, args.out / f"{name}.png", title)
    print(f"\nwrote {path} and {args.out / f'{name}.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
