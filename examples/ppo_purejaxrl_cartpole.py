"""PureJaxRL-style PPO on CartPole-v1: one jitted function runs a whole PPO iteration, over
aiopool's native CartPole and over gymnax's, in the same run.

PureJaxRL compiles the rollout and the update together, which works when the env is itself
JAX code (gymnax's envs, vmapped over the batch). aiopool's C++ envs get into the same compiled
function through EnvPool's XLA interface: ``step`` from ``envs.xla()`` is an XLA FFI call that
sends the actions to aiopool's worker threads and receives the next batch. So ``iteration``
below, one ``jax.jit``, is::

    rollout:  jax.lax.scan of num_steps x (policy -> env step)       # the env: either backend
    update:   GAE, then update_epochs x num_minibatches Adam steps   # lax.scan, as PureJaxRL

and the training function is the same code for both backends; only ``Env.step`` differs:

- ``aiopool``: ``aiopool.envpool.make("CartPole-v1", env_type="gymnasium", ...)`` and its
  ``xla()`` step; the env state in the scan's carry is the pool's handle. EnvPool's autoreset:
  the step after an episode's end is its reset step (reward 0, counted as an env step).
- ``gymnax``: ``gymnax.make("CartPole-v1")``, its ``step`` vmapped over the envs (autoreset in
  the same step); the env state is gymnax's state.

Network and hyperparameters are PureJaxRL's CartPole PPO: two tanh MLPs of 64 units (actor,
critic), 4 envs x 128 steps, 4 epochs x 4 minibatches, clip 0.2, Adam at 2.5e-4 annealed.

    python examples/ppo_purejaxrl_cartpole.py --backend both --total-timesteps 500000
    python examples/ppo_purejaxrl_cartpole.py --backend aiopool --total-timesteps 4096

Each backend prints a line every ``print_every`` iterations and a summary: env steps/s after
the first iteration (which compiles), the compile time, and the mean return of the episodes
that ended in the last ``final_window`` iterations (a random policy scores ~22, 500 is the
most). Needs ``pip install -e ".[examples]"`` (flax, optax, gymnax).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
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
    backend: str = "both"  # "aiopool", "gymnax" or "both" (one after the other, same seed)
    env_id: str = "CartPole-v1"
    seed: int = 0
    total_timesteps: int = 500_000
    num_envs: int = 4
    num_steps: int = 128
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    clip_eps: float = 0.2
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    print_every: int = 50  # iterations between progress lines; 0: the summary only
    final_window: int = 10  # iterations whose finished episodes make the final return


def parse_args(argv: list[str] | None = None) -> Args:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in vars(Args()).items():
        kind: Any = (lambda s: s.lower() in ("1", "true", "yes")) if isinstance(default, bool) \
            else type(default)
        p.add_argument(f"--{name.replace('_', '-')}", type=kind, default=default)
    args = Args(**vars(p.parse_args(argv)))
    if args.backend not in ("aiopool", "gymnax", "both"):
        p.error(f"--backend is {args.backend!r}, expected aiopool, gymnax or both")
    return args


class Env(NamedTuple):
    """A batch of ``num_envs`` envs as the training function sees them.

    ``step(env_state, action, key) -> (env_state, obs, reward, done)`` is traced inside the
    jitted iteration; ``reset(key) -> (env_state, obs)`` runs once, outside it."""

    name: str
    num_actions: int
    reset: Callable[[jax.Array], tuple[Any, jax.Array]]
    step: Callable[[Any, jax.Array, jax.Array], tuple[Any, jax.Array, jax.Array, jax.Array]]
    close: Callable[[], None]


def aiopool_env(args: Args) -> Env:
    """aiopool's native envs through the EnvPool drop-in's ``xla()``: the env state is the
    handle that orders the FFI calls."""
    envs = envpool.make(args.env_id, env_type="gymnasium", num_envs=args.num_envs,
                        seed=args.seed)
    handle, _, _, xla_step = envs.xla()

    def reset(key: jax.Array) -> tuple[Any, jax.Array]:
        obs, _ = envs.reset()  # seeded by make(seed=...)
        return handle, jnp.asarray(obs)

    def step(handle: Any, action: jax.Array,
             key: jax.Array) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
        handle, (obs, reward, terminated, truncated, _) = xla_step(handle, action)
        return handle, obs, reward, terminated | truncated

    return Env("aiopool", int(envs.single_action_space.n), reset, step, envs.close)


def gymnax_env(args: Args) -> Env:
    """gymnax's JAX env, vmapped over the batch: the env state is gymnax's state."""
    import gymnax

    env, params = gymnax.make(args.env_id)

    def reset(key: jax.Array) -> tuple[Any, jax.Array]:
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(
            jax.random.split(key, args.num_envs), params)
        return state, obs

    def step(state: Any, action: jax.Array,
             key: jax.Array) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
        obs, state, reward, done, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
            jax.random.split(key, args.num_envs), state, action, params)
        return state, obs, reward, done

    return Env("gymnax", int(env.num_actions), reset, step, lambda: None)


class ActorCritic(nn.Module):
    """PureJaxRL's: separate actor and critic MLPs, two tanh layers of 64 units each."""

    num_actions: int

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        def mlp(x: jax.Array, out: int, scale: float) -> jax.Array:
            for _ in range(2):
                x = nn.tanh(nn.Dense(64, kernel_init=nn.initializers.orthogonal(np.sqrt(2)))(x))
            return nn.Dense(out, kernel_init=nn.initializers.orthogonal(scale))(x)

        return mlp(obs, self.num_actions, 0.01), mlp(obs, 1, 1.0)[..., 0]


class Runner(NamedTuple):
    """What one iteration hands the next."""

    train: TrainState
    env_state: Any  # aiopool: the handle; gymnax: its state
    obs: jax.Array
    episode_return: jax.Array  # of each env's running episode
    key: jax.Array


class Step(NamedTuple):
    obs: jax.Array
    action: jax.Array
    logprob: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array  # 1.0 where this step ended the episode (terminated or truncated)
    finished: jax.Array  # the return of the episode this step ended, where done


def make_iteration(args: Args, env: Env, network: ActorCritic) -> Callable[[Runner], Any]:
    """One PPO iteration, rollout and update, as one jitted function of the runner."""
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches

    def env_step(runner: Runner, _: None) -> tuple[Runner, Step]:
        train, env_state, obs, episode_return, key = runner
        key, pick, step_key = jax.random.split(key, 3)
        logits, value = network.apply(train.params, obs)
        action = jax.random.categorical(pick, logits)
        logprob = jax.nn.log_softmax(logits)[jnp.arange(args.num_envs), action]
        env_state, next_obs, reward, done = env.step(env_state, action, step_key)
        reward = reward.astype(jnp.float32)
        finished = episode_return + reward
        runner = Runner(train, env_state, next_obs, jnp.where(done, 0.0, finished), key)
        return runner, Step(obs, action, logprob, value, reward, done.astype(jnp.float32),
                            finished)

    def loss(params: Any, mb: Step, advantage: jax.Array,
             target: jax.Array) -> tuple[jax.Array, jax.Array]:
        logits, value = network.apply(params, mb.obs)
        log_probs = jax.nn.log_softmax(logits)
        ratio = jnp.exp(log_probs[jnp.arange(len(mb.action)), mb.action] - mb.logprob)
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
        clipped = jnp.clip(ratio, 1 - args.clip_eps, 1 + args.clip_eps)
        actor = -jnp.minimum(ratio * advantage, clipped * advantage).mean()
        value_clipped = mb.value + jnp.clip(value - mb.value, -args.clip_eps, args.clip_eps)
        critic = 0.5 * jnp.maximum((value - target) ** 2, (value_clipped - target) ** 2).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        return actor + args.vf_coef * critic - args.ent_coef * entropy, critic

    @jax.jit
    def iteration(runner: Runner) -> tuple[Runner, dict[str, jax.Array]]:
        runner, steps = jax.lax.scan(env_step, runner, None, length=args.num_steps)
        _, last_value = network.apply(runner.train.params, runner.obs)

        def gae(carry: tuple[jax.Array, jax.Array],
                s: Step) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
            advantage, next_value = carry
            delta = s.reward + args.gamma * next_value * (1 - s.done) - s.value
            advantage = delta + args.gamma * args.gae_lambda * (1 - s.done) * advantage
            return (advantage, s.value), advantage

        _, advantages = jax.lax.scan(gae, (jnp.zeros_like(last_value), last_value), steps,
                                     reverse=True)
        batch = jax.tree.map(lambda x: x.reshape(batch_size, *x.shape[2:]),
                             (steps, advantages, advantages + steps.value))

        def epoch(carry: tuple[TrainState, jax.Array],
                  _: None) -> tuple[tuple[TrainState, jax.Array], jax.Array]:
            train, key = carry
            key, shuffle = jax.random.split(key)
            order = jax.random.permutation(shuffle, batch_size)
            minibatches = jax.tree.map(
                lambda x: x[order].reshape(args.num_minibatches, minibatch_size, *x.shape[1:]),
                batch)

            def minibatch(train: TrainState, mb: Any) -> tuple[TrainState, jax.Array]:
                grads, critic = jax.grad(loss, has_aux=True)(train.params, *mb)
                return train.apply_gradients(grads=grads), critic

            train, critic = jax.lax.scan(minibatch, train, minibatches)
            return (train, key), critic

        (train, key), critic = jax.lax.scan(epoch, (runner.train, runner.key), None,
                                            length=args.update_epochs)
        metrics = {"episodes": steps.done.sum(),
                   "return_sum": (steps.done * steps.finished).sum(),
                   "value_loss": critic.mean()}
        return runner._replace(train=train, key=key), metrics

    return iteration


def train(args: Args, env: Env) -> dict[str, Any]:
    """PPO for ``total_timesteps`` env steps over ``env``; prints progress and a summary."""
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        raise ValueError(f"num_envs * num_steps is {batch_size}, which num_minibatches "
                         f"({args.num_minibatches}) does not divide")
    iterations = max(1, args.total_timesteps // batch_size)
    network = ActorCritic(env.num_actions)
    key = jax.random.PRNGKey(args.seed)
    key, init_key, reset_key = jax.random.split(key, 3)
    env_state, obs = env.reset(reset_key)
    steps_per_iteration = args.num_minibatches * args.update_epochs

    def learning_rate(count: jax.Array) -> jax.Array:
        done = (count // steps_per_iteration) / iterations if args.anneal_lr else 0.0
        return args.learning_rate * (1.0 - done)

    state = TrainState.create(
        apply_fn=network.apply, params=network.init(init_key, obs),
        tx=optax.chain(optax.clip_by_global_norm(args.max_grad_norm),
                       optax.adam(learning_rate, eps=1e-5)))
    runner = Runner(state, env_state, obs, jnp.zeros(args.num_envs), key)
    iteration = make_iteration(args, env, network)

    history: list[tuple[int, float]] = []  # per iteration: episodes ended, their return sum
    start = time.perf_counter()
    warm = start
    for i in range(1, iterations + 1):
        runner, metrics = iteration(runner)
        metrics = jax.device_get(metrics)  # waits for the iteration
        history.append((int(metrics["episodes"]), float(metrics["return_sum"])))
        if i == 1:
            warm = time.perf_counter()
        if args.print_every and (i % args.print_every == 0 or i == iterations):
            ended, total = map(sum, zip(*history[-args.print_every:], strict=True))
            mean = f"{total / ended:.1f}" if ended else "-"
            sps = int((i - 1) * batch_size / (time.perf_counter() - warm)) if i > 1 else 0
            print(f"[{env.name}] iteration {i}/{iterations}  global_step={i * batch_size}  "
                  f"SPS={sps}  episodic_return={mean} ({ended} episodes)  "
                  f"value_loss={float(metrics['value_loss']):.3f}", flush=True)
    end = time.perf_counter()
    env.close()
    steady = (iterations - 1) * batch_size / (end - warm) if iterations > 1 else float("nan")
    ended, total = map(sum, zip(*history[-args.final_window:], strict=True))
    final = total / ended if ended else float("nan")
    return {"backend": env.name, "global_step": iterations * batch_size,
            "iterations": iterations, "seconds": end - start, "compile_s": warm - start,
            "sps": steady, "final_return": final, "history": history}


def main(args: Args) -> dict[str, dict[str, Any]]:
    backends = ["aiopool", "gymnax"] if args.backend == "both" else [args.backend]
    results = {}
    for name in backends:
        env = aiopool_env(args) if name == "aiopool" else gymnax_env(args)
        results[name] = train(args, env)
    print(f"\n{'backend':8} {'env steps':>10} {'env-steps/s':>12} {'compile s':>10} "
          f"{'final return':>13}")
    for r in results.values():
        print(f"{r['backend']:8} {r['global_step']:>10} {r['sps']:>12.0f} "
              f"{r['compile_s']:>10.1f} {r['final_return']:>13.1f}")
    return results


if __name__ == "__main__":
    main(parse_args())
