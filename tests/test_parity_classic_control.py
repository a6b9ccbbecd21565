"""Classic control, toy text and Box2D: every row of a pool equals gymnasium 1.4's env, bit for
bit.

Each case steps a pool of 4 envs and, beside it, 4 ``gymnasium.make(id)`` envs seeded
``seed + i`` (later resets unseeded, as gymnasium's vector envs do), with the same actions, and
compares obs, reward, terminated, truncated, elapsed_step and the family's info keys (toy text:
``prob``, Taxi's ``action_mask``) at every step, through many episodes and in each autoreset
mode. Continuous actions include out-of-range values, which both sides clip. FrozenLake's
random maps (``desc=None, map_name=None``) are ``generate_random_map(seed=seed + i)``.
LunarLander flies gymnasium's own heuristic pilot (``Pilot``), so that episodes end by landing
(the lander asleep), by crashing and by flying off. Blackjack's observation is a Tuple of three
int64 arrays, compared per part; its hands end in every outcome (a natural's 1.5 included).

In each env's first case, in ``next_step`` mode, the pool renders (``render_mode="rgb_array"``,
where the family renders) and env 0's frame is compared with gymnasium's ``env.render()`` at
each of the first ``FRAMES`` steps, through its episode ends and resets (the reference renders every
step, as a video recorder does: Taxi's heading follows its last move only then).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium.envs.box2d.lunar_lander import heuristic
from gymnasium.envs.toy_text.frozen_lake import generate_random_map
from helpers import step_in_mode
from recorded import Trace, obs_by_env

import aiopool
from aiopool import registry

NUM_ENVS = 4
DRIVEN_ENVS = 2  # CarRacing's Driver cases (below)
STEPS = 1000
FRAMES = 250  # in each env's first case: 1,750 frames of classic control, 1,500 of toy text,
# 1,250 of Box2D
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


def _some_infinite(actions: npt.NDArray[Any], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Continuous actions: ±inf in place of about one value in 32 (where the sampled value's low
    bits say so), which gymnasium's envs clip (MountainCarContinuous's reward is then -inf). Env 0
    keeps its policy's actions: the Driver's car that leaves the field brakes for no infinity."""
    if actions.dtype != np.float32:
        return actions
    hit = sampled.view(np.uint32) % 32 == 0
    hit[0] = False
    out: npt.NDArray[Any] = np.where(hit, np.copysign(np.float32(np.inf), sampled),
                                     actions).astype(np.float32)
    return out


class Greedy:
    """Toy text: the greedy action of value iteration on each reference env's ``P`` table, or the
    sampled action where it is 0 (a random step about one time in ``n``), so that episodes end
    by reaching the goal, by falling, and by the time limit."""

    _solved: ClassVar[dict[str, npt.NDArray[Any]]] = {}  # a table's repr -> its q

    def bound(self, envs: list[gym.Env[Any, Any]]) -> Policy:
        tables = [self._q_of(env.unwrapped.P) for env in envs]  # type: ignore[attr-defined]

        def policy(obs: npt.NDArray[Any], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
            greedy = np.array([int(np.argmax(q[int(s)])) for q, s in zip(tables, obs, strict=True)])
            return np.where(sampled == 0, sampled, greedy).astype(np.int64)

        return policy

    def _q_of(self, table: dict[int, dict[int, list[tuple[float, int, float, bool]]]]
              ) -> npt.NDArray[Any]:
        """``_q`` of a table, solved once per distinct table (1 s for Taxi's)."""
        key = repr(table)
        if key not in self._solved:
            self._solved[key] = self._q(table)
        return self._solved[key]

    @staticmethod
    def _q(table: dict[int, dict[int, list[tuple[float, int, float, bool]]]]) -> npt.NDArray[Any]:
        q = np.zeros((len(table), len(table[0])))
        for _ in range(100):
            v = q.max(axis=1)
            q = np.array([[sum(p * (r + 0.95 * (not t) * v[n]) for p, n, r, t in outcomes)
                           for _, outcomes in sorted(actions.items())]
                          for _, actions in sorted(table.items())])
        return q


class Pilot:
    """LunarLander: gymnasium's heuristic landing (``lunar_lander.heuristic``), with the sampled
    action every tenth step; env 0 flies the sampled actions only. So some episodes land (reward
    +100: the lander asleep on the ground) and others crash or fly off (-100)."""

    def __init__(self) -> None:
        self.t = 0

    def __call__(self, obs: npt.NDArray[np.float32], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
        self.t += 1
        lander = SimpleNamespace(unwrapped=SimpleNamespace(continuous=sampled.dtype == np.float32))
        flown = np.stack([np.asarray(heuristic(lander, o), dtype=sampled.dtype) for o in obs])
        flown[0] = sampled[0]
        return sampled if self.t % 10 == 0 else flown


class Driver:
    """CarRacing: each reference env's car steers towards its track six tiles ahead, at up to
    55 (pure pursuit on gymnasium's ``track``), so episodes go round the track (finished laps:
    ``test_car_racing_finishes_its_lap_on_gymnasium_s_step``) or reach the time limit; env 0
    turns off the road and drives off the field (-100); the other's every tenth step is
    sampled. Discrete actions: the nearest of steer right / left, gas, nothing. Two envs
    (``DRIVEN_ENVS``): gymnasium's every step costs ~6 ms of pygame drawing."""

    def bound(self, envs: list[gym.Env[Any, Any]]) -> Policy:
        t = 0

        def policy(obs: npt.NDArray[Any], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
            nonlocal t
            t += 1
            acts = [self._drive(env.unwrapped, i == 0) for i, env in enumerate(envs)]
            if sampled.dtype == np.int64:
                acts = [np.int64(3 if gas > 0 and abs(steer) < 0.3 else 1 if steer > 0 else
                                 2 if steer < 0 else 0) for steer, gas, _ in acts]
            driven = np.stack(acts).astype(sampled.dtype)
            if t % 10 == 0:
                driven[1:] = sampled[1:]
            return driven

        return policy

    @staticmethod
    def _drive(env: Any, away: bool) -> npt.NDArray[np.float32]:
        if away:  # right for 20 steps after a reset, then straight on
            return np.array([0.5 if env.t < 0.41 else 0.0, 0.4, 0.0], np.float32)
        hull = env.car.hull
        x, y = hull.position
        track = np.array([(p[2], p[3]) for p in env.track])
        near = int(np.argmin((track[:, 0] - x) ** 2 + (track[:, 1] - y) ** 2))
        tx, ty = track[(near + 6) % len(track)]
        err = (math.atan2(ty - y, tx - x) - hull.angle - math.pi / 2 + math.pi) % (2 * math.pi)
        speed = math.hypot(*hull.linearVelocity)
        return np.array([np.clip(-2.0 * (err - math.pi), -1, 1), 0.3 if speed < 55 else 0.0, 0.0],
                        np.float32)


# (id, gymnasium kwargs, policy, info keys compared); non-default kwargs for CartPole-v0,
# Pendulum, MountainCarContinuous and each toy-text env.
CASES: list[tuple[str, dict[str, Any], Policy | Greedy | Driver, tuple[str, ...]]] = [
    ("CartPole-v1", {}, _random, ()),
    ("CartPole-v0", {"sutton_barto_reward": True}, _random, ()),
    ("Pendulum-v1", {"g": 9.81}, _overdrive, ()),
    ("MountainCar-v0", {}, _pump(1), ()),
    ("MountainCarContinuous-v0", {"goal_velocity": 0.01}, _pump(1), ()),
    ("Acrobot-v1", {}, _pump(5), ()),
    ("FrozenLake-v1", {}, _random, ("prob",)),
    ("FrozenLake-v1", {"success_rate": 0.6, "reward_schedule": (2, -1, 0.5)}, Greedy(), ("prob",)),
    ("FrozenLake8x8-v1", {"is_slippery": False}, Greedy(), ("prob",)),
    ("FrozenLake-v1", {"desc": ["SFFHF", "FHFFS", "FFFHG"], "success_rate": 0.5}, Greedy(),
     ("prob",)),
    ("FrozenLake-v1", {"desc": None, "map_name": None}, Greedy(), ("prob",)),
    ("CliffWalking-v1", {}, Greedy(), ("prob",)),
    ("CliffWalkingSlippery-v1", {}, Greedy(), ("prob",)),
    ("Taxi-v4", {}, Greedy(), ("prob", "action_mask")),
    ("Taxi-v4", {"is_rainy": True, "rainy_probability": 0.7, "fickle_passenger": True,
                 "fickle_probability": 0.5}, Greedy(), ("prob", "action_mask")),
    ("Blackjack-v1", {}, _random, ()),
    ("Blackjack-v1", {"sab": False, "natural": True}, _random, ()),
    ("LunarLander-v3", {}, Pilot(), ()),
    ("LunarLanderContinuous-v3", {}, Pilot(), ()),
    ("LunarLander-v3", {"enable_wind": True, "gravity": -9.0}, Pilot(), ()),
    ("LunarLander-v3", {"continuous": True, "enable_wind": True, "wind_power": 18.0,
                        "turbulence_power": 1.9}, Pilot(), ()),
    ("BipedalWalker-v3", {}, _overdrive, ()),
    ("BipedalWalkerHardcore-v3", {}, _overdrive, ()),
    ("BipedalWalker-v3", {"hardcore": True}, _overdrive, ()),
    ("CarRacing-v3", {}, Driver(), ("lap_finished",)),
    # Discrete gas (0.2) takes the car off the field only after ~360 steps: episodes of 200.
    ("CarRacing-v3", {"continuous": False, "lap_complete_percent": 0.5, "max_episode_steps": 200},
     Driver(), ("lap_finished",)),
    ("CarRacing-v3", {"domain_randomize": True}, Driver(), ("lap_finished",)),
    # Sampled actions (the Driver reads gymnasium's car, which a recorded case does not step):
    # CarRacing in the default tier, through time limits.
    ("CarRacing-v3", {"max_episode_steps": 100}, _random, ("lap_finished",)),
]


def _case_id(case: tuple[str, dict[str, Any], Policy | Greedy | Driver, tuple[str, ...]]) -> str:
    return case[0] + "".join(f"-{k}={v}" for k, v in case[1].items())


def _make_reference(env_id: str, kwargs: dict[str, Any], seed: int,
                    render_mode: str | None = None) -> gym.Env[Any, Any]:
    """gymnasium's env; FrozenLake's random map drawn as aiopool draws it for env ``seed``."""
    if "desc" in kwargs and kwargs["desc"] is None and kwargs.get("map_name", "4x4") is None:
        kwargs = {**kwargs, "desc": generate_random_map(seed=seed)}
    return gym.make(env_id, render_mode=render_mode, **kwargs)


class Reference:
    """gymnasium envs driven with the pool's autoreset semantics (gymnasium 1.x vector envs)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], seed: int, mode: str,
                 render_mode: str | None = None, num_envs: int = NUM_ENVS) -> None:
        self.envs = [_make_reference(env_id, kwargs, seed + i, render_mode)
                     for i in range(num_envs)]
        self.mode = mode
        self.seed = seed
        self.ended = np.zeros(num_envs, dtype=bool)
        self.elapsed = np.zeros(num_envs, dtype=np.int64)

    def reset(self, ids: list[int] | None = None, seed: int | None = None) -> dict[int, Any]:
        rows = {}
        for i in range(len(self.envs)) if ids is None else ids:
            obs, info = self.envs[i].reset(seed=None if seed is None else seed + i)
            rows[i] = (obs, 0.0, False, False, None, info)
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
            obs, reward, terminated, truncated, info = self.envs[i].step(actions[i])
            self.elapsed[i] += 1
            final = None
            if (terminated or truncated) and self.mode == "same_step":
                final = obs
                obs, info = self.envs[i].reset()
                self.elapsed[i] = 0
            else:
                self.ended[i] = terminated or truncated
            rows[i] = (obs, float(reward), bool(terminated), bool(truncated), final, info)
        return rows


def _assert_rows(batch: aiopool.Batch, expected: dict[int, Any], elapsed: npt.NDArray[Any],
                 where: str, info_keys: tuple[str, ...] = ()) -> int:
    """Compare a batch with the reference rows it should hold (obs of the reference's dtype:
    float32 arrays, or int64 for a Discrete observation); returns how many episodes ended."""
    ids = np.asarray(batch.env_id)
    assert sorted(ids.tolist()) == sorted(expected), f"{where}: env ids {ids}"
    ended = 0
    for row, i in enumerate(ids.tolist()):
        obs, reward, terminated, truncated, final, info = expected[i]
        obs = np.asarray(obs)
        at = f"{where}, env {i}"
        got_obs = _row(batch.obs, row)
        assert got_obs.dtype == obs.dtype and got_obs.tobytes() == obs.tobytes(), (
            f"{at}: obs {got_obs.tolist()} != gymnasium {obs.tolist()}")
        got_reward = float(batch.reward[row])
        assert np.float64(got_reward).tobytes() == np.float64(reward).tobytes(), (
            f"{at}: reward {got_reward!r} != gymnasium {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        assert int(batch.info["elapsed_step"][row]) == int(elapsed[i]), f"{at}: elapsed_step"
        if final is not None:
            got_final = _row(batch.info["final_obs"], row)
            assert got_final.tobytes() == np.asarray(final).tobytes(), (
                f"{at}: final_obs {got_final.tolist()} != gymnasium {np.asarray(final).tolist()}")
        for key in info_keys:
            if f"_{key}" in batch.info:  # a key the env sets on some steps only
                is_set = bool(batch.info[f"_{key}"][row])
                assert is_set == (key in info), f"{at}: info[{key!r}] set: {is_set}, {info}"
                if not is_set:
                    continue
            got, want = np.asarray(batch.info[key][row]), np.asarray(info[key])
            assert got.shape == want.shape and (got == want).all(), (
                f"{at}: info[{key!r}] {got.tolist()} != gymnasium {want.tolist()}")
        ended += terminated or truncated
    return ended


def _row(obs: Any, row: int) -> npt.NDArray[Any]:
    """Row ``row`` of a batch's obs; of a Tuple observation (Blackjack's three int64 arrays),
    the row of each part, as ``np.asarray`` holds gymnasium's tuple of ints."""
    if isinstance(obs, tuple):
        return np.array([part[row] for part in obs])
    return np.asarray(obs[row])


# The rewards of terminal steps each case must see: both outcomes of a landing, every outcome
# of a hand (a natural's 1.5 with natural=True).
OUTCOMES = {"LunarLander": {100.0, -100.0}, "Blackjack": {-1.0, 0.0, 1.0}, "CarRacing": {-100.0}}


# gymnasium's CarRacing draws every observation with pygame (6 ms a step): its cases run beside
# it with the slow suites only (the first case in every mode, the others in next_step mode);
# the default run has the recorded case of sampled actions.
SLOW_REFERENCE = {"CarRacing-v3"}
# The envs whose first case runs in the other autoreset modes in the default tier: one of each
# family and observation kind (a Box, a Discrete, a Tuple, an info mask of Taxi's, a Box2D
# world); every env's first case runs them with the slow suites.
ALL_MODES_DEFAULT = {"CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "Taxi-v4", "Blackjack-v1",
                     "LunarLander-v3"}


FIRST_CASES = [(case[0], case[1]) for k, case in enumerate(CASES)
               if case[0] not in {c[0] for c in CASES[:k]}]


def _cases_in_modes() -> Iterator[Any]:
    """Every case in every autoreset mode; the other modes, which run the same arithmetic as
    next_step and the pool's own autoreset code, for the first case of each env with the slow
    suites (of the envs of ``ALL_MODES_DEFAULT`` in the default run too) and for every case
    with the slow suites."""
    seen: set[str] = set()
    for case in CASES:
        first = case[0] not in seen
        seen.add(case[0])
        for mode in MODES:
            slow = mode != "next_step" and not (first and case[0] in ALL_MODES_DEFAULT)
            if case[0] in SLOW_REFERENCE:
                if mode != "next_step" and not first:
                    continue  # the other modes' code is the pool's, checked on its first case
                # live with the slow suites (the live case is slow anyway); the recorded one,
                # where the policy lets it have one, in the default run
                slow = mode != "next_step"
            marks = [pytest.mark.slow] if slow else []
            if isinstance(case[2], Driver):
                marks.append(pytest.mark.live_only)  # the Driver reads gymnasium's car
            yield pytest.param(*case, mode, id=f"{_case_id(case)}-{mode}", marks=marks)


@pytest.mark.asyncio
@pytest.mark.parametrize(("env_id", "kwargs", "policy", "info_keys", "mode"),
                         list(_cases_in_modes()))
async def test_matches_gymnasium_step_by_step(env_id: str, kwargs: dict[str, Any],
                                              policy: Policy | Greedy | Driver,
                                              info_keys: tuple[str, ...], mode: str,
                                              trace: Trace) -> None:
    """The live case steps gymnasium beside the pool; the recorded one makes gymnasium's envs
    (toy text's policy reads their tables) but steps the pool alone, against the recording."""
    seed = 2024
    trace.env_id = env_id
    # Frames in the first case of each env (gymnasium draws most of them: ~3 ms a frame), in
    # next_step mode (the loop changes nothing a frame shows).
    render_mode = ("rgb_array" if mode == "next_step" and registry.renders(env_id)
                   and (env_id, kwargs) in FIRST_CASES else None)
    # The Driver's cases (CarRacing, live only: gymnasium draws its every step with pygame, ~6 ms)
    # drive two cars, the one that leaves the field and one that goes round the track.
    num_envs = DRIVEN_ENVS if isinstance(policy, Driver) else NUM_ENVS
    ref = Reference(env_id, kwargs, seed, mode, render_mode, num_envs)
    if isinstance(policy, Greedy | Driver):
        policy = policy.bound(ref.envs)
    elif isinstance(policy, Pilot):
        policy = Pilot()  # its step count starts at 0 in each case, whatever ran before
    live = ref if trace.live else None
    with aiopool.make(env_id, num_envs=num_envs, batch_size=num_envs, num_threads=2, seed=seed,
                      autoreset=mode, render_mode=render_mode, **kwargs) as pool:
        assert pool.single_observation_space == ref.envs[0].observation_space
        assert pool.single_action_space == ref.envs[0].action_space
        space = pool.single_action_space
        space.seed(seed)

        pool.async_reset()
        batch = await pool.recv()
        trace.rows(batch)
        if live is not None:
            _assert_rows(batch, live.reset(seed=seed), live.elapsed, "reset", info_keys)

        episodes = ends_seen = 0
        outcomes = set()  # the rewards of terminal steps
        if render_mode:
            _check_frame(pool, live, trace, "reset")
        for t in range(STEPS):
            sampled = np.stack([space.sample() for _ in range(num_envs)])
            actions = _some_infinite(policy(obs_by_env(batch), sampled), sampled)
            batch, expected = await step_in_mode(pool, live, actions, mode, trace.ended)
            episodes += trace.rows(batch)
            if live is not None:
                _assert_rows(batch, expected, live.elapsed, f"step {t}", info_keys)
            ended_with = np.asarray(batch.reward)[np.asarray(batch.terminated)]
            outcomes.update(float(r) for r in ended_with)
            if render_mode and t < FRAMES:
                ends_seen += bool(batch.terminated[batch.env_id == 0].any()
                                  or batch.truncated[batch.env_id == 0].any())
                _check_frame(pool, live, trace, f"step {t}")
        assert episodes >= num_envs, f"only {episodes} episodes ended; the test covers too little"
        wanted = set(OUTCOMES.get(env_id.split("-")[0].removesuffix("Continuous"), ()))
        wanted = set() if "max_episode_steps" in kwargs else wanted  # cut before they end
        wanted |= {1.5} if kwargs.get("natural") else set()
        assert wanted <= outcomes, f"{env_id}'s episodes ended only with {outcomes}"
        if render_mode:
            assert ends_seen, "env 0's frames crossed no episode end"
    trace.done()


def _check_frame(pool: aiopool.Pool, live: Reference | None, trace: Trace, where: str) -> None:
    """Env 0's frame: against gymnasium's ``render()`` in a live case, into the digests."""
    frame = pool.render([0])
    trace.frames(frame, [0])
    if live is not None:
        _assert_frame(frame[0], live.envs[0].render(), where)


@pytest.mark.slow  # a live reference (10 s): the exhaustive tier
def test_car_racing_finishes_its_lap_on_gymnasium_s_step() -> None:
    """A car driven round its whole track (``Driver``, no sampled steps) finishes the lap on the
    step gymnasium's does, every observation and reward equal on the way."""
    ref = gym.make("CarRacing-v3")
    obs, _ = ref.reset(seed=2025)
    with aiopool.make("CarRacing-v3", num_envs=1, seed=2025) as pool:
        pool.async_reset()
        batch = pool.recv_blocking()
        assert np.asarray(batch.obs[0]).tobytes() == obs.tobytes()
        for t in range(1000):
            action = Driver._drive(ref.unwrapped, away=False)
            obs, reward, terminated, truncated, info = ref.step(action)
            pool.send(action[None])
            batch = pool.recv_blocking()
            assert np.asarray(batch.obs[0]).tobytes() == obs.tobytes(), f"step {t}: obs"
            assert float(batch.reward[0]) == reward, f"step {t}: reward"
            assert bool(batch.terminated[0]) == terminated, f"step {t}: terminated"
            assert bool(batch.info["_lap_finished"][0]) == ("lap_finished" in info), f"step {t}"
            if terminated or truncated:
                break
        assert terminated and info["lap_finished"], f"step {t}: the lap was not finished"
        assert batch.info["lap_finished"][0] and batch.info["_lap_finished"][0]
    ref.close()


def _assert_frame(got: npt.NDArray[np.uint8], want: Any, where: str) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, f"{where}: frame {got.shape} != gymnasium {want.shape}"
    differ = int(np.any(got != want, axis=-1).sum())
    assert differ == 0, f"{where}: {differ} pixels differ from gymnasium's frame"


async def _follow(pool: aiopool.Pool, ref: Reference, seed: int | None, steps: int) -> None:
    """Reset the pool and ``ref`` (seeded ``seed + i``, or continuing), then step both."""
    pool.async_reset(seed=seed)
    batch = await pool.recv()
    _assert_rows(batch, ref.reset(seed=seed), ref.elapsed, f"reset(seed={seed})", ("prob",))
    space = pool.single_action_space
    space.seed(0 if seed is None else seed)
    for t in range(steps):
        actions = np.stack([space.sample() for _ in range(NUM_ENVS)])
        batch = await pool.step(actions)
        expected = ref.step(actions, list(range(NUM_ENVS)))
        _assert_rows(batch, expected, ref.elapsed, f"seed {seed}, step {t}", ("prob",))


@pytest.mark.asyncio
async def test_frozen_lake_random_maps_are_drawn_again_at_each_reseed() -> None:
    """desc=None, map_name=None: env i's map is generate_random_map(seed=s + i) for the seed s
    it was last given; an unseeded reset keeps the map, as gymnasium's env keeps its own."""
    kwargs: dict[str, Any] = {"desc": None, "map_name": None, "is_slippery": False}
    with aiopool.make("FrozenLake-v1", num_envs=NUM_ENVS, num_threads=2, seed=5,
                      **kwargs) as pool:
        ref = Reference("FrozenLake-v1", kwargs, 5, "next_step")
        await _follow(pool, ref, 5, 100)
        ref = Reference("FrozenLake-v1", kwargs, 40, "next_step")
        await _follow(pool, ref, 40, 100)
        await _follow(pool, ref, None, 100)  # same maps, the streams go on
        ref = Reference("FrozenLake-v1", kwargs, 5, "next_step")
        await _follow(pool, ref, 5, 100)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"map_name": "5x5"}, ValueError, r"map_name is '5x5', expected '4x4', '8x8' or None"),
    ({"map_name": 4}, TypeError, "expected a str or None"),
    ({"desc": ["SFF", "FG"]}, ValueError, "rows of equal, non-zero length"),
    ({"desc": ["FF", "FG"]}, ValueError, "no start tile 'S'"),
    ({"desc": "SFFG"}, TypeError, "expected None or rows of text"),
    ({"reward_schedule": (1, 0)}, TypeError, "expected 3 numbers"),
    ({"reward_schedule": (1, 0, "x")}, TypeError, "expected a tuple of numbers"),
])
def test_frozen_lake_kwargs_are_checked(kwargs: dict[str, Any], error: type[Exception],
                                        match: str) -> None:
    with pytest.raises(error, match=match):
        aiopool.make("FrozenLake-v1", **kwargs)


def test_frozen_lake_desc_takes_rows_as_gymnasium_does() -> None:
    """desc as str rows or as rows of characters (np.asarray(desc, dtype="c") takes both);
    the spec's config holds the rows, None where gymnasium has None."""
    rows = ["SFH", "FFG"]
    for desc in (rows, [list(r) for r in rows], np.asarray(rows, dtype="c")):
        with aiopool.make("FrozenLake-v1", desc=desc) as pool:
            assert pool.single_observation_space == gym.spaces.Discrete(6)
            assert pool.spec.config["desc"] == tuple(rows)
            assert pool.spec.config["map_name"] == "4x4"
    with aiopool.make("FrozenLake8x8-v1") as pool:
        assert pool.spec.config["desc"] is None and pool.spec.config["map_name"] == "8x8"
        assert pool.spec.config["reward_schedule"] == (1.0, 0.0, 0.0)
