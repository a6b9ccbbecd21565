"""PPO on CartPole-v1 as an asyncio actor-learner over aiopool (CleanRL style, PyTorch).

    python examples/ppo_cartpole_async.py                  # reaches 475 in ~10 s on 2 cores
    python examples/ppo_cartpole_async.py --no-overlap     # serial PPO, for comparison
    python examples/ppo_cartpole_async.py --seed 3 --plot runs/seed3.png
    python examples/ppo_cartpole_async.py --env-id LunarLander-v3   # 200 in ~1 min on 2 cores

Another env id takes its preset (``PRESETS``: LunarLander's target of 200 and hyper-parameters)
as defaults; flags given on the command line override them.

The actor and the learner overlap. The actor is the ``async for batch in pool.stream()`` loop:
every batch of ``batch_size`` envs that finished stepping gets its actions from the actor's
snapshot of the policy and goes straight back to the C++ workers, so envs step while the actor
runs inference on other rows. A rollout is the next ``num_envs * num_steps`` actions the actor
issues. When every one of them has come back, the rollout goes to the learner, which runs the
PPO epochs in its own process (a thread would hold the GIL for most of the small torch ops)
while the actor keeps stepping the envs with its snapshot, filling the next rollout. When the
update ends, the actor loads the new weights between two batches. At most one rollout waits
for the learner: if the next one is full before the learner is done, the actor awaits the
learner, so the acting policy lags the learner by at most one update.

Overlapping needs two cores, one for the actor and one for the learner. When another process
takes one (a busy neighbour on a shared machine), the two time-share the other core and the
overlap costs more than it saves. So the schedule follows the free cores (``FreeCores``: the
usable cores minus what other processes used, measured from ``/proc/stat`` after each update):
below ``--overlap-cores`` (1.5) the actor stops at the end of a rollout and waits for the update
(the serial schedule, with the learner still in its process), and it overlaps again once the
cores are back. ``--no-adaptive`` always overlaps.

That lag is the price of the overlap: strictly on-policy PPO cannot overlap acting and learning,
because rollout k+1 has to come from the weights that update k produces. The learner therefore
uses the decoupled PPO objective of Hilton et al., "Batch size-invariance for policy
optimization" (NeurIPS 2022). At the start of an update it evaluates the rollout with its
current weights, the proximal policy: those values give GAE and the value targets, and the
ratio is clipped around the proximal policy exactly as PPO clips around its old policy. Each
sample's loss is weighted by proximal / behaviour probability, the behaviour log-prob being the
one the actor recorded when it chose the action. Without lag, proximal = behaviour, every
weight is 1 and this is plain PPO; ``--no-overlap`` runs that way: the actor stops sending at
the end of a rollout, waits for the update, then acts on every env with the new weights.

GAE is per env: a rollout's rows are sorted by env id (stable, so each env's rows stay in time
order) and each env's chain of steps is cut at terminations (no bootstrap), truncations and the
env's last row in the rollout (both bootstrapped from the value of the next observation, which
with next-step autoreset is the truncated episode's final observation). The step after an
episode ends only resets the env (its action is ignored, reward 0) and is masked out of the
loss, as in CleanRL's gymnasium-1.x PPO. The hyper-parameters are CleanRL's ``ppo.py`` defaults
except 32 envs (batches of 16) x 32 steps, 2 minibatches and a learning rate of 2e-3, tuned for
wall-clock time on 2 cores.

Overlapped runs are not bitwise reproducible: the seed fixes the initial weights, the env seeds
and the action-sampling stream, but not when the learner's weights reach the actor.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch import nn

import aiopool


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    seed: int = 1
    total_timesteps: int = 500_000
    """give up after this many env steps"""
    target_return: float = 475.0
    """stop once the mean return of the last `return_window` episodes reaches this"""
    return_window: int = 20
    num_envs: int = 32
    batch_size: int = 16
    """envs per received batch; num_envs // 2 lets stepping and inference overlap"""
    num_steps: int = 32
    """steps per env per rollout; a rollout is num_envs * num_steps transitions"""
    num_threads: int = 0
    """aiopool worker threads (0: its default, one less than the cores)"""
    overlap: bool = True
    """learn in a process while the actor steps the envs (--no-overlap: serial PPO)"""
    adaptive: bool = True
    """with --overlap: use the serial schedule while fewer than `overlap_cores` cores are free"""
    overlap_cores: float = 1.5
    """free cores (usable cores minus what other processes use) that overlapping needs"""
    learning_rate: float = 2e-3
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 2
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    torch_threads: int = 1
    """one intra-op thread each for the actor and the learner suits a 2-core machine"""
    print_every: float = 2.0
    """seconds between progress lines"""
    plot: str = "runs/ppo_cartpole_async.png"


# Per env: the target and the hyper-parameters that differ from CartPole's. LunarLander-v3 (the
# native Box2D env) learns to land with CleanRL-like settings for it: a longer horizon (gamma
# 0.999), longer rollouts, smaller steps.
PRESETS: dict[str, dict[str, float | int | str]] = {
    "LunarLander-v3": {"target_return": 200.0, "total_timesteps": 3_000_000, "num_steps": 64,
                       "learning_rate": 1e-3, "gamma": 0.999, "gae_lambda": 0.98,
                       "num_minibatches": 4, "plot": "runs/ppo_lunar_lander_async.png"},
}


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for f in fields(Args):
        default = getattr(Args, f.name)
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(default, bool):
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument(flag, type=type(default), default=default)
    env_id = p.parse_args(argv).env_id
    p.set_defaults(**PRESETS.get(env_id, {}))
    return Args(**vars(p.parse_args(argv)))


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, num_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, num_actions), std=0.01),
        )


@dataclass
class Rollout:
    """``size`` transitions in the order the actor issued their actions.

    The actor fills ``obs`` .. ``valid`` when it sends an action and ``reward`` .. ``next_obs``
    when that env's next row comes back; the rollout is complete when ``returned == size``.
    """

    obs: np.ndarray
    actions: np.ndarray
    logprobs: np.ndarray  # log mu(a|s) of the behaviour policy: the actor's snapshot
    env_id: np.ndarray
    valid: np.ndarray  # False for the reset step after an episode ended (action ignored)
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    next_obs: np.ndarray
    issued: int = 0
    returned: int = 0

    @classmethod
    def empty(cls, size: int, obs_shape: tuple[int, ...]) -> Rollout:
        return cls(obs=np.zeros((size, *obs_shape), np.float32),
                   actions=np.zeros(size, np.int64), logprobs=np.zeros(size, np.float32),
                   env_id=np.zeros(size, np.int64), valid=np.zeros(size, bool),
                   reward=np.zeros(size, np.float32), terminated=np.zeros(size, bool),
                   truncated=np.zeros(size, bool),
                   next_obs=np.zeros((size, *obs_shape), np.float32))

    @property
    def size(self) -> int:
        return len(self.env_id)


def gae(rewards: np.ndarray, values: np.ndarray, next_values: np.ndarray,
        terminated: np.ndarray, chain_ends: np.ndarray, gamma: float,
        gae_lambda: float) -> np.ndarray:
    """Generalised advantage estimates, backwards through rows that form chains of steps.

    Row ``t`` continues into row ``t + 1`` unless ``chain_ends[t]``: an episode ended there, or
    the next row belongs to another env. ``next_values[t]`` is the value of row t's next
    observation; it is not bootstrapped where ``terminated[t]``.
    """
    deltas = (rewards + gamma * next_values * ~terminated - values).tolist()
    advantages = np.zeros(len(deltas), np.float32)
    lastgaelam = 0.0
    for t, end in zip(reversed(range(len(deltas))), chain_ends[::-1].tolist(), strict=True):
        if end:
            lastgaelam = 0.0
        lastgaelam = deltas[t] + gamma * gae_lambda * lastgaelam
        advantages[t] = lastgaelam
    return advantages


def ppo_update(agent: Agent, optimizer: torch.optim.Optimizer, rollout: Rollout,
               args: Args, lr: float) -> dict[str, float]:
    """One PPO update (``update_epochs`` x ``num_minibatches`` steps) on a complete rollout."""
    # Each env's rows together, in time order (the sort is stable; rows were issued in order).
    order = np.argsort(rollout.env_id, kind="stable")
    env_id = rollout.env_id[order]
    obs, next_obs = rollout.obs[order], rollout.next_obs[order]
    same_env = env_id[1:] == env_id[:-1]
    assert np.array_equal(next_obs[:-1][same_env], obs[1:][same_env]), "an env's rows chain"
    actions = torch.from_numpy(rollout.actions[order])
    behaviour_logprobs = torch.from_numpy(rollout.logprobs[order])
    terminated = rollout.terminated[order]
    chain_ends = terminated | rollout.truncated[order] | np.append(~same_env, True)

    # The proximal policy and its values: this learner's weights before the update.
    with torch.no_grad():
        prox_logprobs = torch.log_softmax(agent.actor(torch.from_numpy(obs)), -1).gather(
            1, actions[:, None]).squeeze(1)
        values = agent.critic(torch.from_numpy(obs)).squeeze(1).numpy()
        next_values = agent.critic(torch.from_numpy(next_obs)).squeeze(1).numpy()
    advantages = gae(rollout.reward[order], values, next_values, terminated, chain_ends,
                     args.gamma, args.gae_lambda)
    returns = advantages + values

    keep = torch.from_numpy(rollout.valid[order])
    b_obs, b_actions = torch.from_numpy(obs)[keep], actions[keep]
    b_prox_logprobs = prox_logprobs[keep]
    b_weights = torch.exp(b_prox_logprobs - behaviour_logprobs[keep])  # 1 without policy lag
    b_advantages = torch.from_numpy(advantages)[keep]
    b_returns = torch.from_numpy(returns)[keep]
    b_values = torch.from_numpy(values)[keep]

    for group in optimizer.param_groups:
        group["lr"] = lr
    n = len(b_obs)
    minibatch_size = n // args.num_minibatches
    clipfracs = []
    for _epoch in range(args.update_epochs):
        perm = torch.randperm(n)
        for start in range(0, minibatch_size * args.num_minibatches, minibatch_size):
            mb = perm[start:start + minibatch_size]
            logits = agent.actor(b_obs[mb])
            logp_all = torch.log_softmax(logits, -1)
            newlogprob = logp_all.gather(1, b_actions[mb, None]).squeeze(1)
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            newvalue = agent.critic(b_obs[mb]).squeeze(1)
            logratio = newlogprob - b_prox_logprobs[mb]
            ratio = logratio.exp()

            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs.append(((ratio - 1.0).abs() > args.clip_coef).float().mean().item())

            mb_advantages = b_advantages[mb]
            if args.norm_adv:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std()
                                                                          + 1e-8)

            # Clipped around the proximal policy, weighted by proximal / behaviour.
            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef,
                                                    1 + args.clip_coef)
            pg_loss = (b_weights[mb] * torch.max(pg_loss1, pg_loss2)).mean()

            if args.clip_vloss:
                v_loss_unclipped = (newvalue - b_returns[mb]) ** 2
                v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb],
                                                       -args.clip_coef, args.clip_coef)
                v_loss_clipped = (v_clipped - b_returns[mb]) ** 2
                v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
            else:
                v_loss = 0.5 * ((newvalue - b_returns[mb]) ** 2).mean()

            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

    return {"value_loss": v_loss.item(), "policy_loss": pg_loss.item(),
            "entropy": entropy_loss.item(), "approx_kl": approx_kl.item(),
            "clipfrac": float(np.mean(clipfracs)), "lag_weight_max": b_weights.max().item(),
            "samples": n}


class FreeCores:
    """Cores left to this run, measured: the usable cores minus what other processes used.

    The overlapped schedule needs two cores, one for the actor (with the pool's worker thread)
    and one for the learner. When another process takes one, the actor and the learner
    time-share the other and overlapping costs more than it saves: the serial schedule (act,
    then learn while every env waits) is faster. ``sample`` reads the busy time of the usable
    cores from ``/proc/stat`` and subtracts this process's CPU time and the learner's (which the
    learner reports after each update, when it is idle), so whatever is left was used by others.
    """

    def __init__(self, window: float = 0.5) -> None:
        self.cores = sorted(os.sched_getaffinity(0))
        self.window = window  # shorter intervals are not judged: /proc/stat counts 10 ms ticks
        self.free = float(len(self.cores))
        self._tick = os.sysconf("SC_CLK_TCK")
        self._start = self._read(learner_cpu=0.0)

    def _read(self, learner_cpu: float) -> tuple[float, float, float]:
        busy = 0
        with open("/proc/stat") as f:
            for line in f:
                name, *counts = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in self.cores:
                    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, counts[:8])
                    busy += user + nice + system + irq + softirq + steal
        own = os.times()
        return time.perf_counter(), busy / self._tick, own.user + own.system + learner_cpu

    def sample(self, learner_cpu: float) -> float:
        """Free cores over the interval since the last judged sample (``free`` if too short)."""
        now = self._read(learner_cpu)
        seconds = now[0] - self._start[0]
        if seconds >= self.window:
            others = (now[1] - self._start[1]) - (now[2] - self._start[2])
            self.free = len(self.cores) - max(0.0, others / seconds)
            self._start = now
        return self.free


def act(actor: Agent, obs: np.ndarray,
        rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Sample actions (Gumbel-max) and their log-probabilities from the actor's snapshot."""
    with torch.inference_mode():
        logp = torch.log_softmax(actor.actor(torch.from_numpy(obs)), -1).numpy()
    actions = np.argmax(logp - np.log(-np.log(rng.random(logp.shape))), axis=1)
    return actions, logp[np.arange(len(actions)), actions]


# The learner's agent and optimizer. In the learner process with --overlap, in this process
# with --no-overlap; either way only learner_init and learner_update touch them.
_learner: tuple[Agent, torch.optim.Optimizer, Args] | None = None

Weights = dict[str, np.ndarray]


def learner_init(args: Args, obs_dim: int, num_actions: int, weights: Weights) -> None:
    global _learner
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    agent = Agent(obs_dim, num_actions)
    agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5,
                                 fused=True)
    _learner = (agent, optimizer, args)


def learner_update(rollout: Rollout, lr: float) -> tuple[Weights, dict[str, float]]:
    """One PPO update; returns the new weights (numpy, cheap to pickle) and statistics."""
    assert _learner is not None, "learner_init runs first"
    agent, optimizer, args = _learner
    start = time.perf_counter()
    stats = ppo_update(agent, optimizer, rollout, args, lr)
    stats["seconds"] = time.perf_counter() - start
    stats["process_cpu"] = time.process_time()  # this process's CPU so far, for FreeCores
    return {k: v.numpy().copy() for k, v in agent.state_dict().items()}, stats


def save_plot(path: str, episodes: list[tuple[int, float, float]], args: Args,
              title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.array([e[0] for e in episodes])
    returns = np.array([e[2] for e in episodes])
    window = args.return_window
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter(steps, returns, s=3, alpha=0.3, label="episodic return")
    if len(returns) >= window:
        rolling = np.convolve(returns, np.ones(window) / window, mode="valid")
        ax.plot(steps[window - 1:], rolling, color="C1", label=f"mean of last {window}")
    ax.axhline(args.target_return, color="gray", linestyle="--", linewidth=1, label="target")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episodic return")
    ax.set_title(title)
    ax.legend(loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


async def main(args: Args) -> dict[str, float | int | bool | str]:
    if args.num_envs % args.batch_size:
        raise ValueError(f"num_envs ({args.num_envs}) must be a multiple of batch_size "
                         f"({args.batch_size}): actions go out a whole batch at a time")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    rollout_size = args.num_envs * args.num_steps
    num_updates = args.total_timesteps // rollout_size

    with aiopool.make(args.env_id) as probe:  # the spaces, before any thread of ours starts
        obs_shape = probe.single_observation_space.shape
        obs_dim, num_actions = int(np.prod(obs_shape)), int(probe.single_action_space.n)
    actor = Agent(obs_dim, num_actions)  # the actor's snapshot of the learner's weights
    learner_args = (args, obs_dim, num_actions,
                    {k: v.numpy() for k, v in actor.state_dict().items()})
    learner_process = None
    if args.overlap:
        # The learner gets its own process: a thread would share the GIL with the actor, and
        # both are mostly Python overhead around small torch ops. Forked now, before the pool
        # starts its threads, so it starts at once instead of importing torch again.
        learner_process = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork"),
            initializer=learner_init, initargs=learner_args)
        learner_process.submit(int).result()
    else:
        learner_init(*learner_args)

    pool = aiopool.make(args.env_id, num_envs=args.num_envs, batch_size=args.batch_size,
                        num_threads=args.num_threads or None, seed=args.seed)

    # Per env: the rollout and slot of its action in flight (rollout -1: none).
    pending_rollout = np.full(args.num_envs, -1)
    pending_slot = np.zeros(args.num_envs, np.int64)
    rollouts = {0: Rollout.empty(rollout_size, obs_shape)}  # at most two: learning, filling
    issuing = 0  # the rollout new actions go to
    held: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # --no-overlap: idle envs
    update: asyncio.Future[tuple[Weights, dict[str, float]]] | None = None
    stats: dict[str, float] = {}
    updates = 0
    serial_updates = 0  # updates that every env waited for (all of them with --no-overlap)
    # With --overlap, the schedule follows the free cores: overlapped while there are enough,
    # serial (the next rollout starts only after the update) while another process takes one.
    free_cores = FreeCores() if args.overlap and args.adaptive else None
    overlapping = args.overlap and (free_cores is None or free_cores.free >= args.overlap_cores)

    def issue(obs: np.ndarray, valid: np.ndarray, env_ids: np.ndarray) -> np.ndarray:
        """Choose actions for these envs and record them in the rollout being filled."""
        actions, logprobs = act(actor, obs, rng)
        r = rollouts[issuing]
        slots = np.arange(r.issued, r.issued + len(env_ids))
        r.obs[slots], r.actions[slots], r.logprobs[slots] = obs, actions, logprobs
        r.env_id[slots], r.valid[slots] = env_ids, valid
        r.issued += len(env_ids)
        pending_rollout[env_ids], pending_slot[env_ids] = issuing, slots
        return actions

    async def finish_update() -> None:
        """Wait for the update in progress and give its weights to the actor."""
        nonlocal update, stats, overlapping
        assert update is not None
        new_weights, stats = await update
        actor.load_state_dict({k: torch.from_numpy(v) for k, v in new_weights.items()})
        update = None
        if free_cores is not None:  # judged while the learner is idle: its CPU is all counted
            overlapping = free_cores.sample(stats["process_cpu"]) >= args.overlap_cores

    def restart() -> None:
        """Serial schedule: a new rollout, and actions for every env waiting for it."""
        nonlocal issuing
        issuing += 1
        rollouts[issuing] = Rollout.empty(rollout_size, obs_shape)
        h_obs, h_valid, h_ids = (np.concatenate(x) for x in zip(*held, strict=True))
        held.clear()
        pool.send(issue(h_obs, h_valid, h_ids), h_ids)

    global_step = 0
    episodes: list[tuple[int, float, float]] = []  # (global step, seconds, return)
    recent: collections.deque[float] = collections.deque(maxlen=args.return_window)
    reached = False
    start = last_print = time.perf_counter()

    try:
        async for batch in pool.stream():
            env_ids = batch.env_id.astype(np.int64)
            obs = np.array(batch.obs)  # a copy: batch arrays are views the pool will reuse
            ended = batch.terminated | batch.truncated

            # 1. Each row completes the transition its env had in flight.
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
            pending_rollout[env_ids] = -1

            now = time.perf_counter()
            for ret in batch.info["episode_return"][ended].tolist():
                episodes.append((global_step, now - start, ret))
                recent.append(ret)
            if len(recent) == args.return_window and np.mean(recent) >= args.target_return:
                reached = True
                break
            if global_step >= args.total_timesteps:
                break

            # 2. New weights from the learner? The snapshot takes them between batches.
            if update is not None and update.done():
                await finish_update()

            # 3. Act: this batch's envs get actions now (or wait for the update when serial).
            #    An observation right after an episode ended only resets: valid=False.
            if rollouts[issuing].issued < rollout_size:
                batch.send(issue(obs, ~ended, env_ids))
            else:
                held.append((obs, ~ended, env_ids))
            if overlapping and rollouts[issuing].issued == rollout_size:
                issuing += 1
                rollouts[issuing] = Rollout.empty(rollout_size, obs_shape)

            # 4. A rollout whose every action has come back goes to the learner.
            if rollouts[min(rollouts)].returned == rollout_size:
                rollout = rollouts.pop(min(rollouts))
                lr = (1.0 - updates / num_updates if args.anneal_lr else 1.0) * args.learning_rate
                updates += 1
                if learner_process is not None:
                    if update is not None:  # at most one rollout waits: bounds the policy lag
                        await finish_update()
                    update = asyncio.get_running_loop().run_in_executor(
                        learner_process, learner_update, rollout, lr)
                    if issuing not in rollouts:  # serial schedule: every env waits for it
                        serial_updates += 1
                        await finish_update()
                else:  # --no-overlap: learn here, then act on every env with the new weights
                    serial_updates += 1
                    new_weights, stats = learner_update(rollout, lr)
                    actor.load_state_dict({k: torch.from_numpy(v)
                                           for k, v in new_weights.items()})
                if issuing not in rollouts:
                    restart()

            if now - last_print >= args.print_every:
                last_print = now
                mean = np.mean(recent) if recent else float("nan")
                print(f"global_step={global_step:>8,}  SPS={global_step / (now - start):>7,.0f}"
                      f"  updates={updates:>4}  mean_return={mean:6.1f}"
                      f"  approx_kl={stats.get('approx_kl', float('nan')):.4f}"
                      f"  lag_weight_max={stats.get('lag_weight_max', float('nan')):.2f}"
                      f"  update={stats.get('seconds', 0) * 1e3:.0f} ms"
                      + (f"  free_cores={free_cores.free:.1f}"
                         f" ({'overlapped' if overlapping else 'serial'})" if free_cores else ""),
                      flush=True)

        seconds = time.perf_counter() - start
        if update is not None:
            await finish_update()
    finally:
        pool.close()
        if learner_process is not None:
            learner_process.shutdown(cancel_futures=True)

    mean_return = float(np.mean(recent)) if recent else float("nan")
    print(f"{'reached' if reached else 'did not reach'} {args.target_return:g}: mean return "
          f"{mean_return:.1f} over the last {len(recent)} episodes after {global_step:,} env "
          f"steps, {updates} updates ({serial_updates} serial), {seconds:.1f} s "
          f"({global_step / seconds:,.0f} steps/s)")
    mode = "overlapped" if args.overlap else "serial"
    save_plot(args.plot, episodes, args,
              f"PPO {args.env_id}, aiopool {args.num_envs} envs, {mode}, seed {args.seed}: "
              f"{seconds:.1f} s")
    print(f"learning curve: {args.plot}")
    return {"reached": reached, "mean_return": mean_return, "global_step": global_step,
            "seconds": seconds, "sps": global_step / seconds, "updates": updates,
            "serial_updates": serial_updates,
            "episodes": len(episodes), "plot": args.plot}


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
