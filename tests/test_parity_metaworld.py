"""Meta-World: every row of a pool equals metaworld 3.1.1's task on MuJoCo 3.17.0, bit for bit.

Each case steps a pool of 4 envs of ``Meta-World/<task>`` seeded ``seed`` and, beside it, 4
``gym.make("Meta-World/MT1", env_name=<task>, seed=seed + i)`` envs (metaworld's, with the
``reset_mocap_welds`` patch MuJoCo 3.17.0 needs: tests/metaworld_reference.py) with the same
actions, and compares the 39-number observation (dtype and bytes), the reward, terminated,
truncated (metaworld's 500-step limit) and the seven info keys at every step, through episode
ends and resets, in each autoreset mode: ``next_step`` (the step after an episode's end is a
reset), ``same_step`` (the final observation in ``info["final_obs"]``) and ``disabled`` (the test
resets ended envs). Each reset picks one of MT1's 50 task vectors with the env's generator, so
the resets check the task vectors and the pick too. The policy steers the hand towards the goal
with noise (push-v3's pushes the puck there), and some actions lie outside [-1, 1] (the
reference clips them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from helpers import step_in_mode
from metaworld_reference import VERSION, on_path, patched
from recorded import Trace, obs_by_env

import aiopool
from aiopool import registry
from aiopool._native.families import METAWORLD

if (why := on_path()) is not None:
    pytest.skip(f"needs metaworld=={VERSION}: {why}", allow_module_level=True)

NUM_ENVS = 4
MODES = ["next_step", "same_step", "disabled"]
IDS = sorted(i for i in aiopool.list_envs() if registry.family_of(i) is METAWORLD)
INFO_KEYS = ("success", "near_object", "grasp_success", "grasp_reward", "in_place_reward",
             "obj_to_target", "unscaled_reward")
STEPS = 520  # past the 500-step limit: every env ends an episode and starts the next


class Reference:
    """metaworld's MT1 envs, driven with the pool's autoreset semantics."""

    def __init__(self, env_id: str, seed: int, mode: str) -> None:
        import gymnasium as gym

        patched()
        task = env_id.removeprefix("Meta-World/")
        self.envs = [gym.make("Meta-World/MT1", env_name=task, seed=seed + i)
                     for i in range(NUM_ENVS)]
        self.mode = mode
        self.ended = np.zeros(NUM_ENVS, dtype=bool)

    def reset(self, ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            obs, _ = self.envs[i].reset()
            rows[i] = (obs, 0.0, False, False, None, None)
            self.ended[i] = False
        return rows

    def step(self, actions: npt.NDArray[np.float32], ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            assert not (self.ended[i] and self.mode == "disabled"), "reset ended envs first"
            if self.ended[i]:  # next_step: the step after an episode's end is a reset
                rows.update(self.reset([i]))
                continue
            obs, reward, terminated, truncated, info = self.envs[i].step(actions[i])
            final = None
            if (terminated or truncated) and self.mode == "same_step":
                # the row holds the next episode's first obs and (empty) info
                final, (obs, _) = (obs, info), self.envs[i].reset()
                info = None
            else:
                self.ended[i] = terminated or truncated
            rows[i] = (obs, float(reward), terminated, truncated, info, final)
        return rows


def _assert_rows(batch: aiopool.Batch, expected: dict[int, Any], where: str) -> None:
    assert sorted(batch.env_id.tolist()) == sorted(expected), f"{where}: env ids {batch.env_id}"
    for row, i in enumerate(batch.env_id.tolist()):
        obs, reward, terminated, truncated, info, final = expected[i]
        at = f"{where}, env {i}"
        mine = np.asarray(batch.obs[row])
        assert mine.dtype == obs.dtype and mine.shape == obs.shape, f"{at}: obs {mine.dtype}"
        assert mine.tobytes() == obs.tobytes(), (
            f"{at}: obs {mine.tolist()} != metaworld's {obs.tolist()}")
        got = float(batch.reward[row])
        assert np.float64(got).tobytes() == np.float64(reward).tobytes(), (
            f"{at}: reward {got!r} != metaworld's {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        for key in INFO_KEYS:
            value = float(batch.info[key][row])
            want = 0.0 if info is None else float(info[key])  # a reset row's info is zeros
            assert np.float64(value).tobytes() == np.float64(want).tobytes(), (
                f"{at}: info[{key!r}] {value!r} != metaworld's {want!r}")
        if final is not None:
            final_obs, final_info = final
            got_final = np.asarray(batch.info["final_obs"][row])
            assert got_final.tobytes() == final_obs.tobytes(), f"{at}: final_obs"
            for key in INFO_KEYS:
                value = float(batch.info["final_info"][key][row])
                assert np.float64(value).tobytes() == np.float64(final_info[key]).tobytes(), (
                    f"{at}: final_info[{key!r}] {value!r} != metaworld's {final_info[key]!r}")


def _policy(env_id: str, obs: npt.NDArray[np.float64], rng: np.random.Generator,
            late: bool) -> npt.NDArray[np.float32]:
    """Towards the goal (obs[36:39]) from the hand (obs[0:3]) for reach; for push, first to just
    behind the puck (obs[4:7]) from above, then on to the goal, pushing it (and to the goal only
after 250 steps); with noise, and the
    gripper's effort anywhere in [-1, 1.1]. A fifth of reach's actions are scaled past [-1, 1]."""
    hand, goal = obs[:, 0:3], obs[:, 36:39]
    target = goal
    if env_id != "Meta-World/reach-v3":
        puck = obs[:, 4:7]
        away = (puck - goal)[:, :2]
        away /= np.linalg.norm(away, axis=1, keepdims=True) + 1e-9
        behind = puck.copy()
        behind[:, :2] += away * 0.03
        gap = np.linalg.norm(hand[:, :2] - behind[:, :2], axis=1)
        above = behind + np.where(gap > 0.04, 0.05, 0.0)[:, None] * np.array([0.0, 0.0, 1.0])
        target = np.where((gap > 0.02)[:, None] & (not late), above, goal)
    toward = np.clip((target - hand) * 30.0, -1.0, 1.0)
    noise = rng.uniform(-0.5, 0.5, toward.shape)
    grip = rng.uniform(-1.0, 1.0, (len(obs), 1))
    if env_id != "Meta-World/reach-v3":
        noise = rng.uniform(-0.1, 0.1, toward.shape)
        grip = rng.uniform(-1.0, 1.1, (len(obs), 1))
    actions = np.concatenate([toward + noise, grip], axis=1)
    wild = (rng.random(len(obs)) < 0.2) & (env_id == "Meta-World/reach-v3")
    actions[wild] *= 1.5
    return actions.astype(np.float32)


async def _follow_metaworld(env_id: str, steps: int, mode: str, *, seed: int,
                            trace: Trace | None = None) -> None:
    """Step a pool and metaworld side by side (or the pool alone against its recording)."""
    ref = None
    if trace is not None:
        trace.env_id = env_id
    if trace is None or trace.live:
        ref = Reference(env_id, seed, mode)
    with aiopool.make(env_id, num_envs=NUM_ENVS, num_threads=2, seed=seed,
                      autoreset=mode) as pool:
        assert pool.spec.max_episode_steps == 500
        if ref is not None:
            space = ref.envs[0].action_space
            assert (space.shape, space.dtype) == (pool.single_action_space.shape,
                                                  pool.single_action_space.dtype)
        pool.async_reset()
        batch = await pool.recv()
        ended = _check_rows(batch, ref and ref.reset(list(range(NUM_ENVS))), "reset", trace)
        rng = np.random.default_rng(seed)
        successes = 0
        for t in range(steps):
            actions = _policy(env_id, obs_by_env(batch), rng, t % 500 >= 250)
            batch, expected = await step_in_mode(pool, ref, actions, mode,
                                                 trace and trace.ended)
            ended += _check_rows(batch, expected, f"step {t}", trace)
            successes += int(np.count_nonzero(batch.info["success"]))
        assert ended >= NUM_ENVS, f"only {ended} episodes ended; the test covers too little"
        assert successes > 0, "no step succeeded; the test covers too little of the reward"
    if trace is not None:
        trace.done()


def _check_rows(batch: aiopool.Batch, expected: dict[int, Any] | None, where: str,
                trace: Trace | None) -> int:
    """``_assert_rows`` where metaworld steps beside the pool, and the rows' digests where the
    case is traced; returns how many episodes ended."""
    ended = 0
    if expected is not None:
        _assert_rows(batch, expected, where)
        ended = int(np.count_nonzero(batch.terminated | batch.truncated))
    if trace is not None:
        ended = trace.rows(batch)
    return ended


def _cases() -> list[Any]:
    """Every task in next_step mode, and reach-v3 in the other modes."""
    cases = []
    for mode in MODES:
        for env_id in IDS:
            marks = [] if mode == "next_step" else [pytest.mark.asyncio_loop_only]
            if mode != "next_step" and env_id != "Meta-World/reach-v3":
                marks.append(pytest.mark.slow)
            cases.append(pytest.param(env_id, mode, id=f"{env_id.split('/')[1]}-{mode}",
                                      marks=marks))
    return cases


@pytest.mark.asyncio
@pytest.mark.parametrize(("env_id", "mode"), _cases())
async def test_matches_metaworld_step_by_step(env_id: str, mode: str, trace: Trace) -> None:
    await _follow_metaworld(env_id, STEPS, mode, seed=2024, trace=trace)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize("env_id", IDS, ids=[i.split("/")[1] for i in IDS])
async def test_other_seeds_match_metaworld(env_id: str) -> None:
    """Two whole episodes and into a third, from other seeds (one past 2**31)."""
    for seed in (0, 7, 3_000_000_000):
        await _follow_metaworld(env_id, 1010, "next_step", seed=seed)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
async def test_a_reseed_is_a_fresh_make() -> None:
    """``async_reset(seed=k)`` makes env ``i`` what ``gym.make(..., seed=k + i)`` makes: MT1's
    task vectors for that seed and a new pick stream, seen in the first observations (the
    object and the goal) of three episodes."""
    import gymnasium as gym

    patched()
    with aiopool.make("Meta-World/reach-v3", num_envs=2, seed=1, autoreset="disabled") as pool:
        pool.async_reset()
        await pool.recv()
        for seed in (55, 4_294_967_294):  # the last pair of seeds np.random.seed takes
            refs = [gym.make("Meta-World/MT1", env_name="reach-v3", seed=seed + i)
                    for i in range(2)]
            for episode in range(3):
                pool.async_reset(seed=seed if episode == 0 else None)
                batch = await pool.recv()
                for row, i in enumerate(batch.env_id.tolist()):
                    obs, _ = refs[i].reset()
                    assert np.asarray(batch.obs[row]).tobytes() == obs.tobytes(), (
                        f"seed {seed}, episode {episode}, env {i}")
