"""MuJoCo v5: every row of a pool equals gymnasium 1.4's env, bit for bit.

Each case steps a pool of envs and, beside it, ``gymnasium.make(id, **kwargs)`` envs seeded
``seed + i`` (later resets unseeded, continuing each env's random stream, as gymnasium's vector
envs do), with the same float32 actions, and compares at every step, through several episodes:
observation, reward, terminated, truncated, and every info value gymnasium returns (value and
dtype). Both sides run the same libmujoco (mujoco 3.17.0). Where an observation includes all
of qpos and qvel (``exclude_current_positions_from_observation=False``, the pendulums), the
simulator state itself is compared too. With ``frames``, both sides also render
(``render_mode="rgb_array"`` and the same rendering kwargs) and every env's frame must equal
gymnasium's ``env.render()`` at every step, pixel for pixel (headless: EGL).
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from recorded import Trace

import aiopool
from aiopool._native.families import MUJOCO

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")]

ALL = sorted(MUJOCO.ids)

# Non-default values of (nearly) every constructor kwarg of each env.
KWARGS: dict[str, dict[str, Any]] = {
    "Ant-v5": {"frame_skip": 4, "forward_reward_weight": 1.5, "ctrl_cost_weight": 0.3,
               "contact_cost_weight": 1e-3, "healthy_reward": 0.5, "main_body": "torso",
               "healthy_z_range": (0.3, 0.95), "contact_force_range": (-0.5, 0.7),
               "reset_noise_scale": 0.2, "exclude_current_positions_from_observation": False,
               "include_cfrc_ext_in_observation": False},
    "HalfCheetah-v5": {"frame_skip": 4, "forward_reward_weight": 2.0, "ctrl_cost_weight": 0.05,
                       "reset_noise_scale": 0.3,
                       "exclude_current_positions_from_observation": False},
    "Hopper-v5": {"frame_skip": 3, "forward_reward_weight": 0.7, "ctrl_cost_weight": 0.01,
                  "healthy_reward": 0.5, "healthy_state_range": (-50.0, 50.0),
                  "healthy_z_range": (0.8, 2.0), "healthy_angle_range": (-0.3, 0.3),
                  "reset_noise_scale": 0.05, "exclude_current_positions_from_observation": False},
    "Walker2d-v5": {"frame_skip": 2, "forward_reward_weight": 0.7, "ctrl_cost_weight": 0.01,
                    "healthy_reward": 2.0, "terminate_when_unhealthy": True,
                    "healthy_z_range": (0.9, 1.8), "healthy_angle_range": (-0.5, 0.5),
                    "reset_noise_scale": 0.05,
                    "exclude_current_positions_from_observation": False},
    "Humanoid-v5": {"frame_skip": 4, "forward_reward_weight": 1.0, "ctrl_cost_weight": 0.2,
                    "contact_cost_weight": 1e-6, "contact_cost_range": (-1.0, 1e-3),
                    "healthy_reward": 3.0, "healthy_z_range": (0.9, 2.1),
                    "reset_noise_scale": 0.02, "exclude_current_positions_from_observation": False,
                    "include_cinert_in_observation": False, "include_cvel_in_observation": False,
                    "include_qfrc_actuator_in_observation": False,
                    "include_cfrc_ext_in_observation": False},
    "HumanoidStandup-v5": {"frame_skip": 4, "uph_cost_weight": 2.0, "ctrl_cost_weight": 0.2,
                           "impact_cost_weight": 1e-6, "impact_cost_range": (0.0, 1e-4),
                           "reset_noise_scale": 0.02,
                           "exclude_current_positions_from_observation": False,
                           "include_cinert_in_observation": False,
                           "include_cvel_in_observation": False,
                           "include_qfrc_actuator_in_observation": False,
                           "include_cfrc_ext_in_observation": False},
    "InvertedPendulum-v5": {"frame_skip": 3, "reset_noise_scale": 0.05},
    "InvertedDoublePendulum-v5": {"frame_skip": 4, "healthy_reward": 5.0,
                                  "reset_noise_scale": 0.3},
    "Reacher-v5": {"frame_skip": 3, "reward_dist_weight": 2.0, "reward_control_weight": 0.5},
    "Swimmer-v5": {"frame_skip": 3, "forward_reward_weight": 2.0, "ctrl_cost_weight": 1e-3,
                   "reset_noise_scale": 0.05, "exclude_current_positions_from_observation": False},
    "Pusher-v5": {"frame_skip": 4, "reward_near_weight": 1.0, "reward_dist_weight": 2.0,
                  "reward_control_weight": 0.2},
}
# Where the observation starts with all of qpos then all of qvel (given KWARGS); Hopper and
# Walker2d clip qvel to [-10, 10].
CLIPPED_QVEL = {"Hopper-v5", "Walker2d-v5"}
FULL_STATE = {"Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Humanoid-v5",
              "HumanoidStandup-v5", "Swimmer-v5", "InvertedPendulum-v5"}


class _OwnContext(gym.Wrapper[Any, Any, Any, Any]):
    """Renders with the env's own GL context current. gymnasium's viewer makes its context
    current only when it is made: with several envs on one thread, each would draw with its GL
    objects' names in the last one's context (and garbage collection of an earlier test's
    envs moves that context)."""

    def render(self) -> Any:
        viewer = self.env.unwrapped.mujoco_renderer.viewer
        if viewer is not None:
            viewer.make_context_current()
        return self.env.render()


class Reference:
    """gymnasium envs driven with the pool's next_step autoreset (gymnasium 1.x vector envs)."""

    def __init__(self, env_id: str, n: int, kwargs: dict[str, Any],
                 max_episode_steps: int | None, frame_stack: int = 0, seed: int = 0,
                 with_state: bool = False) -> None:
        """``frame_stack`` > 0: pixel observations, gymnasium's AddRenderObservation (and
        FrameStackObservation where > 1) over ``render_mode="rgb_array"``; ``with_state``: its
        ``render_only=False``, a Dict of the state and the frames. Each env renders
        once after its seeded reset before it is wrapped: its viewer's free camera is aimed
        there, at the env's first frame, as aiopool aims it (AddRenderObservation's own first
        frame follows an unseeded reset, which no seed reproduces)."""
        self.envs = [gym.make(env_id, max_episode_steps=max_episode_steps, **kwargs)
                     for _ in range(n)]
        if frame_stack:
            for i, env in enumerate(self.envs):
                env.reset(seed=seed + i)
                env.render()
            self.envs = [gym.wrappers.AddRenderObservation(_OwnContext(env),
                                                           render_only=not with_state)
                         for env in self.envs]
        if frame_stack > 1:
            self.envs = [gym.wrappers.FrameStackObservation(env, frame_stack)
                         for env in self.envs]
        self.ended = [False] * n

    def reset(self, seed: int) -> dict[int, Any]:
        rows = {}
        for i, env in enumerate(self.envs):
            obs, info = env.reset(seed=seed + i)
            rows[i] = (obs, 0.0, False, False, info, env)
            self.ended[i] = False
        return rows

    def step(self, actions: npt.NDArray[np.float32]) -> dict[int, Any]:
        rows = {}
        for i, env in enumerate(self.envs):
            if self.ended[i]:
                obs, info = env.reset()  # next_step: this step's action is ignored
                rows[i] = (obs, 0.0, False, False, info, env)
                self.ended[i] = False
                continue
            obs, reward, terminated, truncated, info = env.step(actions[i])
            rows[i] = (obs, reward, terminated, truncated, info, env)
            self.ended[i] = terminated or truncated
        return rows


def _bits(x: Any) -> bytes:
    return np.asarray(x).tobytes()


def _assert_obs(got: npt.NDArray[Any], obs: npt.NDArray[Any], at: str) -> None:
    assert got.dtype == obs.dtype and _bits(got) == _bits(obs), (
        f"{at}: obs differs at {np.flatnonzero(got != obs)[:20].tolist()}: "
        f"{got[got != obs][:20].tolist()} != gymnasium {obs[got != obs][:20].tolist()} "
        f"({int(np.sum(got != obs))} differ)")


def assert_rows(env_id: str, batch: aiopool.Batch, expected: dict[int, Any], where: str) -> int:
    """Compare a batch with gymnasium's rows; returns how many episodes ended."""
    ids = np.asarray(batch.env_id).tolist()
    assert sorted(ids) == sorted(expected), f"{where}: env ids {ids}"
    ended = 0
    for row, i in enumerate(ids):
        obs, reward, terminated, truncated, info, env = expected[i]
        at = f"{env_id} {where}, env {i}"
        if isinstance(obs, dict):  # obs_type="state+pixels"
            assert list(batch.obs) == ["state", "pixels"], f"{at}: obs keys {list(batch.obs)}"
            for key, want in obs.items():
                _assert_obs(np.asarray(batch.obs[key][row]), want, f"{at}, obs[{key!r}]")
            got = np.asarray(batch.obs["state"][row])
        else:
            got = np.asarray(batch.obs[row])
            _assert_obs(got, obs, at)
        if env_id in FULL_STATE and env.spec.kwargs.get(
                "exclude_current_positions_from_observation", True) is False:
            data = env.unwrapped.data
            qvel = np.clip(data.qvel, -10, 10) if env_id in CLIPPED_QVEL else data.qvel
            state = np.concatenate([data.qpos, qvel])
            assert _bits(got[:state.size]) == _bits(state), f"{at}: qpos/qvel"
        assert _bits(np.float64(batch.reward[row])) == _bits(np.float64(reward)), (
            f"{at}: reward {float(batch.reward[row])!r} != gymnasium {reward!r}")
        assert bool(batch.terminated[row]) == terminated, f"{at}: terminated"
        assert bool(batch.truncated[row]) == truncated, f"{at}: truncated"
        for key, value in info.items():
            want = np.asarray(value)
            have = np.asarray(batch.info[key][row])
            assert have.dtype == want.dtype, (
                f"{at}: info[{key!r}] dtype {have.dtype} != {want.dtype}")
            assert _bits(have) == _bits(want), f"{at}: info[{key!r}] {have!r} != gymnasium {want!r}"
        ended += terminated or truncated
    return ended


async def run_beside_gymnasium(env_id: str, *, num_envs: int, steps: int, seed: int,
                               kwargs: dict[str, Any], max_episode_steps: int | None,
                               actions: Any = None, frames: dict[str, Any] | None = None,
                               pixels: dict[str, Any] | None = None, frame_stack: int = 1,
                               obs_type: str = "pixels", trace: Trace | None = None) -> int:
    """Step a pool and gymnasium side by side; returns the number of episodes that ended.
    ``frames``: rendering kwargs; both sides render and every frame is compared. ``pixels``:
    rendering kwargs of pixel observations (``obs_type``: "pixels" or "state+pixels";
    ``frame_stack``), compared with gymnasium's AddRenderObservation and
    FrameStackObservation. ``trace``: the case's digests (tests/recorded.py); a recorded one
    steps the pool alone and compares its rows and frames with the recording."""
    if frames is not None:
        kwargs = {**kwargs, **frames, "render_mode": "rgb_array"}
    ours = kwargs
    if pixels is not None:
        ours = {**kwargs, **pixels, "obs_type": obs_type, "frame_stack": frame_stack}
        kwargs = {**kwargs, **pixels, "render_mode": "rgb_array"}
    ref = None
    if trace is not None:
        trace.env_id = env_id
    if trace is None or trace.live:
        ref = Reference(env_id, num_envs, kwargs, max_episode_steps,
                        frame_stack=frame_stack if pixels is not None else 0, seed=seed,
                        with_state=obs_type == "state+pixels")
    with aiopool.make(env_id, num_envs=num_envs, seed=seed, max_episode_steps=max_episode_steps,
                      **ours) as pool:
        if ref is not None:
            assert pool.single_observation_space == ref.envs[0].observation_space
            assert pool.single_action_space == ref.envs[0].action_space
        space = pool.single_action_space
        space.seed(seed)
        pool.async_reset()
        episodes = check_rows(env_id, await pool.recv(), ref.reset(seed) if ref else None,
                              "reset", trace)
        if frames is not None:
            assert_frames(env_id, pool, ref, "reset", trace)
        for t in range(steps):
            a = (np.stack([space.sample() for _ in range(num_envs)]) if actions is None
                 else actions(t, space))
            batch = await pool.step(a)
            episodes += check_rows(env_id, batch, ref.step(a) if ref else None, f"step {t}", trace)
            if frames is not None:
                assert_frames(env_id, pool, ref, f"step {t}", trace)
    if trace is not None:
        trace.done()
    return episodes


def check_rows(env_id: str, batch: aiopool.Batch, expected: dict[int, Any] | None, where: str,
               trace: Trace | None) -> int:
    """``assert_rows`` where gymnasium steps beside the pool (``expected``), and the rows'
    digests where the case is traced; returns how many episodes ended."""
    ended = assert_rows(env_id, batch, expected, where) if expected is not None else None
    if trace is not None:
        ended = trace.rows(batch)
    assert ended is not None
    return ended


def assert_frames(env_id: str, pool: aiopool.Pool, ref: Reference | None, where: str,
                  trace: Trace | None = None) -> None:
    frames = pool.render()
    if trace is not None:
        trace.frames(frames, range(len(frames)))
    for i, env in enumerate(ref.envs if ref is not None else ()):
        want = _OwnContext(env).render()
        assert frames[i].shape == want.shape, f"{env_id} {where}, env {i}: frame shape"
        differ = int(np.any(frames[i] != want, axis=-1).sum())
        assert differ == 0, f"{env_id} {where}, env {i}: {differ} pixels differ from gymnasium's"


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize("env_id", ALL)
async def test_frames_match_gymnasium(env_id: str) -> None:
    """82 frames of each env (2 envs x 41 steps) through 4 episode ends each, at each env's
    default camera: 902 in all, 1,070 with the next test's. (Drawing them costs 5-9 s an env
    on llvmpipe, the reference's a little more: the default tier's frames are the next
    test's.)"""
    episodes = await run_beside_gymnasium(env_id, num_envs=2, steps=40, seed=11, kwargs={},
                                          max_episode_steps=9, frames={"width": 64,
                                                                       "height": 48})
    assert episodes >= 2 * 4


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize("frames", [  # ~3 s each: two in the default tier
    {"width": 80, "height": 60, "camera_id": 0},
    pytest.param({"width": 80, "height": 60, "camera_name": "track"}, marks=pytest.mark.slow),
    {"width": 72, "height": 72, "default_camera_config": {"distance": 2.5, "elevation": -10.0,
                                                          "trackbodyid": 1}},
    pytest.param({"width": 64, "height": 64, "visual_options": {2: True}, "max_geom": 500},
                 marks=pytest.mark.slow),
], ids=["camera_id", "camera_name", "default_camera_config", "visual_options"])
async def test_frames_match_gymnasium_with_rendering_kwargs(frames: dict[str, Any],
                                                            trace: Trace) -> None:
    await run_beside_gymnasium("Hopper-v5", num_envs=2, steps=20, seed=5, kwargs={},
                               max_episode_steps=8, frames=frames, trace=trace)


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize(("env_id", "pixels", "frame_stack", "obs_type"), [
    ("HalfCheetah-v5", {"width": 84, "height": 84}, 1, "pixels"),
    pytest.param("Hopper-v5", {"width": 64, "height": 48}, 3, "pixels", marks=pytest.mark.slow),
    pytest.param("Swimmer-v5", {"width": 33, "height": 21}, 1, "state+pixels",
                 marks=pytest.mark.slow),
    ("Hopper-v5", {"width": 31, "height": 17}, 2, "state+pixels"),
    pytest.param("Ant-v5", {"width": 48, "height": 64, "camera_id": -1,
                            "visual_options": {2: True}}, 2, "pixels", marks=pytest.mark.slow),
    pytest.param("Walker2d-v5", {"width": 40, "height": 40,
                                 "default_camera_config": {"distance": 3.0}}, 4, "pixels",
                 marks=pytest.mark.slow),
    pytest.param("Humanoid-v5", {"width": 24, "height": 24}, 3, "state+pixels",
                 marks=pytest.mark.slow),
], ids=["HalfCheetah-84x84", "Hopper-stack3", "Swimmer-state+pixels",
        "Hopper-state+pixels-stack2", "Ant-options-stack2", "Walker2d-camera-stack4",
        "Humanoid-state+pixels-stack3"])
async def test_pixel_observations_match_gymnasium(env_id: str, pixels: dict[str, Any],
                                                  frame_stack: int, obs_type: str,
                                                  trace: Trace) -> None:
    """obs_type="pixels": each row's observation is gymnasium's AddRenderObservation frame
    (stacked by FrameStackObservation, padded with the reset frame), byte for byte, through
    episode ends; rewards and infos stay the state env's. "state+pixels" (odd frame sizes, so
    the byte row is padded): the Dict of AddRenderObservation(render_only=False), both parts
    stacked as FrameStackObservation stacks a Dict."""
    episodes = await run_beside_gymnasium(env_id, num_envs=2, steps=30, seed=3, kwargs={},
                                          max_episode_steps=7, pixels=pixels,
                                          frame_stack=frame_stack, obs_type=obs_type,
                                          trace=trace)
    assert episodes >= 2 * 3


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ALL)
async def test_default_kwargs_match_gymnasium(env_id: str, trace: Trace) -> None:
    # A short time limit so that every env truncates (and autoresets) several times.
    episodes = await run_beside_gymnasium(env_id, num_envs=3, steps=250, seed=7, kwargs={},
                                          max_episode_steps=60, trace=trace)
    assert episodes >= 3 * 4


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ALL)
async def test_non_default_kwargs_match_gymnasium(env_id: str, trace: Trace) -> None:
    episodes = await run_beside_gymnasium(env_id, num_envs=2, steps=200, seed=123,
                                          kwargs=KWARGS[env_id], max_episode_steps=80,
                                          trace=trace)
    assert episodes >= 2 * 2


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ALL)
async def test_long_rollouts_with_gymnasium_time_limits(env_id: str) -> None:
    episodes = await run_beside_gymnasium(env_id, num_envs=2, steps=2500, seed=2024, kwargs={},
                                          max_episode_steps=None)
    assert episodes >= 2


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ["Hopper-v5", "Humanoid-v5", "Reacher-v5"])
async def test_same_step_autoreset_keeps_the_final_row(env_id: str) -> None:
    """autoreset="same_step": a row that ends an episode holds the next episode's first obs, and
    final_obs / final_info hold gymnasium's last obs and info of the ended one."""
    envs = [gym.make(env_id, max_episode_steps=40) for _ in range(2)]
    finals = 0
    with aiopool.make(env_id, num_envs=2, seed=11, autoreset="same_step",
                      max_episode_steps=40) as pool:
        space = pool.single_action_space
        space.seed(11)
        pool.async_reset()
        await pool.recv()
        for i, env in enumerate(envs):
            env.reset(seed=11 + i)
        for _ in range(150):
            a = np.stack([space.sample() for _ in range(2)])
            batch = await pool.step(a)
            for row, i in enumerate(np.asarray(batch.env_id).tolist()):
                obs, _, terminated, truncated, info = envs[i].step(a[i])
                if not (terminated or truncated):
                    assert _bits(batch.obs[row]) == _bits(obs)
                    continue
                finals += 1
                final_info = batch.info["final_info"]
                assert _bits(batch.info["final_obs"][row]) == _bits(obs)
                for key, value in info.items():
                    assert _bits(final_info[key][row]) == _bits(np.asarray(value)), key
                obs, _ = envs[i].reset()
                assert _bits(batch.obs[row]) == _bits(obs)
    assert finals >= 4


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ALL)
async def test_seeds_mean_what_they_mean_in_gymnasium(env_id: str) -> None:
    """Env i of a pool seeded s starts where gymnasium's env reset with seed s + i starts, and
    async_reset(seed=) reseeds the same way."""
    with aiopool.make(env_id, num_envs=4, seed=41) as pool:
        for seed in (41, 9000):
            if seed != 41:
                pool.async_reset(seed=seed)
            else:
                pool.async_reset()
            batch = await pool.recv()
            for row, i in enumerate(np.asarray(batch.env_id).tolist()):
                env = gym.make(env_id)
                obs, _ = env.reset(seed=seed + i)
                assert _bits(batch.obs[row]) == _bits(obs), f"{env_id} seed {seed} + {i}"


@pytest.mark.asyncio
@pytest.mark.parametrize("env_id", ["Hopper-v5", "Humanoid-v5", "InvertedDoublePendulum-v5"])
async def test_bad_actions_reach_mujoco_as_in_gymnasium(env_id: str) -> None:
    """NaN, inf, huge and out-of-range actions go to MuJoCo unchanged on both sides and give the
    same rows; the pool goes on. ``mujoco_warning`` is set where MuJoCo warned (a NaN ctrl
    always warns; MuJoCo clamps inf and huge values of ctrl-limited actuators silently) and
    clear on ordinary steps."""
    bad = [np.nan, np.inf, -np.inf, 1e30, 5.0, -7.5]
    flags: dict[str, list[bool]] = {"nan": [], "ordinary": []}

    def actions(t: int, space: gym.spaces.Box) -> npt.NDArray[np.float32]:
        a = np.stack([space.sample() for _ in range(2)])
        if t % 7 == 3:
            a[0, t % a.shape[1]] = bad[(t // 7) % len(bad)]
        if t % 11 == 5:
            a[1] = space.high * 3
        return a

    ref = Reference(env_id, 2, {}, None)
    with aiopool.make(env_id, num_envs=2, seed=5) as pool:
        space = pool.single_action_space
        space.seed(5)
        pool.async_reset()
        assert_rows(env_id, await pool.recv(), ref.reset(5), "reset")
        for t in range(150):
            a = actions(t, space)
            was_reset = list(ref.ended)
            batch = await pool.step(a)
            assert_rows(env_id, batch, ref.step(a), f"step {t}")
            for row, i in enumerate(np.asarray(batch.env_id).tolist()):
                if was_reset[i]:
                    continue  # a reset row: the action was ignored
                warned = bool(batch.info["mujoco_warning"][row])
                if np.isnan(a[i]).any():
                    flags["nan"].append(warned)
                elif np.all(np.abs(a[i]) <= space.high):
                    flags["ordinary"].append(warned)
    assert flags["nan"] and all(flags["nan"]), flags["nan"]
    assert flags["ordinary"] and not any(flags["ordinary"])


@pytest.mark.asyncio
async def test_own_xml_file_and_main_body_as_in_gymnasium(tmp_path: Path) -> None:
    assets = Path(gym.__file__).parent / "envs" / "mujoco" / "assets"
    own = tmp_path / "my_ant.xml"
    shutil.copy(assets / "ant.xml", own)
    await run_beside_gymnasium("Ant-v5", num_envs=2, steps=60, seed=3,
                               kwargs={"xml_file": str(own), "main_body": 1},
                               max_episode_steps=None)


def test_bad_kwargs_are_rejected_with_the_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'gravity'.*valid: "
                                        r"xml_file, frame_skip, forward_reward_weight"):
        aiopool.make("Ant-v5", gravity=1.0)
    with pytest.raises(ValueError, match="'rgb_array'"):
        aiopool.make("Hopper-v5", render_mode="depth_array")
    with pytest.raises(TypeError, match=r"healthy_z_range.*\(low, high\) pair"):
        aiopool.make("Hopper-v5", healthy_z_range=0.7)
    with pytest.raises(TypeError, match="frame_skip.*an int"):
        aiopool.make("Hopper-v5", frame_skip=2.5)
    with pytest.raises(ValueError, match="frame_skip must be >= 1"):
        aiopool.make("Hopper-v5", frame_skip=0)
    with pytest.raises(OSError, match="does not exist"):
        aiopool.make("Hopper-v5", xml_file="no_such_model.xml")
    with pytest.raises(ValueError, match="no body named 'no_such_body'"):
        aiopool.make("Ant-v5", main_body="no_such_body")


def test_specs_match_gymnasium() -> None:
    for env_id in ALL:
        env = gym.make(env_id)
        with aiopool.make(env_id, num_envs=1) as pool:
            assert pool.single_observation_space == env.observation_space, env_id
            assert pool.single_action_space == env.action_space, env_id
            assert pool.spec.max_episode_steps == env.spec.max_episode_steps, env_id
            assert "mujoco_warning" in {f.name for f in pool.spec.info}


def test_wrong_mujoco_version_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from aiopool import registry

    monkeypatch.setattr(importlib.metadata, "version", lambda name: "3.17.1")
    assert MUJOCO.preload is not None
    with pytest.raises(ImportError, match=r"built against mujoco==3\.17\.0, found 3\.17\.1"):
        MUJOCO.preload()
    monkeypatch.setattr(registry, "_unavailable", {"_mujoco": "the reason"})
    monkeypatch.setattr(registry, "_loaded", {"_core": registry._core})
    with pytest.raises(ValueError, match="Ant-v5 is one of aiopool's MuJoCo envs, which are "
                                         "unavailable here: the reason"):
        aiopool.make("Ant-v5")


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
async def test_pixel_observations_in_same_step_mode_keep_the_final_frames() -> None:
    """same_step: the row that ends an episode holds the new episode's frames (the reset frame
    in every stack slot) and ``final_obs`` the ended one's; both equal what next_step gives
    (checked against gymnasium above) at that step and the next."""
    kwargs = {"obs_type": "pixels", "width": 32, "height": 24, "frame_stack": 2,
              "max_episode_steps": 4, "seed": 9}
    with aiopool.make("HalfCheetah-v5", autoreset="next_step", **kwargs) as nxt, \
            aiopool.make("HalfCheetah-v5", autoreset="same_step", **kwargs) as same:
        action = np.full((1, 6), 0.5, dtype=np.float32)
        nxt.async_reset()
        same.async_reset()
        first = (await nxt.recv()).obs.copy()
        assert (await same.recv()).obs.tobytes() == first.tobytes()
        assert first[0, 0].tobytes() == first[0, 1].tobytes()  # the reset frame, twice
        ends = 0
        for _ in range(9):
            a, b = await nxt.step(action), await same.step(action)
            if a.truncated[0]:
                ends += 1
                assert b.truncated[0]
                assert b.info["final_obs"][0].tobytes() == a.obs[0].tobytes()
                reset = await nxt.step(action)  # next_step: the reset row
                assert b.obs[0].tobytes() == reset.obs[0].tobytes()
                assert b.obs[0, 0].tobytes() == b.obs[0, 1].tobytes()
            else:
                assert b.obs.tobytes() == a.obs.tobytes()
        assert ends == 2
