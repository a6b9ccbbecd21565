"""PPO on Atari in JAX, its rollout one ``jax.lax.scan`` over aiopool's jitted env step.

The shape of CleanRL's ``ppo_atari_envpool_xla_jax_scan.py`` (written anew here): EnvPool's
XLA interface puts the envs' send and receive into the compiled program, so the whole rollout
of ``num_steps`` steps of ``num_envs`` Atari games, policy included, is one jitted call::

    envs = envpool.make("Breakout-v5", env_type="gymnasium", num_envs=8,
                        episodic_life=True, reward_clip=True, seed=1)
    handle, recv, send, step = envs.xla()
    ...
    def body(carry, _):                       # inside jax.jit, under jax.lax.scan
        handle, (obs, reward, terminated, truncated, info) = step(handle, action)

with ``import aiopool.envpool as envpool`` (aiopool's EnvPool drop-in, whose ``xla()`` runs
aiopool's native send and receive as XLA FFI calls). The update is a second jitted call:
GAE, then ``update_epochs`` epochs of ``num_minibatches`` Adam steps on the clipped
surrogate, all under ``lax.scan``. The network is the Nature CNN with a policy and a value
head, in flax's linen (its pure ``apply`` is what ``lax.scan`` wants); the optimizer optax's
Adam, its learning rate annealed linearly to 0 over the run.

Episode statistics come from the state's ``info`` as EnvPool gives them: ``info["reward"]``
is the unclipped reward (the agent learns from the clipped one) and ``info["terminated"]``
says that the game ended; a lost life ends the training episode (``terminated``) but not the
game, so a logged return is a whole game's score. A step after an episode's end is EnvPool's
reset step (reward 0); it counts as an env step, as in EnvPool.

    python examples/ppo_atari_jax_scan.py --env-id Breakout-v5 --total-timesteps 100000
    python examples/ppo_atari_jax_scan.py --total-timesteps 2048      # two iterations, seconds

It prints one line an iteration (global step, SPS, the mean return of the games that ended)
and, at the end, the SPS after the first iteration (which compiles both functions). Needs
``pip install -e ".[examples]"`` (flax, optax).
"""

from __future__ import annotations

import argparse
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax.training.train_state import TrainState

import aiopool.envpool as envpool


@dataclass
class Args:
    env_id: str = "Breakout-v5"
    seed: int = 1
    total_timesteps: int = 10_000_000
    num_envs: int = 8
    num_steps: int = 128  # rollout length: one jitted lax.scan of this many env steps
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.1
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # The update's epochs and minibatches as straight-line code, not XLA loops: on the CPU,
    # XLA ran 4 CNN gradient steps 13x slower inside a loop (5.1 s against 0.38 s for 4 x 64
    # frames); unrolled, the update compiles longer (all 16 steps)
    unroll_update: bool = True
    print_every: int = 1  # iterations between progress lines; 0: the summary only


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in vars(Args()).items():
        kind: Any = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(default, bool) \
            else type(default)
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default)
    return Args(**vars(p.parse_args(argv)))


def orthogonal(scale: float) -> Any:
    return nn.initializers.orthogonal(scale)


class AtariAgent(nn.Module):
    """The Nature CNN on 4 stacked 84x84 frames, a policy head and a value head."""

    num_actions: int

    @nn.compact
    def __call__(self, frames: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = jnp.transpose(frames, (0, 2, 3, 1)).astype(jnp.float32) / 255.0  # NCHW -> NHWC
        for features, size, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            x = nn.Conv(features, (size, size), (stride, stride), padding="VALID",
                        kernel_init=orthogonal(np.sqrt(2)))(x)
            x = nn.relu(x)
        x = nn.relu(nn.Dense(512, kernel_init=orthogonal(np.sqrt(2)))(x.reshape(len(x), -1)))
        logits = nn.Dense(self.num_actions, kernel_init=orthogonal(0.01))(x)
        value = nn.Dense(1, kernel_init=orthogonal(1.0))(x)
        return logits, value[:, 0]


class Transition(NamedTuple):
    """One env step of every env, as the rollout's scan stacks it: ``[num_steps, num_envs]``."""

    obs: jax.Array
    action: jax.Array
    logprob: jax.Array
    value: jax.Array
    reward: jax.Array  # clipped: what the agent learns from
    done: jax.Array  # 1.0: the step ended a training episode (a lost life, game over, limit)


class Games(NamedTuple):
    """The running score (unclipped) and length of each env's game, in the rollout's carry."""

    score: jax.Array
    length: jax.Array


class Ended(NamedTuple):
    """Per step of the rollout: which envs' games ended there, with their score and length."""

    ended: jax.Array
    score: jax.Array
    length: jax.Array


def make_functions(args: Args, step: Any, agent: AtariAgent) -> tuple[Any, Any]:
    """The rollout (a jitted ``lax.scan`` over ``step``, the envs' ``xla()`` step) and the
    PPO update."""
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches

    @jax.jit
    def rollout(state: TrainState, handle: Any, obs: jax.Array, games: Games,
                key: jax.Array) -> tuple[Any, jax.Array, Games, jax.Array, Transition, Ended]:
        def one_step(carry: tuple[Any, ...], _: None) -> tuple[tuple[Any, ...], Any]:
            handle, obs, games, key = carry
            key, pick = jax.random.split(key)
            logits, value = agent.apply(state.params, obs)
            action = jax.random.categorical(pick, logits)
            logprob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
            handle, (next_obs, reward, terminated, truncated, info) = step(handle, action)
            score = games.score + info["reward"]
            length = games.length + 1
            ended = info["terminated"].astype(bool) | truncated
            kept = ~ended
            games = Games(jnp.where(kept, score, 0.0), jnp.where(kept, length, 0))
            done = (terminated | truncated).astype(jnp.float32)
            moved = Transition(obs, action, logprob, value, reward, done)
            return (handle, next_obs, games, key), (moved, Ended(ended, score, length))

        (handle, obs, games, key), (moved, ended) = jax.lax.scan(
            one_step, (handle, obs, games, key), None, length=args.num_steps)
        return handle, obs, games, key, moved, ended

    def loss_fn(params: Any, mb: Transition, advantages: jax.Array,
                returns: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        logits, value = agent.apply(params, mb.obs)
        log_probs = jax.nn.log_softmax(logits)
        logprob = jnp.take_along_axis(log_probs, mb.action[:, None], 1)[:, 0]
        log_ratio = logprob - mb.logprob
        ratio = jnp.exp(log_ratio)
        if args.norm_adv:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = jnp.maximum(
            -advantages * ratio,
            -advantages * jnp.clip(ratio, 1 - args.clip_coef, 1 + args.clip_coef)).mean()
        value_loss = 0.5 * ((value - returns) ** 2).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        loss = policy_loss - args.ent_coef * entropy + args.vf_coef * value_loss
        return loss, {"policy_loss": policy_loss, "value_loss": value_loss,
                      "entropy": entropy, "approx_kl": ((ratio - 1) - log_ratio).mean()}

    @jax.jit
    def update(state: TrainState, moved: Transition, last_obs: jax.Array,
               key: jax.Array) -> tuple[TrainState, jax.Array, dict[str, jax.Array]]:
        _, last_value = agent.apply(state.params, last_obs)

        def gae(carry: tuple[jax.Array, jax.Array],
                t: Transition) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
            advantage, next_value = carry
            live = 1.0 - t.done
            delta = t.reward + args.gamma * next_value * live - t.value
            advantage = delta + args.gamma * args.gae_lambda * live * advantage
            return (advantage, t.value), advantage

        _, advantages = jax.lax.scan(gae, (jnp.zeros_like(last_value), last_value), moved,
                                     reverse=True)
        returns = advantages + moved.value
        flat = jax.tree.map(lambda x: x.reshape(batch_size, *x.shape[2:]),
                            (moved, advantages, returns))

        def epoch(carry: tuple[TrainState, jax.Array],
                  _: None) -> tuple[tuple[TrainState, jax.Array], dict[str, jax.Array]]:
            state, key = carry
            key, shuffle = jax.random.split(key)
            order = jax.random.permutation(shuffle, batch_size)
            minibatches = jax.tree.map(
                lambda x: x[order].reshape(args.num_minibatches, minibatch_size, *x.shape[1:]),
                flat)

            def minibatch(state: TrainState,
                          mb: tuple[Transition, jax.Array, jax.Array]) -> tuple[TrainState, Any]:
                grads, stats = jax.grad(loss_fn, has_aux=True)(state.params, *mb)
                return state.apply_gradients(grads=grads), stats

            state, stats = jax.lax.scan(minibatch, state, minibatches,
                                        unroll=args.unroll_update)
            return (state, key), stats

        (state, key), stats = jax.lax.scan(epoch, (state, key), None,
                                           length=args.update_epochs, unroll=args.unroll_update)
        return state, key, jax.tree.map(jnp.mean, stats)

    return rollout, update


def main(args: Args) -> dict[str, Any]:
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        raise ValueError(f"num_envs * num_steps is {batch_size}, which num_minibatches "
                         f"({args.num_minibatches}) does not divide")
    iterations = max(1, args.total_timesteps // batch_size)
    envs = envpool.make(args.env_id, env_type="gymnasium", num_envs=args.num_envs,
                        episodic_life=True, reward_clip=True, seed=args.seed)
    agent = AtariAgent(int(envs.single_action_space.n))
    key = jax.random.PRNGKey(args.seed)
    key, init = jax.random.split(key)
    obs, _ = envs.reset()
    steps_per_update = args.num_minibatches * args.update_epochs

    def learning_rate(count: jax.Array) -> jax.Array:
        done = (count // steps_per_update) / iterations if args.anneal_lr else 0.0
        return args.learning_rate * (1.0 - done)

    state = TrainState.create(
        apply_fn=agent.apply, params=agent.init(init, jnp.asarray(obs)),
        tx=optax.chain(optax.clip_by_global_norm(args.max_grad_norm),
                       optax.adam(learning_rate, eps=1e-5)))
    handle, _, _, step = envs.xla()
    rollout, update = make_functions(args, step, agent)
    games = Games(jnp.zeros(args.num_envs), jnp.zeros(args.num_envs, jnp.int32))
    obs = jnp.asarray(obs)

    recent: deque[float] = deque(maxlen=20)
    episodes: list[tuple[int, float, int]] = []  # (global step, score, length) of each game
    start = time.perf_counter()
    warm: tuple[int, float] | None = None  # global step and time after the first iteration
    global_step = 0
    stats: dict[str, Any] = {}
    for iteration in range(1, iterations + 1):
        handle, obs, games, key, moved, ended = rollout(state, handle, obs, games, key)
        state, key, stats = update(state, moved, obs, key)
        ended_np = jax.device_get(ended)  # waits for the rollout; the update may still run
        scores = []
        for t, i in zip(*np.nonzero(ended_np.ended), strict=True):
            scores.append(float(ended_np.score[t, i]))
            episodes.append((global_step + (int(t) + 1) * args.num_envs, scores[-1],
                             int(ended_np.length[t, i])))
        recent.extend(scores)
        global_step += batch_size
        if warm is None:
            jax.block_until_ready(state.params)
            warm = (global_step, time.perf_counter())
        if args.print_every and (iteration % args.print_every == 0 or iteration == iterations):
            sps = int(global_step / (time.perf_counter() - start))
            this = f"{np.mean(scores):.1f} ({len(scores)} games)" if scores else "-"
            last20 = f"{np.mean(recent):.1f}" if recent else "-"
            print(f"iteration {iteration}/{iterations}  global_step={global_step}  SPS={sps}  "
                  f"episodic_return={this}  last 20 games={last20}  "
                  f"value_loss={float(stats['value_loss']):.4f}  "
                  f"approx_kl={float(stats['approx_kl']):.4f}", flush=True)
    jax.block_until_ready(state.params)
    seconds = time.perf_counter() - start
    envs.close()
    steady = (global_step - warm[0]) / (time.perf_counter() - warm[1]) \
        if warm is not None and global_step > warm[0] else float("nan")
    mean_return = float(np.mean(recent)) if recent else float("nan")
    print(f"done: {global_step} env steps in {seconds:.1f} s, SPS={int(global_step / seconds)} "
          f"(after the first iteration, which compiles: {steady:.0f}), "
          f"{len(episodes)} games, mean episodic_return of the last 20={mean_return:.2f}")
    return {"global_step": global_step, "iterations": iterations, "episodes": episodes,
            "sps": global_step / seconds, "steady_sps": steady, "mean_return": mean_return,
            "stats": {k: float(v) for k, v in stats.items()}}


if __name__ == "__main__":
    main(parse_args())
