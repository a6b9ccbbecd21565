"""MiniGrid: every row of a native pool equals minigrid 3.2.0's env, seed for seed and bit for bit.

Each case steps a pool of ``NUM_ENVS`` envs and, beside it, as many ``gymnasium.make(id)`` envs
of minigrid seeded ``seed + i`` (later resets unseeded, as gymnasium's vector envs do), with the
same actions (random, half of them ``forward`` so that episodes reach goals, lava and objects),
and compares the observation (direction, the 7x7x3 image, the mission string), the reward,
terminated and truncated at every step, through episode ends, in each autoreset mode.
``test_layouts_match_minigrid_seed_for_seed`` re-seeds every env many times and compares the
first observations: the layouts, the placements and the missions numpy's stream gives. In
``next_step`` mode env 0 renders (``render_mode="rgb_array"``: minigrid's tile renderer drawing
the native env's grid) at each of its first ``FRAMES`` steps, equal to minigrid's own frames.

The default tier checks the native rows against the recorded digests (tests/recorded.py) in
``next_step`` mode; the live comparison, the other modes and more seeds run with the slow
suites. ``python -m tests.record_references test_parity_minigrid`` records them.
"""

from __future__ import annotations

import operator
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from helpers import step_in_mode
from recorded import Trace

import aiopool
from aiopool import registry
from aiopool._native.families import MINIGRID
from aiopool.spec import TEXT_WIDTH

minigrid = pytest.importorskip("minigrid", reason="needs minigrid: pip install -e '.[test]'")
gym.register_envs(minigrid)

IDS = sorted(MINIGRID.ids)
NUM_ENVS = 3
STEPS = 300  # past every id's first max_steps but the largest (DoorKey-16x16: 2,560)
MODES = ["next_step", "same_step", "disabled"]
SEEDS = 50  # reseeds per env in the layout test
FRAMES = 40  # env 0's frames per id (next_step mode), through its first episode end or two

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date")


def _actions(rng: np.random.Generator, n: int, num_actions: int) -> npt.NDArray[np.int64]:
    """Half ``forward`` (2), the rest any action."""
    out: npt.NDArray[np.int64] = np.where(rng.random(n) < 0.5, 2,
                                          rng.integers(0, num_actions, n)).astype(np.int64)
    return out


class Reference:
    """minigrid's envs driven with the pool's autoreset semantics (gymnasium 1.x vector envs)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], num_envs: int, mode: str,
                 render_mode: str | None = None) -> None:
        self.envs = [gym.make(env_id, render_mode=render_mode, **kwargs)
                     for _ in range(num_envs)]
        self.mode = mode
        self.ended = np.zeros(num_envs, dtype=bool)
        self.elapsed = np.zeros(num_envs, dtype=np.int64)

    def reset(self, ids: list[int] | None = None, seed: int | None = None) -> dict[int, Any]:
        rows = {}
        for i in range(len(self.envs)) if ids is None else ids:
            obs, _ = self.envs[i].reset(seed=None if seed is None else seed + i)
            rows[i] = (obs, 0.0, False, False, None)
            self.ended[i] = False
        return rows

    def step(self, actions: npt.NDArray[Any], ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            if self.ended[i] and self.mode == "next_step":
                rows.update(self.reset([i]))
                continue
            obs, reward, terminated, truncated, _ = self.envs[i].step(actions[i])
            final = None
            if (terminated or truncated) and self.mode == "same_step":
                final = obs
                obs, _ = self.envs[i].reset()
            else:
                self.ended[i] = terminated or truncated
            rows[i] = (obs, float(reward), bool(terminated), bool(truncated), final)
        return rows


def _assert_obs(got: Any, row: int, want: dict[str, Any], at: str) -> None:
    assert int(got["direction"][row]) == int(want["direction"]), f"{at}: direction"
    image = np.asarray(got["image"][row])
    assert image.dtype == np.uint8 and image.tobytes() == want["image"].tobytes(), (
        f"{at}: image\n{image[..., 0].T}\n!= minigrid\n{want['image'][..., 0].T}")
    assert str(got["mission"][row]) == want["mission"], f"{at}: mission"


def _assert_rows(batch: aiopool.Batch, expected: dict[int, Any], where: str) -> int:
    ids = np.asarray(batch.env_id)
    assert sorted(ids.tolist()) == sorted(expected), f"{where}: env ids {ids}"
    ended = 0
    for row, i in enumerate(ids.tolist()):
        obs, reward, terminated, truncated, final = expected[i]
        at = f"{where}, env {i}"
        _assert_obs(batch.obs, row, obs, at)
        got_reward = float(batch.reward[row])
        assert np.float64(got_reward).tobytes() == np.float64(reward).tobytes(), (
            f"{at}: reward {got_reward!r} != minigrid {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        if final is not None:
            _assert_obs(batch.info["final_obs"], row, final, f"{at} (final_obs)")
        ended += terminated or truncated
    return ended


def _max_steps(env_id: str) -> int:
    """minigrid's max_steps for the id (MiniGridEnv.max_steps, fixed at construction)."""
    env = gym.make(env_id)
    steps = int(env.unwrapped.max_steps)  # type: ignore[attr-defined]
    env.close()
    return steps


def _kwargs(env_id: str) -> dict[str, Any]:
    """A shorter max_steps where the id's own is too long for the case's episodes to end."""
    return {"max_steps": STEPS // 3} if _max_steps(env_id) > STEPS // 2 else {}


def _cases() -> list[Any]:
    return [pytest.param(env_id, mode, id=f"{env_id}-{mode}",
                         marks=[pytest.mark.slow] if mode != "next_step" else [])
            for env_id in IDS for mode in MODES]


@pytest.mark.asyncio
@pytest.mark.parametrize(("env_id", "mode"), _cases())
async def test_matches_minigrid_step_by_step(env_id: str, mode: str, trace: Trace) -> None:
    seed = 2024
    trace.env_id = env_id
    kwargs = _kwargs(env_id)
    # Frames in next_step mode (the loop changes nothing a frame shows): minigrid's own tile
    # renderer draws them from the native env's grid; env 0's against the reference's.
    render_mode = "rgb_array" if mode == "next_step" else None
    live = Reference(env_id, kwargs, NUM_ENVS, mode, render_mode) if trace.live else None
    with aiopool.make(env_id, num_envs=NUM_ENVS, batch_size=NUM_ENVS, num_threads=2,
                      seed=seed, autoreset=mode, render_mode=render_mode, **kwargs) as pool:
        space = pool.single_action_space
        assert isinstance(space, gym.spaces.Discrete)
        pool.async_reset()
        batch = await pool.recv()
        trace.rows(batch)
        if live is not None:
            _assert_rows(batch, live.reset(seed=seed), "reset")
        rng = np.random.default_rng(seed)
        episodes = 0
        for t in range(STEPS):
            actions = _actions(rng, NUM_ENVS, int(space.n))
            batch, expected = await step_in_mode(pool, live, actions, mode, trace.ended)
            episodes += trace.rows(batch)
            if live is not None and expected is not None:
                _assert_rows(batch, expected, f"step {t}")
            if render_mode is not None and t < FRAMES:
                frame = pool.render([0])
                trace.frames(frame, [0])
                if live is not None:
                    want = live.envs[0].render()
                    assert np.array_equal(frame[0], want), f"step {t}: env 0's frame"
        assert episodes >= NUM_ENVS, f"only {episodes} episodes ended"
    trace.done()


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", IDS)
async def test_truncates_at_minigrid_s_max_steps(env_id: str) -> None:
    """Turning left forever (which ends no episode of any id) truncates at exactly minigrid's
    ``max_steps`` for the id, its registration default."""
    limit = _max_steps(env_id)
    with aiopool.make(env_id, num_envs=1, batch_size=1, num_threads=1, seed=3) as pool:
        pool.async_reset()
        await pool.recv()
        left = np.zeros(1, np.int64)
        for t in range(1, limit + 1):
            batch = await pool.step(left)
            assert not batch.terminated[0], f"step {t}: terminated"
            assert bool(batch.truncated[0]) == (t == limit), f"step {t} of {limit}: truncated"


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", IDS)
async def test_layouts_match_minigrid_seed_for_seed(env_id: str, trace: Trace) -> None:
    """``async_reset(seed=s)`` for ``SEEDS`` values of ``s``: the first observations (layout,
    placements, mission) equal minigrid's ``reset(seed=s + i)``."""
    trace.env_id = env_id
    envs = [gym.make(env_id) for _ in range(NUM_ENVS)] if trace.live else []
    with aiopool.make(env_id, num_envs=NUM_ENVS, batch_size=NUM_ENVS, num_threads=1) as pool:
        for k in range(SEEDS):
            seed = 1000 * k + k * k
            pool.async_reset(seed=seed)
            batch = await pool.recv()
            trace.rows(batch)
            for row, i in enumerate(batch.env_id.tolist()):
                if envs:
                    obs, _ = envs[i].reset(seed=seed + i)
                    _assert_obs(batch.obs, row, obs, f"seed {seed + i}")
    trace.done()


@pytest.mark.parametrize("env_id", IDS)
def test_spaces_and_registration_kwargs_are_minigrid_s(env_id: str) -> None:
    """The spaces equal minigrid's (the mission a ``Text`` of ``TEXT_WIDTH`` characters, held
    as ``<U512`` as the process backend holds minigrid's ``MissionSpace``), and the native
    defaults are the id's registration kwargs."""
    ref = gym.make(env_id)
    with aiopool.make(env_id, num_envs=1) as pool:
        space = pool.single_observation_space
        assert isinstance(space, gym.spaces.Dict)
        assert list(space.keys()) == ["direction", "image", "mission"]
        assert space["image"] == ref.observation_space["image"]
        assert space["direction"] == ref.observation_space["direction"]
        assert isinstance(space["mission"], gym.spaces.Text)
        assert space["mission"].max_length == TEXT_WIDTH
        assert pool.single_action_space == ref.action_space
    module = registry._module_for(env_id)
    keys, _ = module.env_config(env_id)
    defaults = {name: default for name, _, default in keys}
    for name, value in (gym.spec(env_id).kwargs or {}).items():
        native = defaults[name]
        if isinstance(value, tuple):
            native = tuple(int(x) for x in native)
        elif isinstance(value, bool | int) and not isinstance(native, str | None):
            native = type(value)(operator.index(int(native)))
        assert native == value, f"{env_id}: {name} is {native!r}, minigrid registers {value!r}"
    ref.close()


@pytest.mark.asyncio
async def test_kwargs_reach_the_env_as_minigrid_takes_them() -> None:
    """max_steps (an int, or None: the env's own formula), a start position of None and a
    string obstacle type, each against minigrid's env made with the same kwargs."""
    cases: list[tuple[str, dict[str, Any]]] = [
        ("MiniGrid-Empty-5x5-v0", {"max_steps": 7, "agent_start_pos": None}),
        ("MiniGrid-DoorKey-6x6-v0", {"max_steps": None}),
        ("MiniGrid-SimpleCrossingS9N2-v0", {"obstacle_type": "lava", "num_crossings": 4}),
        ("MiniGrid-FourRooms-v0", {"agent_pos": (3, 4), "goal_pos": (15, 15), "max_steps": 40}),
    ]
    for env_id, kwargs in cases:
        ref = Reference(env_id, kwargs, 2, "next_step")
        with aiopool.make(env_id, num_envs=2, batch_size=2, seed=9, **kwargs) as pool:
            pool.async_reset()
            batch = await pool.recv()
            _assert_rows(batch, ref.reset(seed=9), f"{env_id} {kwargs} reset")
            rng = np.random.default_rng(0)
            for t in range(60):
                actions = _actions(rng, 2, 7)
                batch = await pool.step(actions)
                _assert_rows(batch, ref.step(actions, [0, 1]), f"{env_id} {kwargs} step {t}")


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("env_id", ["MiniGrid-DoorKey-5x5-v0", "MiniGrid-Playground-v0",
                                    "MiniGrid-Dynamic-Obstacles-Random-5x5-v0"])
def test_make_gymnasium_gives_what_sync_vector_env_of_minigrid_gives(env_id: str,
                                                                      mode: str) -> None:
    """The gymnasium adapter over native envs against ``SyncVectorEnv`` of minigrid's, each
    autoreset mode: missions as tuples of ``str`` (Playground's empty one too), images,
    directions, rewards, ends and ``final_obs``; every observation in the adapter's space."""
    num_envs = 3
    ref = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * num_envs, autoreset_mode=mode)
    envs = aiopool.make_gymnasium(env_id, num_envs, autoreset_mode=mode, num_threads=2)
    try:
        space, ref_space = envs.single_observation_space, ref.single_observation_space
        assert isinstance(space, gym.spaces.Dict) and isinstance(ref_space, gym.spaces.Dict)
        for key in ("direction", "image"):
            assert space[key] == ref_space[key]
        got, _ = envs.reset(seed=11)
        want, _ = ref.reset(seed=11)
        rng = np.random.default_rng(1)
        n = int(envs.single_action_space.n)  # type: ignore[attr-defined]
        ends = 0
        for t in range(250):
            assert isinstance(got["mission"], tuple) and got["mission"] == want["mission"], t
            assert np.array_equal(got["image"], want["image"]), t
            assert np.array_equal(got["direction"], want["direction"]), t
            assert envs.observation_space.contains(got), t
            actions = _actions(rng, num_envs, n)
            got, reward, term, trunc, info = envs.step(actions)
            want, reward_ref, term_ref, trunc_ref, info_ref = ref.step(actions)
            assert np.array_equal(reward, reward_ref) and np.array_equal(term, term_ref), t
            assert np.array_equal(trunc, trunc_ref), t
            ends += int((term | trunc).sum())
            assert ("final_obs" in info) == ("final_obs" in info_ref), t
            for mine, theirs in zip(info.get("final_obs", ()), info_ref.get("final_obs", ()),
                                    strict=True):
                assert (mine is None) == (theirs is None), t
                if mine is not None:
                    assert mine["mission"] == theirs["mission"], t
                    assert np.array_equal(mine["image"], theirs["image"]), t
            if mode == "Disabled" and (term | trunc).any():
                mask = term | trunc
                got, _ = envs.reset(options={"reset_mask": mask})
                want, _ = ref.reset(options={"reset_mask": mask})
        assert ends >= num_envs
    finally:
        envs.close()
        ref.close()


@pytest.mark.parametrize(("env_id", "kwargs", "error", "match"), [
    ("MiniGrid-Empty-5x5-v0", {"agent_start_pos": 3}, TypeError,
     "'agent_start_pos' is 3, expected an \\(x, y\\) pair"),
    ("MiniGrid-DoorKey-5x5-v0", {"max_steps": 2.5}, TypeError,
     "'max_steps' is 2.5, expected an int or None"),
    ("MiniGrid-LavaCrossingS9N1-v0", {"obstacle_type": "mud"}, ValueError,
     "Unknown obstacle_type 'mud'"),
])
def test_bad_kwargs_say_what_was_expected(env_id: str, kwargs: dict[str, Any],
                                          error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        aiopool.make(env_id, **kwargs)
