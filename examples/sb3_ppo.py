"""Stable-Baselines3 PPO on CartPole-v1, its envs stepped by aiopool's C++ workers.

``aiopool.make_sb3`` returns an SB3 ``VecEnv``: pass it wherever SB3 takes ``make_vec_env(...)``.
Episode statistics come from the pool, so SB3 logs them without a Monitor wrapper.
Hyperparameters are RL Zoo's for CartPole-v1. Needs ``pip install torch stable-baselines3``.

    python examples/sb3_ppo.py                          # 50k steps, ~1 min on a laptop CPU
    python examples/sb3_ppo.py --total-timesteps 100000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback

import aiopool


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    num_envs: int = 8
    total_timesteps: int = 50_000
    n_steps: int = 32
    batch_size: int = 256
    n_epochs: int = 20
    learning_rate: float = 1e-3
    eval_episodes: int = 10
    seed: int = 0


def parse_args() -> Args:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    for name, default in vars(Args()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return Args(**vars(p.parse_args()))


class PrintProgress(BaseCallback):
    """One line every ``every`` env-steps: steps, episodes, mean return of the last 100."""

    def __init__(self, every: int) -> None:
        super().__init__()
        self.every = every
        self.next_print = every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next_print:
            self.next_print += self.every
            returns = [ep["r"] for ep in self.model.ep_info_buffer]
            mean = np.mean(returns) if returns else float("nan")
            print(f"  {self.num_timesteps:>8,} env-steps  mean return (last 100) {mean:6.1f}")
        return True


def main(args: Args) -> dict[str, float]:
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # tiny MLPs: threads only add overhead
    env = aiopool.make_sb3(args.env_id, args.num_envs, seed=args.seed)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size,
                n_epochs=args.n_epochs, learning_rate=args.learning_rate, gamma=0.98,
                gae_lambda=0.8, ent_coef=0.0, clip_range=0.2, seed=args.seed, verbose=0)

    start = time.perf_counter()
    model.learn(args.total_timesteps, callback=PrintProgress(max(args.total_timesteps // 10, 1)))
    elapsed = time.perf_counter() - start
    env.close()

    # Evaluate the greedy policy on fresh envs until eval_episodes episodes have ended.
    eval_env = aiopool.make_sb3(args.env_id, args.num_envs, seed=args.seed + 10_000)
    obs = eval_env.reset()
    returns: list[float] = []
    while len(returns) < args.eval_episodes:
        actions, _ = model.predict(obs, deterministic=True)
        obs, _, dones, infos = eval_env.step(actions)
        returns.extend(info["episode"]["r"] for info, done in zip(infos, dones, strict=True)
                       if done)
    eval_env.close()

    mean_return = float(np.mean(returns[:args.eval_episodes]))
    print(f"trained {args.total_timesteps:,} env-steps in {elapsed:.1f} s; greedy policy: mean "
          f"return {mean_return:.1f} over {args.eval_episodes} episodes (500 is the maximum)")
    return {"train_seconds": elapsed, "mean_return": mean_return}


if __name__ == "__main__":
    main(parse_args())
