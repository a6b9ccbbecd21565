"""Classic control: every row of a pool equals gymnasium 1.4's env, bit for bit.

Each case steps a pool of 4 envs and, beside it, 4 ``gymnasium.make(id)`` envs seeded
``seed + i`` (later resets unseeded, as gymnasium's vector envs do), with the same actions, and
compares obs, reward, terminated, truncated and elapsed_step at every step, through many
episodes and in each autoreset mode. Continuous actions include out-of-range values, which both
sides clip.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest

import aiopool

NUM_ENVS = 4
STEPS = 1000
MODES = ["next_step", "same_step", "disabled"]

pytestmark = pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")

Policy = Callable[[npt.NDArray[np.float32], npt.NDArray[Any]], npt.NDArray[Any]]


def _random(obs: npt.NDArray[np.float32], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return sampled


def _pump(velocity_index: int) -> Policy:
    """Push along the velocity most of the time, so episodes end by termination too (random
    actions only ever truncate MountainCar and Acrobot)."""

    def policy(obs: npt.NDArray[np.float32], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
        v = obs[:, velocity_index]
        if sampled.dtype == np.int64:  # Discrete(3): 0 push left / negative torque, 2 right
            pumped = np.where(v > 0, 2, 0).astype(np.int64)
            return np.where(sampled == 1, sampled, pumped)
        # Box(-1, 1): the sampled magnitude, the velocity's sign.
        signed: npt.NDArray[np.float32] = (
            np.abs(sampled) * np.where(v[:, None] >= 0, 1, -1)).astype(np.float32)
        return signed

    return policy


def _overdrive(obs: npt.NDArray[np.float32], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Actions up to 1.5x the bounds, to exercise gymnasium's in-env clipping."""
    scaled: npt.NDArray[np.float32] = (sampled * np.float32(1.5)).astype(np.float32)
    return scaled


# (id, gymnasium kwargs, policy); non-default kwargs for CartPole-v0, Pendulum and
# MountainCarContinuous.
CASES: list[tuple[str, dict[str, Any], Policy]] = [
    ("CartPole-v1", {}, _random),
    ("CartPole-v0", {"sutton_barto_reward": True}, _random),
    ("Pendulum-v1", {"g": 9.81}, _overdrive),
    ("MountainCar-v0", {}, _pump(1)),
    ("MountainCarContinuous-v0", {"goal_velocity": 0.01}, _pump(1)),
    ("Acrobot-v1", {}, _pump(5)),
]


class Reference:
    """gymnasium envs driven with the pool's autoreset semantics (gymnasium 1.x vector envs)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], seed: int, mode: str) -> None:
        self.envs = [gym.make(env_id, **kwargs) for _ in range(NUM_ENVS)]
        self.mode = mode
        self.seed = seed
        self.ended = np.zeros(NUM_ENVS, dtype=bool)
        self.elapsed = np.zeros(NUM_ENVS, dtype=np.int64)

    def reset(self, ids: list[int] | None = None, seed: int | None = None) -> dict[int, Any]:
        rows = {}
        for i in range(NUM_ENVS) if ids is None else ids:
            obs, _ = self.envs[i].reset(seed=None if seed is None else seed + i)
            rows[i] = (obs, 0.0, False, False, None)
            self.ended[i] = False
            self.elapsed[i] = 0
        return rows

    def step(self, actions: npt.NDArray[Any], ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            if self.ended[i] and self.mode == "next_step":
                rows.update(self.reset([i]))  # the action is ignored
                continue
            assert not self.ended[i], "the test must reset ended envs first in disabled mode"
            obs, reward, terminated, truncated, _ = self.envs[i].step(actions[i])
            self.elapsed[i] += 1
            final = None
            if (terminated or truncated) and self.mode == "same_step":
                final = obs
                obs, _ = self.envs[i].reset()
                self.elapsed[i] = 0
            else:
                self.ended[i] = terminated or truncated
            rows[i] = (obs, float(reward), bool(terminated), bool(truncated), final)
        return rows


def _assert_rows(batch: aiopool.Batch, expected: dict[int, Any], elapsed: npt.NDArray[Any],
                 where: str) -> int:
    """Compare a batch with the reference rows it should hold; returns how many episodes ended."""
    ids = np.asarray(batch.env_id)
    assert sorted(ids.tolist()) == sorted(expected), f"{where}: env ids {ids}"
    ended = 0
    for row, i in enumerate(ids.tolist()):
        obs, reward, terminated, truncated, final = expected[i]
        at = f"{where}, env {i}"
        got_obs = np.asarray(batch.obs[row])
        assert got_obs.dtype == np.float32 and got_obs.tobytes() == obs.tobytes(), (
            f"{at}: obs {got_obs.tolist()} != gymnasium {obs.tolist()}")
        got_reward = float(batch.reward[row])
        assert np.float64(got_reward).tobytes() == np.float64(reward).tobytes(), (
            f"{at}: reward {got_reward!r} != gymnasium {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        assert int(batch.info["elapsed_step"][row]) == int(elapsed[i]), f"{at}: elapsed_step"
        if final is not None:
            got_final = np.asarray(batch.info["final_obs"][row])
            assert got_final.tobytes() == final.tobytes(), (
                f"{at}: final_obs {got_final.tolist()} != gymnasium {final.tolist()}")
        ended += terminated or truncated
    return ended


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("env_id", "kwargs", "policy"), CASES, ids=[c[0] for c in CASES])
async def test_matches_gymnasium_step_by_step(env_id: str, kwargs: dict[str, Any],
                                              policy: Policy, mode: str) -> None:
    seed = 2024
    ref = Reference(env_id, kwargs, seed, mode)
    with aiopool.make(env_id, num_envs=NUM_ENVS, batch_size=NUM_ENVS, num_threads=2, seed=seed,
                      autoreset=mode, **kwargs) as pool:
        assert pool.single_observation_space == ref.envs[0].observation_space
        assert pool.single_action_space == ref.envs[0].action_space
        space = pool.single_action_space
        space.seed(seed)

        pool.async_reset()
        batch = await pool.recv()
        expected = ref.reset(seed=seed)
        _assert_rows(batch, expected, ref.elapsed, "reset")
        obs = np.stack([expected[i][0] for i in range(NUM_ENVS)])

        episodes = 0
        for t in range(STEPS):
            actions = policy(obs, np.stack([space.sample() for _ in range(NUM_ENVS)]))
            if mode == "disabled":
                ended = np.flatnonzero(ref.ended).tolist()
                live = np.flatnonzero(~ref.ended).tolist()
                if ended:
                    pool.async_reset(env_ids=ended)
                if live:
                    pool.send(actions[live], env_ids=live)
                batch = await pool.recv()
                expected = ref.reset(ended)
                expected.update(ref.step(actions, live))
            else:
                batch = await pool.step(actions)
                expected = ref.step(actions, list(range(NUM_ENVS)))
            episodes += _assert_rows(batch, expected, ref.elapsed, f"step {t}")
            obs = np.stack([expected[i][0] for i in range(NUM_ENVS)])
        assert episodes >= NUM_ENVS, f"only {episodes} episodes ended; the test covers too little"
