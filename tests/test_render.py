"""Rendering: ``render_mode="rgb_array"`` pools, the adapters' ``render()`` and the video
recorders over them. Frame parity with the references is in the parity tests (classic control
and toy text: tests/test_parity_classic_control.py; Atari: tests/test_parity_atari.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aiopool

pytest.importorskip("pygame", reason="needs pygame-ce: pip install -e '.[test]'")


@pytest.mark.asyncio
@pytest.mark.parametrize("backend", ["threads", "processes"])
async def test_render_gives_read_only_frames_of_the_envs_asked_for(backend: str) -> None:
    """Native envs drawn by gymnasium's code from their state; the process backend's envs
    draw themselves in their worker processes."""
    with aiopool.make("CartPole-v1", num_envs=3, seed=5, render_mode="rgb_array",
                      backend=backend) as pool:
        assert pool.render_mode == "rgb_array" and pool.spec.renders
        pool.async_reset()
        await pool.recv()
        every = pool.render()
        assert every.shape == (3, 400, 600, 3) and every.dtype == np.uint8
        assert not every.flags.writeable
        some = pool.render([2, 0])
        assert np.array_equal(some, every[[2, 0]])
        refs = [gym.make("CartPole-v1", render_mode="rgb_array") for _ in range(3)]
        for i, ref in enumerate(refs):
            ref.reset(seed=5 + i)
            assert np.array_equal(every[i], ref.render())


@pytest.mark.asyncio
async def test_an_env_with_a_step_in_flight_or_never_reset_is_refused() -> None:
    with aiopool.make("Pong-v5", num_envs=2, batch_size=1, num_threads=1,
                      render_mode="rgb_array") as pool:
        with pytest.raises(ValueError, match="not been reset"):
            pool.render()
        pool.async_reset()
        batch = await pool.recv()
        busy = 1 - int(batch.env_id[0])
        with pytest.raises(ValueError, match="in flight"):
            pool.render([busy])
        assert pool.render([int(batch.env_id[0])]).shape == (1, 210, 160, 3)
        batch.send(np.zeros(1, np.int64))  # a render leaves the env free to step
        await pool.recv()
        await pool.recv()
        assert pool.render().shape == (2, 210, 160, 3)


def test_bad_render_modes_and_families_that_cannot_render_say_so() -> None:
    with aiopool.make("CartPole-v1") as pool:
        assert pool.render_mode is None
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            pool.render()
    with pytest.raises(ValueError, match="'rgb_array'"):
        aiopool.make("CartPole-v1", render_mode="human")
    with pytest.raises(ValueError, match="the factory's env has render_mode=None; make it with"):
        aiopool.make(lambda: gym.make("CartPole-v1"), render_mode="rgb_array")
    with pytest.raises(TypeError, match="rendering kwarg"):
        aiopool.make("Pong-v5", width=84)  # MuJoCo's, not Atari's
    with pytest.raises(ValueError, match=r"Counting-v0 does not render \(it has no reference"):
        aiopool.make("Counting-v0", render_mode="rgb_array")  # it has no reference to draw it
    with aiopool.make("Counting-v0") as pool:
        assert not pool.spec.renders and not aiopool.registry.renders("Counting-v0")
    with aiopool.make("LunarLander-v3") as pool:
        assert pool.spec.renders and pool.spec.config["particles"] is False
    with aiopool.make("LunarLander-v3", render_mode="rgb_array") as pool:
        assert pool.spec.config["particles"] is True  # the decoration gymnasium's env draws
    with pytest.raises(TypeError, match="particles is not a kwarg of gymnasium's env"):
        aiopool.make("LunarLander-v3", particles=True)


def test_mujoco_renders_gymnasiums_default_frame_size_and_takes_its_rendering_kwargs() -> None:
    with aiopool.make("HalfCheetah-v5", num_envs=1, render_mode="rgb_array") as pool:
        assert pool.spec.renders and pool.render_fps == 20.0
        pool.async_reset()
        pool.recv_blocking()
        assert pool.render().shape == (1, 480, 480, 3)  # gymnasium's DEFAULT_SIZE
    with aiopool.make("HalfCheetah-v5", width=32, height=24) as pool:  # taken, unused
        assert pool.render_mode is None
    with pytest.raises(ValueError, match="camera_id.*camera_name"):
        aiopool.make("HalfCheetah-v5", render_mode="rgb_array", camera_id=0,
                     camera_name="track")


@pytest.mark.parametrize(("env_id", "backend"), [
    ("CartPole-v1", None), ("FrozenLake-v1", None), ("Blackjack-v1", None),
    ("LunarLander-v3", None), ("CarRacing-v3", None), ("Hopper-v5", None),
    ("Ant-v4", "processes"), ("CartPole-v1", "processes")])
@pytest.mark.parametrize("render_mode", [None, "rgb_array"])
def test_gymnasium_adapter_metadata_has_the_reference_frame_rate(
        env_id: str, backend: str | None, render_mode: str | None) -> None:
    """``metadata["render_fps"]`` is gymnasium's (an int) with or without a render mode, as in
    gymnasium's env, which declares it on its class (it was 30.0 without one, and missing for
    the process backend's envs)."""
    from aiopool.adapters.gymnasium import make_gymnasium

    ref = gym.make_vec(env_id, num_envs=1, vectorization_mode="sync", render_mode=render_mode)
    with closing(ref), closing(make_gymnasium(env_id, num_envs=1, render_mode=render_mode,
                                              backend=backend)) as ours:
        fps = ours.metadata["render_fps"]
        assert fps == ref.metadata["render_fps"] and type(fps) is type(
            ref.metadata["render_fps"]) is int
        if backend is None or render_mode is not None:
            assert ours.metadata["render_modes"] == ["rgb_array"]


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_gymnasium_adapter_renders_as_sync_vector_env(backend: str) -> None:
    from aiopool.adapters.gymnasium import make_gymnasium

    ours = make_gymnasium("Acrobot-v1", num_envs=2, render_mode="rgb_array", backend=backend)
    ref = gym.make_vec("Acrobot-v1", num_envs=2, vectorization_mode="sync",
                       render_mode="rgb_array")
    try:
        assert ours.render_mode == ref.render_mode == "rgb_array"
        assert ours.metadata["render_fps"] == ref.metadata["render_fps"]
        ours.reset(seed=1)
        ref.reset(seed=1)
        for _ in range(40):
            actions = ref.action_space.sample()
            ours.step(actions)
            ref.step(actions)
            got, want = ours.render(), ref.render()
            assert isinstance(got, tuple) and len(got) == 2
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g, w)
        assert ours.get_attr("render_mode") == ("rgb_array", "rgb_array")
    finally:
        ours.close()
        ref.close()
    unrendered = make_gymnasium("CartPole-v1", num_envs=2)
    try:
        with pytest.warns(UserWarning, match="without specifying any render mode"):
            assert unrendered.render() == (None, None)
    finally:
        unrendered.close()


def _decoded(path: Path) -> Any:
    iio = pytest.importorskip("imageio.v3", reason="needs imageio: pip install -e '.[test]'")
    return iio.imread(path)


def test_gymnasiums_record_video_records_playable_mp4s(tmp_path: Path) -> None:
    pytest.importorskip("moviepy", reason="needs moviepy: pip install -e '.[test]'")
    from gymnasium.wrappers.vector import RecordVideo

    from aiopool.adapters.gymnasium import make_gymnasium

    envs = RecordVideo(make_gymnasium("Pong-v5", num_envs=2, render_mode="rgb_array"),
                       str(tmp_path / "videos"), step_trigger=lambda t: t == 0,
                       video_length=20)
    envs.reset(seed=3)
    first = np.concatenate(envs.env.render(), axis=1)  # RecordVideo tiles them side by side
    for _ in range(25):
        envs.step(envs.action_space.sample())
    envs.close()
    videos = sorted(tmp_path.glob("**/*.mp4"))
    assert len(videos) == 1
    frames = _decoded(videos[0])
    assert 20 <= frames.shape[0] <= 21 and frames.shape[1:3] == first.shape[:2]
    # mp4 is lossy: the first decoded frame is close to the first rendered one.
    assert np.abs(frames[0].astype(int) - first.astype(int)).mean() < 8


def test_sb3s_vec_video_recorder_records_the_tiled_frames(tmp_path: Path) -> None:
    pytest.importorskip("stable_baselines3", reason="needs stable-baselines3: pip install -e "
                        "'.[test]'")
    pytest.importorskip("moviepy", reason="needs moviepy: pip install -e '.[test]'")
    from stable_baselines3.common.vec_env import VecVideoRecorder

    from aiopool.adapters.sb3 import make_sb3

    venv = make_sb3("CartPole-v1", num_envs=4, render_mode="rgb_array")
    assert venv.render_mode == "rgb_array"
    venv.reset()
    images = venv.get_images()
    assert len(images) == 4 and images[0] is not None and images[0].shape == (400, 600, 3)
    tiled = venv.render()
    assert tiled is not None and tiled.shape == (800, 1200, 3)  # SB3 tiles 4 frames 2 x 2
    recorder = VecVideoRecorder(venv, str(tmp_path), record_video_trigger=lambda t: t == 0,
                                video_length=15)
    recorder.reset()
    for _ in range(20):
        recorder.step(np.array([recorder.action_space.sample() for _ in range(4)]))
    recorder.close()
    videos = sorted(tmp_path.glob("**/*.mp4"))
    assert len(videos) == 1
    frames = _decoded(videos[0])
    assert frames.shape[1:3] == (800, 1200) and 15 <= frames.shape[0] <= 16


def test_toy_text_frames_follow_gymnasiums_through_an_episode() -> None:
    async def run() -> None:
        with aiopool.make("Taxi-v4", num_envs=1, seed=9, render_mode="rgb_array") as pool:
            ref = gym.make("Taxi-v4", render_mode="rgb_array")
            ref.reset(seed=9)
            pool.async_reset()
            await pool.recv()
            assert np.array_equal(pool.render()[0], ref.render())
            for a in [1, 2, 0, 3, 4, 5, 0, 0]:
                await pool.step(np.array([a]))
                ref.step(a)
                assert np.array_equal(pool.render()[0], ref.render())

    asyncio.run(run())


@pytest.mark.asyncio
async def test_arender_draws_off_the_loop_and_equals_render() -> None:
    with aiopool.make("HalfCheetah-v5", num_envs=2, render_mode="rgb_array", width=96,
                      height=64) as pool:
        pool.async_reset()
        await pool.recv()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        frames = await pool.arender()
        task.cancel()
        assert frames.shape == (2, 64, 96, 3) and not frames.flags.writeable
        assert ticks > 1  # the loop ran other tasks while the frames were drawn
        assert np.array_equal(frames, pool.render())  # sync render: same thread, same frames
        assert np.array_equal((await pool.arender([1]))[0], frames[1])
    with pytest.raises(aiopool.PoolClosed):
        await pool.arender()


@pytest.mark.parametrize("env_id", ["CartPole-v1", "LunarLander-v3", "dmc/cartpole-balance"])
def test_a_rendering_pool_left_open_at_exit_closes_quietly(env_id: str) -> None:
    """The pool's atexit close runs after the interpreter has stopped its executors' threads
    taking work: it must not raise (the renderer's thread is not asked to close it then).
    dm_control frees its GL contexts at exit from the main thread, which fails while one is
    current on the render thread: the pool frees it there first."""
    code = (f"import aiopool\npool = aiopool.make({env_id!r}, num_envs=1, seed=0, "
            "render_mode='rgb_array')\npool.async_reset()\npool.recv_blocking()\n"
            "assert pool.render().shape[0] == 1\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "SDL_VIDEODRIVER": "dummy"})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_a_pool_that_draws_nothing_leaves_the_mujoco_python_package_unimported() -> None:
    """Importing mujoco's Python package slows MuJoCo's stepping in the whole process (~9 %
    on Ant-v5, docs/rendering.md): only pools that draw may import it."""
    code = ("import sys, aiopool\n"
            "aiopool.make('Ant-v5', num_envs=2).close()\n"
            "assert 'mujoco' not in sys.modules, 'a state-only pool imported mujoco'\n"
            "aiopool.make('Ant-v5', num_envs=1, obs_type='pixels', width=16, height=16).close()\n"
            "assert 'mujoco' in sys.modules\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.asyncio
async def test_mujoco_frames_drawn_by_gymnasium_equal_the_cpp_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With MUJOCO_GL=osmesa or glfw, MuJoCo pools render through gymnasium's own renderer
    (the env's mjData copied into a gymnasium env made without aiopool's own kwargs); here,
    on EGL, its frames equal the C++ ones of the same pool's kwargs."""
    from aiopool import registry

    kwargs = {"num_envs": 2, "seed": 4, "render_mode": "rgb_array", "width": 40, "height": 30,
              "default_camera_config": {"distance": 3.0, "elevation": -30.0}}
    frames = []
    for way in ("native", "python"):
        monkeypatch.setattr(registry, "_renders", lambda family, env_id, way=way: way)
        with aiopool.make("Hopper-v5", **kwargs) as pool:
            pool.async_reset()
            await pool.recv()
            frames.append(pool.render())  # each env's camera aimed here, at its first frame
            for _ in range(3):
                await pool.step(np.zeros((2, 3), dtype=np.float32))
            frames.append(pool.render())
        # aiopool's own kwargs stay out of gymnasium's env
        with aiopool.make("Hopper-v5", **kwargs, obs_type="pixels", frame_stack=2) as pool:
            pool.async_reset()
            assert (await pool.recv()).obs.shape == (2, 2, 30, 40, 3)
    assert frames[0].tobytes() == frames[2].tobytes()
    assert frames[1].tobytes() == frames[3].tobytes()


@pytest.mark.asyncio
async def test_control_suite_frames_drawn_by_dm_control_equal_the_cpp_ones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With MUJOCO_GL=osmesa or glfw, Control Suite pools render through dm_control's own
    physics.render (each env's model and data copied into one Physics); here, on EGL, its frames
    equal the C++ ones (offscreen.h's draw_dm_control), with a camera by name and a task that
    moves its targets in its model; pixel observations stay C++ either way."""
    from aiopool import registry

    kwargs = {"num_envs": 2, "seed": 4, "render_mode": "rgb_array", "width": 40, "height": 30,
              "camera_id": "cam0", "time_limit": 0.05}
    frames = []
    for way in ("native", "dm_control"):
        monkeypatch.setattr(registry, "_renders", lambda family, env_id, way=way: way)
        with aiopool.make("dmc/finger-turn_hard", **kwargs, obs_type="state+pixels") as pool:
            pool.async_reset()
            batch = await pool.recv()
            frames.append(pool.render())
            # the same frames, drawn by the workers and by the renderer
            assert np.array_equal(batch.obs["pixels"], frames[-1][batch.env_id]), way
            for _ in range(7):  # through an episode end (5 steps)
                await pool.step(np.zeros((2, 2)))
            frames.append(pool.render())
    assert frames[0].tobytes() == frames[2].tobytes()
    assert frames[1].tobytes() == frames[3].tobytes()


class _DrawsBadly(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose render() raises after its third step."""

    def __init__(self) -> None:
        super().__init__(gym.make("CartPole-v1", render_mode="rgb_array"))
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        return self.env.step(action)

    def render(self) -> Any:
        if self.steps > 3:
            raise RuntimeError("no more frames")
        return self.env.render()


@pytest.mark.asyncio
async def test_process_backend_envs_draw_themselves_in_their_workers() -> None:
    """Each env's own render() in its worker process, between its steps: gymnasium's frames
    with gymnasium's kwargs (MuJoCo's size), envs with a step in flight refused, an env's
    render() raising is an error naming it (the pool goes on), and a restarted worker draws
    again; a factory's env renders when it was made to."""
    kwargs = {"num_envs": 2, "seed": 2, "backend": "processes", "num_workers": 2,
              "render_mode": "rgb_array"}
    with aiopool.make("Hopper-v5", width=48, height=32, **kwargs) as pool:
        assert pool.render_fps == 125.0  # gymnasium's Hopper metadata
        with pytest.raises(ValueError, match="not been reset"):
            pool.render()
        pool.async_reset()
        await pool.recv()
        ref = gym.make("Hopper-v5", width=48, height=32, render_mode="rgb_array")
        ref.reset(seed=3)
        assert np.array_equal(pool.render([1])[0], ref.render())
        ref.close()
        pool.send(np.zeros((1, 3), np.float32), env_ids=[0])
        with pytest.raises(ValueError, match="env 0 still has an action in flight"):
            pool.render([0])
        assert pool.render([1]).shape == (1, 32, 48, 3)  # the other env is free
        pool.send(np.zeros((1, 3), np.float32), env_ids=[1])
        await pool.recv()
        assert pool.render().shape == (2, 32, 48, 3)
    with aiopool.make(_DrawsBadly, restart=True, **kwargs) as pool:
        pool.async_reset()
        await pool.recv()
        for _ in range(4):
            await pool.step(np.zeros(2, np.int64))
        with pytest.raises(RuntimeError, match="(?s)env 1's render.. raised.*no more frames"):
            pool.render([1])
        os.kill(pool.worker_pids()[1], 9)
        batch = await pool.step(np.zeros(2, np.int64))  # env 1 lost: restarted, reset
        while 1 not in batch.env_id.tolist():
            batch = await pool.recv()
        assert pool.restarts == [0, 1]
        assert pool.render([1]).shape == (1, 400, 600, 3)  # the new worker's env draws again


class _Slow(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose step takes 0.3 s, and whose render() hangs once it was told to (a file)."""

    def __init__(self, hang: str = "") -> None:
        super().__init__(gym.make("CartPole-v1", render_mode="rgb_array"))
        self.hang = hang

    def step(self, action: Any) -> Any:
        import time

        time.sleep(0.3)
        return self.env.step(action)

    def render(self) -> Any:
        import time

        while self.hang and os.path.exists(self.hang):
            time.sleep(0.01)
        return self.env.render()


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
async def test_process_backend_renders_after_worker_deaths_and_hangs(tmp_path: Path) -> None:
    """A restarted worker's envs draw once reset again (before: a clear error, not a frame of
    an un-reset env); a render() hung past step_timeout kills its worker like a hung step."""
    kwargs = {"num_envs": 2, "batch_size": 1, "seed": 0, "backend": "processes",
              "num_workers": 1, "render_mode": "rgb_array", "restart": True}
    with aiopool.make(_Slow, **kwargs) as pool:
        pool.async_reset()
        await pool.recv()
        await pool.recv()
        pool.send(np.zeros(1, np.int64), env_ids=[0])  # in flight for 0.3 s
        os.kill(pool.worker_pids()[0], 9)
        batch = await pool.recv()  # env 0's step was lost: its reset row, from the new worker
        assert batch.env_id.tolist() == [0] and pool.restarts == [1]
        with pytest.raises(ValueError, match="env 1 has not been reset since its worker process "
                                             "restarted"):
            pool.render([1])
        assert pool.render([0]).shape == (1, 400, 600, 3)
    hang = tmp_path / "hang"
    hang.touch()
    with aiopool.make(_Slow, **{**kwargs, "restart": False}, step_timeout=0.5,
                      hang=str(hang)) as pool:
        pool.async_reset()
        await pool.recv()
        await pool.recv()
        with pytest.raises(RuntimeError, match="worker process died while it drew"):
            await pool.arender([1])
        with pytest.raises(aiopool.WorkerDied, match="step_timeout"):
            pool.send(np.zeros(1, np.int64), env_ids=[0])
            await pool.recv()


@pytest.mark.parametrize("env_id", ["Hopper-v5", "dmc/cartpole-swingup"])
def test_a_frame_drawn_on_the_callers_thread_leaves_its_gl_context_as_it_was(env_id: str) -> None:
    """MuJoCo's and the Control Suite's frames are drawn in C++ on the calling thread, in the
    pool's own EGL context, which is current there only while it draws: afterwards the
    thread's context is the one it had (none, or the caller's own). Left current, it was
    drawn into by other GL code on the thread (dm_control imported without a GL backend of its
    own renders into whatever context is current), and the pool's later frames went wrong."""
    code = f"""
import ctypes, numpy as np, aiopool
from mujoco.egl import GLContext  # after aiopool's make: its MUJOCO_GL default is EGL too
egl = ctypes.CDLL("libEGL.so.1")
egl.eglGetCurrentContext.restype = ctypes.c_void_p
pool = aiopool.make({env_id!r}, num_envs=1, seed=0, render_mode="rgb_array")
pool.async_reset()
pool.recv_blocking()
assert egl.eglGetCurrentContext() is None
first = pool.render().copy()
assert egl.eglGetCurrentContext() is None, "the pool's context stayed current"
mine = GLContext(64, 64)
mine.make_current()
current = egl.eglGetCurrentContext()
assert current is not None
assert np.array_equal(pool.render(), first)
assert egl.eglGetCurrentContext() == current, "the caller's context was not put back"
mine.free()
pool.close()
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("env_id", ["Hopper-v5", "dmc/cheetah-run"])
def test_pools_drawn_one_after_another_on_one_thread_free_their_gl_resources(
        env_id: str) -> None:
    """A loop of evaluations, each a pool rendered on the main thread and closed: that
    thread's GL resources of each closed pool are freed at its next frame (they were kept for
    the thread's lifetime: 55-85 MB a pool in software GL, MuJoCo's shadow map)."""
    code = f"""
import aiopool
def rss_mb():
    status = open("/proc/self/status").read()
    return int(status.split("VmRSS:")[1].split()[0]) // 1024
def evaluate():
    with aiopool.make({env_id!r}, num_envs=1, seed=0, render_mode="rgb_array", width=64,
                      height=64) as pool:
        pool.async_reset()
        pool.recv_blocking()
        assert pool.render().shape == (1, 64, 64, 3)
evaluate()
evaluate()
before = rss_mb()
for _ in range(6):
    evaluate()
print(rss_mb() - before)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 200  # 6 pools kept: 330-510 MB (~15-110 MB: malloc)


def test_one_env_rendered_from_two_threads_at_once() -> None:
    """Rendering reads an env: two threads may ask for the same env's frame at once (it was
    refused as "an action in flight")."""
    import threading

    with aiopool.make("Hopper-v5", num_envs=1, seed=0, render_mode="rgb_array", width=64,
                      height=64) as pool:
        pool.async_reset()
        pool.recv_blocking()
        want = pool.render()
        frames: list[Any] = []
        errors: list[BaseException] = []

        def viewer() -> None:
            try:
                frames.extend(pool.render() for _ in range(10))
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=viewer) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(frames) == 20
        assert all(np.array_equal(f, want) for f in frames)
        pool.send(np.zeros((1, 3), np.float32))  # nothing is left claimed


@pytest.mark.asyncio
async def test_a_cancelled_arender_leaves_the_envs_sendable() -> None:
    """Cancelling waits for the frame being drawn and draws no more: then the envs take sends
    (a video task timed out, the training loop's next send raised ValueError)."""
    with aiopool.make("Hopper-v5", num_envs=4, batch_size=4, seed=0,
                      render_mode="rgb_array") as pool:
        pool.async_reset()
        batch = await pool.recv()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.arender(), timeout=0.001)
        batch.send(np.zeros((4, 3), np.float32))
        assert len(await pool.recv()) == 4


@pytest.mark.asyncio
async def test_a_cancelled_arender_that_has_not_started_returns_at_once() -> None:
    """An arender queued behind another is dropped from the queue when cancelled; it does
    not wait for the one ahead of it (nor draw its own frame after it)."""
    import time

    with aiopool.make("Hopper-v5", num_envs=8, batch_size=8, seed=0,
                      render_mode="rgb_array") as pool:
        pool.async_reset()
        await pool.recv()
        start = time.monotonic()
        ahead = asyncio.create_task(pool.arender())
        await asyncio.sleep(0.01)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.arender([0]), timeout=0.001)
        queued = time.monotonic() - start
        assert len(await ahead) == 8
        assert queued < (time.monotonic() - start) / 2, "it waited for the arender ahead"


def test_two_first_renders_at_once_make_one_render_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The render thread is made at the first render; two at once made two (each drawing with
    the same gymnasium env), and each rendering pool added an exit hook of its own."""
    import concurrent.futures
    import threading

    import aiopool.pool

    class Slow(concurrent.futures.ThreadPoolExecutor):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            import time
            time.sleep(0.05)  # widens the window between the check and the assignment
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(aiopool.pool.concurrent.futures, "ThreadPoolExecutor", Slow)
    hooks = len(threading._threading_atexits)  # type: ignore[attr-defined]
    for _ in range(3):
        with aiopool.make("CartPole-v1", num_envs=1, seed=0, render_mode="rgb_array") as pool:
            pool.async_reset()
            pool.recv_blocking()
            go = threading.Barrier(2)

            def first_render(pool: aiopool.Pool = pool, go: threading.Barrier = go) -> None:
                go.wait()
                pool.render()

            threads = [threading.Thread(target=first_render) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            drawing = [t for t in threading.enumerate()
                       if t.name.startswith("aiopool-render-CartPole")]
            assert len(drawing) == 1
    assert len(threading._threading_atexits) <= hooks + 1  # type: ignore[attr-defined]
