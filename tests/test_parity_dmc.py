"""The DeepMind Control Suite: every row of a pool equals dm_control 1.0.50's task, bit for bit.

Each case steps a pool of 4 envs and, beside it, 4 ``suite.load(domain, task, task_kwargs={
"random": seed + i, ...})`` environments with the same actions, and compares the observation
dict (every key, its order, dtype and bytes), the reward, and how the episode ends
(dm_control's LAST with discount 1 is the pool's truncation at the step limit; discount 0 its
termination) at every step, through episode ends and resets, in each autoreset mode:
``next_step`` as dm_control's own step after a LAST, ``same_step`` (the final observation in
``info["final_obs"]``) and ``disabled`` (the test resets ended envs). Short ``time_limit``s make
many episodes; a pumping policy (push along the velocity) makes the rewards nonzero (except
the sparse ones of ``UNREWARDED``, which need a trained policy). Seeds are dm_control's: env
``i`` draws from ``RandomState(seed + i)`` and a reset without a seed continues the stream, as
dm_control's task keeps its ``random``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from helpers import step_in_mode
from recorded import Trace, obs_by_env

import aiopool
from aiopool import registry
from aiopool._native.families import DMC

suite = pytest.importorskip("dm_control.suite", reason="needs dm-control: pip install -e '.[test]'")

NUM_ENVS = 4
MODES = ["next_step", "same_step", "disabled"]
DMC_IDS = sorted(i for i in aiopool.list_envs() if registry.family_of(i) is DMC)

# (id, kwargs of make and suite.load, steps): every id, with short time limits mostly; one
# default limit (1,000 steps), other n_sub_steps, and the task kwargs of three_poles.
# Sparse rewards that need a trained policy: a pole held within 6 degrees of upright, an
# acrobot's tip in its small target, the spinner turned backwards faster than 15 rad/s, the tip
# in the small target. Their code is that of rewarded cases (balance_sparse; acrobot-swingup
# without a margin; finger-turn_easy's distance and target), and their rewards are still
# compared at every step.
UNREWARDED = {"dmc/cartpole-swingup_sparse", "dmc/acrobot-swingup_sparse", "dmc/finger-spin",
              "dmc/finger-turn_hard"}
# The dog (85 dofs, 38 muscles) and quadruped-escape (20 rangefinders over a heightfield) step
# slowly in dm_control: 150 steps are two episodes of 67 (the dog), three of 50 (escape).
SLOW_STEPPING = ("dmc/dog-", "dmc/quadruped-escape")
CASES: list[tuple[str, dict[str, Any], int]] = [
    *((env_id, {"time_limit": 1.0}, 150 if env_id.startswith(SLOW_STEPPING) else 400)
      for env_id in DMC_IDS),
    ("dmc/pendulum-swingup", {}, 1100),
    ("dmc/cheetah-run", {"time_limit": 2.0, "n_sub_steps": 3}, 300),
    ("dmc/cartpole-three_poles", {"time_limit": 1.0, "num_poles": 4, "sparse": True}, 300),
    ("dmc/cartpole-swingup_sparse", {"time_limit": 5.0}, 700),
]

ENVIRONMENT_KWARGS = ("n_sub_steps", "flat_observation")


def _case_id(case: tuple[str, dict[str, Any], int]) -> str:
    return case[0].removeprefix("dmc/") + "".join(f"-{k}={v}" for k, v in case[1].items())


class Reference:
    """dm_control's environments, driven with the pool's autoreset semantics."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], seed: int, mode: str) -> None:
        domain, task = env_id.removeprefix("dmc/").split("-", 1)
        task_kwargs = {k: v for k, v in kwargs.items() if k not in ENVIRONMENT_KWARGS}
        env_kwargs = {k: v for k, v in kwargs.items() if k in ENVIRONMENT_KWARGS}
        self.envs = [suite.load(domain, task, task_kwargs={"random": seed + i, **task_kwargs},
                                environment_kwargs=env_kwargs) for i in range(NUM_ENVS)]
        self.mode = mode
        self.ended = np.zeros(NUM_ENVS, dtype=bool)

    def reset(self, ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            rows[i] = (self.envs[i].reset().observation, 0.0, False, False, None)
            self.ended[i] = False
        return rows

    def step(self, actions: npt.NDArray[np.float64], ids: list[int]) -> dict[int, Any]:
        rows = {}
        for i in ids:
            assert not (self.ended[i] and self.mode == "disabled"), "reset ended envs first"
            ts = self.envs[i].step(actions[i])
            if ts.first():  # dm_control's step after a LAST starts a new episode
                rows[i] = (ts.observation, 0.0, False, False, None)
                self.ended[i] = False
                continue
            terminated = ts.last() and ts.discount == 0.0
            truncated = ts.last() and not terminated
            final = None
            if ts.last() and self.mode == "same_step":
                final, obs = ts.observation, self.envs[i].reset().observation
            else:
                obs = ts.observation
                self.ended[i] = ts.last()
            rows[i] = (obs, float(ts.reward), terminated, truncated, final)
        return rows


def _same_obs(got: Any, want: collections.OrderedDict[str, Any], row: int, where: str) -> None:
    assert list(got) == list(want), f"{where}: keys {list(got)} != dm_control's {list(want)}"
    for key, value in want.items():
        mine = np.asarray(got[key][row])
        value = np.asarray(value)
        assert mine.dtype == value.dtype and mine.shape == value.shape, (
            f"{where}: {key} {mine.dtype}{mine.shape} != dm_control's {value.dtype}{value.shape}")
        assert mine.tobytes() == value.tobytes(), (
            f"{where}: {key} {mine.tolist()} != dm_control's {value.tolist()}")


def _assert_rows(batch: aiopool.Batch, expected: dict[int, Any], where: str) -> int:
    assert sorted(batch.env_id.tolist()) == sorted(expected), f"{where}: env ids {batch.env_id}"
    ended = 0
    for row, i in enumerate(batch.env_id.tolist()):
        obs, reward, terminated, truncated, final = expected[i]
        at = f"{where}, env {i}"
        _same_obs(batch.obs, obs, row, at)
        got = float(batch.reward[row])
        assert np.float64(got).tobytes() == np.float64(reward).tobytes(), (
            f"{at}: reward {got!r} != dm_control's {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        if final is not None:
            _same_obs(batch.info["final_obs"], final, row, f"{at} final_obs")
        ended += terminated or truncated
    return ended


def _pump(obs: dict[str, npt.NDArray[np.float64]], rng: np.random.Generator,
          nu: int) -> npt.NDArray[np.float64]:
    """Push along the last velocity (energy into swinging poles), with noise."""
    velocity = next(value for key, value in obs.items()
                    if "velocit" in key or key.endswith("_vel"))  # stacker's arm_vel
    push = np.sign(velocity[:, -1:]) * np.ones((1, nu))
    noise = rng.uniform(-1.0, 1.0, push.shape)
    return np.where(rng.random(push.shape) < 0.3, noise, push)


def _one_task_per_domain(excluding: tuple[str, ...] = ()) -> list[str]:
    """The first task of each domain, of those whose id does not start with ``excluding``."""
    tasks: dict[str, str] = {}
    for env_id in DMC_IDS:
        if not env_id.startswith(excluding):
            tasks.setdefault(env_id.removeprefix("dmc/").split("-")[0], env_id)
    return list(tasks.values())


# The tasks whose time-limited case runs in the other autoreset modes in the default tier, one
# of each kind: few and many observation parts (cartpole, walker), contacts (cheetah, finger),
# targets the task moves at reset (point_mass, manipulator). Every task runs them with the slow
# suites.
ALL_MODES_DEFAULT = {"dmc/cartpole-balance", "dmc/cheetah-run", "dmc/walker-run",
                     "dmc/point_mass-easy", "dmc/finger-spin", "dmc/manipulator-bring_ball"}


def _cases_in_modes() -> Iterator[Any]:
    """Every case in every autoreset mode. The other modes run the same arithmetic as next_step
    and the pool's own autoreset code, so they run on the asyncio loop only, and in the default
    run for the tasks of ``ALL_MODES_DEFAULT``; every task runs them with the slow suites."""
    default = [case for case in CASES[:len(DMC_IDS)]  # the time-limited case of each task
               if case[0] in ALL_MODES_DEFAULT]
    for mode in MODES:
        for case in CASES:
            marks = [] if mode == "next_step" else [pytest.mark.asyncio_loop_only]
            if mode != "next_step" and case not in default:
                marks.append(pytest.mark.slow)
            yield pytest.param(*case, mode, id=f"{_case_id(case)}-{mode}", marks=marks)


@pytest.mark.asyncio
@pytest.mark.parametrize(("env_id", "kwargs", "steps", "mode"), list(_cases_in_modes()))
async def test_matches_dm_control_step_by_step(env_id: str, kwargs: dict[str, Any], steps: int,
                                               mode: str, trace: Trace) -> None:
    await _follow_dm_control(env_id, kwargs, steps, mode, seed=2024, trace=trace)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only  # the arithmetic does not depend on the loop: 7 min saved
@pytest.mark.parametrize("env_id", DMC_IDS, ids=[i.removeprefix("dmc/") for i in DMC_IDS])
async def test_whole_episodes_match_dm_control(env_id: str) -> None:
    """Every task with its own time limit (1,000 steps), through the step limit and on into
    the next episode, from other seeds."""
    # lqr has no time limit of its own (its episodes end near the origin): 30 s is 1,000 of its
    # 0.03 s steps.
    kwargs = {"time_limit": 30.0} if env_id.startswith("dmc/lqr-") else {}
    for seed in (7, 100_003):
        await _follow_dm_control(env_id, kwargs, 1050, "next_step", seed=seed, rewarded=False)


async def _follow_dm_control(env_id: str, kwargs: dict[str, Any], steps: int, mode: str, *,
                             seed: int, rewarded: bool = True,
                             frames: dict[str, Any] | None = None,
                             trace: Trace | None = None) -> int:
    """Step a pool and dm_control side by side (``rewarded``: some step must be rewarded);
    returns the number of episodes that ended. ``frames``: physics.render's kwargs; both sides
    render at every step and every frame is compared. ``trace``: the case's digests
    (tests/recorded.py); a recorded one steps the pool alone against the recording."""
    ref = None
    if trace is not None:
        trace.env_id = env_id
    if trace is None or trace.live:
        ref = Reference(env_id, kwargs, seed, mode)
    render = {} if frames is None else {"render_mode": "rgb_array", **frames}
    with aiopool.make(env_id, num_envs=NUM_ENVS, num_threads=2, seed=seed, autoreset=mode,
                      **kwargs, **render) as pool:
        nu = pool.single_action_space.shape[0]
        if ref is not None:
            spec = ref.envs[0].action_spec()
            assert (spec.shape, spec.dtype) == (pool.single_action_space.shape,
                                                pool.single_action_space.dtype)
            assert spec.minimum.tolist() == pool.single_action_space.low.tolist()
            assert spec.maximum.tolist() == pool.single_action_space.high.tolist()
            limit = ref.envs[0]._step_limit
            assert pool.spec.max_episode_steps == (int(np.ceil(limit)) if np.isfinite(limit)
                                                   else 0)
        pool.async_reset()
        batch = await pool.recv()
        ended = _check_rows(batch, ref and ref.reset(list(range(NUM_ENVS))), "reset", trace)
        if frames is not None:
            _assert_frames(pool, ref, frames, "reset", trace)
        rng = np.random.default_rng(seed)
        with_reward = 0
        for t in range(steps):
            actions = _pump(obs_by_env(batch), rng, nu)
            batch, expected = await step_in_mode(pool, ref, actions, mode,
                                                 trace and trace.ended)
            ended += _check_rows(batch, expected, f"step {t}", trace)
            if frames is not None:
                _assert_frames(pool, ref, frames, f"step {t}", trace)
            with_reward += int(np.count_nonzero(batch.reward))
        assert ended >= NUM_ENVS, f"only {ended} episodes ended; the test covers too little"
        if rewarded and env_id not in UNREWARDED and not kwargs.get("sparse"):
            assert with_reward > 0, "no step was rewarded; the test covers too little of the reward"
    if trace is not None:
        trace.done()
    return ended


def _check_rows(batch: aiopool.Batch, expected: dict[int, Any] | None, where: str,
                trace: Trace | None) -> int:
    """``_assert_rows`` where dm_control steps beside the pool (``expected``), and the rows'
    digests where the case is traced; returns how many episodes ended."""
    ended = _assert_rows(batch, expected, where) if expected is not None else 0
    if trace is not None:
        ended = trace.rows(batch)
    return ended


def _assert_frames(pool: aiopool.Pool, ref: Reference | None, frames: dict[str, Any],
                   where: str, trace: Trace | None = None) -> None:
    got = pool.render()
    if trace is not None:
        trace.frames(got, range(len(got)))
    for i, env in enumerate(ref.envs if ref is not None else ()):
        want = env.physics.render(**frames)
        assert got[i].shape == want.shape, f"{where}, env {i}: frame {got[i].shape}"
        differ = int(np.any(got[i] != want, axis=-1).sum())
        assert differ == 0, f"{where}, env {i}: {differ} pixels differ from physics.render's"


# Frames through episode ends (a 0.2 s limit): targets the tasks move in their models (reacher,
# finger, manipulator), a fixed camera by index and by name, dm_control's free camera (-1).
# dm_control renders each frame with a 4096-pixel shadow map: 20-80 ms a frame on llvmpipe.
FRAME_CASES = [
    pytest.param("dmc/reacher-easy", {"width": 64, "height": 48, "camera_id": 0}, 20,
                 id="reacher"),
    pytest.param("dmc/finger-turn_hard", {"width": 48, "height": 48, "camera_id": "cam0"}, 20,
                 id="finger-camera_name"),
    pytest.param("dmc/point_mass-easy", {"width": 64, "height": 64}, 20, id="free_camera"),
    *(pytest.param(env_id, {"width": 48, "height": 40, "camera_id": 0}, 30,
                   id=env_id.removeprefix("dmc/"), marks=pytest.mark.slow)
      for env_id in _one_task_per_domain()),
]


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize(("env_id", "frames", "steps"), FRAME_CASES)
async def test_frames_match_dm_control_physics_render(env_id: str, frames: dict[str, Any],
                                                      steps: int, trace: Trace) -> None:
    """4 envs' frames at every step equal dm_control's ``physics.render`` with the same kwargs,
    pixel for pixel (headless: EGL), through episode ends: 252 frames, 2,608 with the slow
    cases (every domain)."""
    ended = await _follow_dm_control(env_id, {"time_limit": 0.2}, steps, "next_step", seed=3,
                                     rewarded=False, frames=frames, trace=trace)
    assert ended >= NUM_ENVS


class PixelReference(Reference):
    """dm_control's environments under its ``pixels.Wrapper`` (``pixels_only`` unless
    ``with_state``), each part stacked ``frame_stack`` deep as gymnasium's FrameStackObservation
    stacks a Dict (oldest first, the first observation repeated after a reset)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any], seed: int, mode: str,
                 render: dict[str, Any], with_state: bool, frame_stack: int) -> None:
        from dm_control.suite.wrappers import pixels

        super().__init__(env_id, kwargs, seed, mode)
        self.envs = [pixels.Wrapper(env, pixels_only=not with_state, render_kwargs=render)
                     for env in self.envs]
        self.k = frame_stack
        self.stacks: list[list[Any]] = [[] for _ in self.envs]

    def _stacked(self, i: int, obs: Any, fresh: bool) -> Any:
        if self.k == 1:
            return obs
        self.stacks[i] = [obs] * self.k if fresh else [*self.stacks[i][1:], obs]
        return collections.OrderedDict((key, np.stack([o[key] for o in self.stacks[i]]))
                                       for key in obs)

    def reset(self, ids: list[int]) -> dict[int, Any]:
        rows = super().reset(ids)
        return {i: (self._stacked(i, row[0], True), *row[1:]) for i, row in rows.items()}

    def step(self, actions: npt.NDArray[np.float64], ids: list[int]) -> dict[int, Any]:
        firsts = {i: self.envs[i]._env._reset_next_step for i in ids}  # dm_control resets now
        rows = super().step(actions, ids)
        out = {}
        for i, (obs, reward, terminated, truncated, final) in rows.items():
            if final is not None:  # same_step: the ended episode's stack, then a new one
                final = self._stacked(i, final, False)
                obs = self._stacked(i, obs, True)
            else:
                obs = self._stacked(i, obs, firsts[i])
            out[i] = (obs, reward, terminated, truncated, final)
        return out


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize(("env_id", "obs_type", "render", "frame_stack", "mode"), [
    ("dmc/cheetah-run", "pixels", {"width": 84, "height": 84, "camera_id": 0}, 1, "next_step"),
    ("dmc/reacher-easy", "pixels", {"width": 32, "height": 24}, 3, "same_step"),
    ("dmc/finger-turn_hard", "state+pixels", {"width": 30, "height": 22,
                                              "camera_id": "cam0"}, 2, "disabled"),
    pytest.param("dmc/quadruped-escape", "state+pixels", {"width": 40, "height": 40,
                                                          "camera_id": 2}, 1, "next_step",
                 marks=pytest.mark.slow),
    pytest.param("dmc/walker-walk", "pixels", {"width": 64, "height": 64}, 3, "same_step",
                 marks=pytest.mark.slow),
], ids=["cheetah-84x84", "reacher-stack3", "finger-state+pixels-stack2", "escape-state+pixels",
        "walker-stack3"])
async def test_pixel_observations_match_dm_control_pixels_wrapper(
        env_id: str, obs_type: str, render: dict[str, Any], frame_stack: int, mode: str,
        trace: Trace) -> None:
    """obs_type="pixels" / "state+pixels": each row's observation is dm_control's
    ``pixels.Wrapper`` observation (pixels_only True / False; the task's parts, then "pixels"),
    drawn by the worker threads, byte for byte through episode ends in every autoreset mode;
    frame_stack stacks each part."""
    kwargs = {"time_limit": 0.1}
    trace.env_id = env_id
    ref = None
    if trace.live:
        ref = PixelReference(env_id, kwargs, 5, mode, render, obs_type == "state+pixels",
                             frame_stack)
    with aiopool.make(env_id, num_envs=NUM_ENVS, num_threads=2, seed=5, autoreset=mode,
                      obs_type=obs_type, frame_stack=frame_stack, **render, **kwargs) as pool:
        space = pool.single_observation_space
        if ref is not None:  # a Dict sorts its keys
            assert sorted(space) == sorted(ref.envs[0].observation_spec())
        assert space["pixels"].shape == ((frame_stack,) if frame_stack > 1 else ()) + (
            render["height"], render["width"], 3)
        pool.async_reset()
        ended = _check_rows(await pool.recv(), ref and ref.reset(list(range(NUM_ENVS))),
                            "reset", trace)
        rng = np.random.default_rng(0)
        nu = pool.single_action_space.shape[0]
        for t in range(25):
            batch, expected = await step_in_mode(pool, ref, rng.uniform(-1, 1, (NUM_ENVS, nu)),
                                                 mode, trace.ended)
            ended += _check_rows(batch, expected, f"step {t}", trace)
        assert ended >= 2 * NUM_ENVS
    trace.done()


def test_rendering_kwargs_and_cameras_are_physics_render_s() -> None:
    with aiopool.make("dmc/cheetah-run", num_envs=1, render_mode="rgb_array",
                      camera_id="side") as pool:
        pool.async_reset()
        pool.recv_blocking()
        assert pool.render().shape == (1, 240, 320, 3)  # physics.render's default size
        assert pool.render_fps == 100.0  # cheetah's 0.01 s control step
    with pytest.raises(ValueError, match=r"camera_id='top' is not one of its cameras \['side', "
                                         r"'back'\]"):
        aiopool.make("dmc/cheetah-run", num_envs=1, render_mode="rgb_array", camera_id="top")
    with pytest.raises(ValueError, match="an index below 2"):
        aiopool.make("dmc/cheetah-run", num_envs=1, render_mode="rgb_array", camera_id=2)
    with pytest.raises(ValueError, match="width=0, expected a positive int"):
        aiopool.make("dmc/cheetah-run", num_envs=1, render_mode="rgb_array", width=0)
    with pytest.raises(TypeError, match="camera_name"):
        aiopool.make("dmc/cheetah-run", num_envs=1, render_mode="rgb_array", camera_name="side")


# suite.load of every task (8 s): the exhaustive tier; the recorded cases digest each
# observation part's name, dtype and shape.
@pytest.mark.slow
def test_ids_specs_and_kwargs_are_dm_control_s() -> None:
    """Every task of dm_control's suite has its id; specs and kwargs as suite.load's."""
    assert sorted(DMC_IDS) == sorted(f"dmc/{domain}-{task}" for domain, task in suite.ALL_TASKS)
    for env_id in DMC_IDS:
        domain, task = env_id.removeprefix("dmc/").split("-", 1)
        env = suite.load(domain, task, task_kwargs={"random": 0})
        with aiopool.make(env_id, num_envs=1) as pool:
            space = pool.single_observation_space
            assert sorted(space.keys()) == sorted(env.observation_spec())
            assert [k for k, _ in pool.spec.obs_parts] == list(env.observation_spec())
            for key, value in env.observation_spec().items():
                assert (space[key].shape, space[key].dtype) == (value.shape, value.dtype)
            assert "model_file" not in pool.spec.config
    with aiopool.make("dmc/cheetah-run", num_envs=2, flat_observation=True) as pool:
        assert pool.single_observation_space.shape == (17,)
        pool.async_reset()
        batch = pool.recv_blocking()
        assert isinstance(batch.obs, np.ndarray) and batch.obs.shape == (2, 17)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"model_file": "x.mjb"}, TypeError, "unexpected keyword argument 'model_file'"),
    ({"time_limit": 0.0}, ValueError, "time_limit is 0.0, expected seconds > 0"),
    ({"n_sub_steps": -1}, ValueError, "n_sub_steps is -1"),
    ({"num_poles": 2}, TypeError, "unexpected keyword argument 'num_poles'"),
    ({"render_width": 64}, TypeError, "unexpected keyword argument 'render_width'"),
    ({"obs_type": "rgb"}, ValueError, "obs_type is 'rgb', expected 'state', 'pixels' or"),
    ({"frame_stack": 2}, ValueError, "frame_stack stacks pixel observations"),
    ({"obs_type": "pixels", "width": 2000}, ValueError,
     "width=2000 > the model's offscreen framebuffer width 640"),
])
def test_bad_kwargs_are_clear_errors(kwargs: dict[str, Any], error: type[Exception],
                                     match: str) -> None:
    with pytest.raises(error, match=match):
        aiopool.make("dmc/cartpole-swingup", **kwargs)


@pytest.mark.parametrize(("shape", "factor"), [
    ((30, 30), 201 / 30.0),  # quadruped-escape's bumps onto its 201x201 heightfield
    ((7, 5), 2.3), ((4, 9), 0.5), ((12, 12), 1.37), ((2, 2), 4.0), ((1, 5), 3.0), ((3, 1), 2.0),
])
def test_spline_zoom_is_scipy_s(shape: tuple[int, int], factor: float) -> None:
    """scipy.ndimage.zoom's cubic spline (prefilter, mirrored edges, constant outside), bit for
    bit, on random inputs of several shapes and factors."""
    ndimage = pytest.importorskip("scipy.ndimage", reason="needs scipy: pip install -e '.[test]'")
    from aiopool._native import _dmc

    rng = np.random.default_rng(sum(shape))
    for _ in range(20):
        a = rng.uniform(0.15, 1.0, shape)
        (rows, cols), out = _dmc._spline_zoom(a, factor)
        want = ndimage.zoom(a, factor)
        assert (rows, cols) == want.shape
        assert np.array(out).reshape(rows, cols).tobytes() == want.tobytes()


def test_random_state_draws_are_numpy_s() -> None:
    """The tasks' RandomState: random_sample, the legacy Gaussian (which keeps its second
    value) and randint (masked rejection: 3 and 5 reject some draws), interleaved, equal
    numpy's RandomState's draws."""
    from aiopool._native import _dmc

    kinds = ["sample", "normal", "randint:4", "normal", "sample", "randint:3", "normal",
             "randint:5", "randint:1", "randint:2"] * 100

    def draw(ref: np.random.RandomState, kind: str) -> float:
        if kind.startswith("randint:"):
            return float(ref.randint(int(kind.removeprefix("randint:"))))
        return float(ref.random_sample() if kind == "sample" else ref.standard_normal())

    for seed in (0, 1, 2024, 2**32 - 1):
        ref = np.random.RandomState(seed)
        assert _dmc._random_state_draws(seed, kinds) == [draw(ref, k) for k in kinds], seed


@pytest.mark.parametrize("env_id", ["dmc/cheetah-run", "dmc/cartpole-three_poles",
                                    "dmc/lqr-lqr_2_1"])
def test_gymnasium_adapter_steps_as_dm_control(env_id: str) -> None:
    """``make_gymnasium``: Dict observations of dm_control's values (same_step: the ended
    episode's observation in ``final_obs``), terminations and truncations as dm_control ends
    its episodes, through several time limits. ``reset(seed=7)`` reseeds envs made with other
    seeds: lqr's springs, drawn from the seed, are then those of seed 7's model."""
    domain, task = env_id.removeprefix("dmc/").split("-", 1)
    refs = [suite.load(domain, task, task_kwargs={"random": 7 + i, "time_limit": 0.1})
            for i in range(2)]
    envs = aiopool.make_gymnasium(env_id, 2, time_limit=0.1, autoreset_mode="same_step")
    try:
        obs, _ = envs.reset(seed=7)
        for i, ref in enumerate(refs):
            _same_obs(obs, ref.reset().observation, i, "reset")
        rng = np.random.default_rng(0)
        ends = 0
        for t in range(35):
            actions = rng.uniform(-1, 1, envs.action_space.shape)
            obs, reward, terminated, truncated, info = envs.step(actions)
            for i, ref in enumerate(refs):
                ts = ref.step(actions[i])
                assert reward[i] == ts.reward and truncated[i] == ts.last(), f"step {t}"
                assert not terminated[i]
                if ts.last():
                    _same_obs({k: v[None] for k, v in info["final_obs"][i].items()},
                              ts.observation, 0, f"step {t} final_obs")
                    ts = ref.reset()
                    ends += 1
                _same_obs(obs, ts.observation, i, f"step {t}")
        assert ends >= 6
    finally:
        envs.close()


def test_a_physics_error_ends_the_episode_with_dm_control_s_message() -> None:
    """A NaN control: dm_control raises PhysicsError at that step; the pool ends the episode
    there (truncated, reward 0), says dm_control's message in env_error, and the next step
    starts a new episode. The other envs go on."""
    ref = suite.load("cheetah", "run", task_kwargs={"random": 0})
    ref.reset()
    with pytest.raises(Exception, match="Physics state is invalid") as raised:
        ref.step(np.full(6, np.nan))
    with aiopool.make("dmc/cheetah-run", num_envs=2, batch_size=2, seed=0) as pool:
        pool.async_reset()
        pool.recv_blocking()
        actions = np.zeros((2, 6))
        actions[1] = np.nan
        pool.send(actions)
        batch = pool.recv_blocking()
        row = int(np.flatnonzero(batch.env_id == 1)[0])
        assert batch.truncated[row] and batch.reward[row] == 0.0
        assert not batch.truncated[1 - row] and batch.reward[1 - row] > 0.0
        assert pool.env_error(1) == f"{type(raised.value).__name__}: {raised.value}"
        pool.send(np.zeros((2, 6)))
        batch = pool.recv_blocking()
        assert batch.info["elapsed_step"][batch.env_id == 1].tolist() == [0]
