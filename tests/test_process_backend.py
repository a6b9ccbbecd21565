"""The process backend beyond the shared contract tests: which backend an id gets, spaces,
faults (an env that raises, a worker killed or hung, the parent killed) and leaks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from helpers import CountingEnv

import aiopool


class Flaky(CountingEnv):
    """Counting, but raises on the step that takes the env's elapsed step to ``fail_at``."""

    def __init__(self, fail_at: int = 3, **kw: Any) -> None:
        super().__init__(**kw)
        self.fail_at = fail_at

    def step(self, action: int) -> Any:
        if self.elapsed + 1 == self.fail_at:
            raise RuntimeError(f"boom at step {self.fail_at}")
        return super().step(action)


class Wordy(Flaky):
    """Flaky with a 15 KB non-ASCII message on a chained exception."""

    def step(self, action: int) -> Any:
        try:
            return super().step(action)
        except RuntimeError as e:
            raise ValueError("ü" * 5000 + " the last words") from e


class Hangs(CountingEnv):
    def step(self, action: int) -> Any:
        if action == 99:
            time.sleep(3600)
        return super().step(action)


class MadeOnce(CountingEnv):
    """Counting, but no env can be made once ``marker`` exists (after 1.2 s: not a quick death)."""

    def __init__(self, marker: str, **kw: Any) -> None:
        if os.path.exists(marker):
            time.sleep(1.2)  # a message longer than a pipe's buffer, too
            raise RuntimeError("x" * 100_000 + " the env's licence server is gone")
        super().__init__(**kw)


class ForksAHelper(CountingEnv):
    """Counting, whose constructor forks a helper process that outlives it by seconds."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        if os.fork() == 0:
            time.sleep(5)
            os._exit(0)


class DictObs(gym.Env[dict[str, Any], np.ndarray]):
    """Dict observations and a MultiDiscrete action: obs echoes the action and the step."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "mode": gym.spaces.Discrete(3),
            "flags": gym.spaces.MultiBinary(4)})
        self.action_space = gym.spaces.MultiDiscrete([3, 5])
        self.t = 0

    def _obs(self, a: np.ndarray) -> dict[str, Any]:
        return {"pos": np.array([self.t, -self.t], np.float32) / 100, "mode": int(a[0]),
                "flags": np.array([a[1] & 1, a[1] >> 1 & 1, 1, 0], np.int8)}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(np.zeros(2, np.int64)), {}

    def step(self, action: np.ndarray) -> Any:
        self.t += 1
        return self._obs(action), float(action.sum()), False, self.t >= 5, {}


class EmptyField(DictObs):
    """DictObs with a field of no elements (a Box of shape (0,))."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gym.spaces.Dict({
            **self.observation_space.spaces, "none": gym.spaces.Box(0.0, 1.0, (0,))})

    def _obs(self, a: np.ndarray) -> dict[str, Any]:
        return {**super()._obs(a), "none": np.zeros(0, np.float32)}


def _children() -> set[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(os.getpid())], capture_output=True,
                         text=True, check=False).stdout
    return {int(p) for p in out.split()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped since the kill above
        return False


def _wait_gone(pids: list[int], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.02)
    return False


def test_make_says_which_backend_an_id_gets() -> None:
    for native_id in ("CartPole-v1", "FrozenLake-v1"):
        with aiopool.make(native_id, num_envs=2) as native:
            assert native.backend == "threads"
    with aiopool.make("Blackjack-v1", num_envs=2, num_workers=1, backend="processes") as python:
        assert python.backend == "processes" and python.num_workers == 1
        assert isinstance(python.single_observation_space, gym.spaces.Tuple)
    with aiopool.make("FrozenLake-v1", num_envs=2, num_workers=1, backend="processes") as python:
        assert python.backend == "processes"
        assert isinstance(python.single_observation_space, gym.spaces.Discrete)
    with aiopool.make(lambda: CountingEnv(episode_length=3), num_envs=2) as factory:
        assert factory.backend == "processes"
    with pytest.raises(ValueError, match="unknown env id 'FrozenLake-v9'"):
        aiopool.make("FrozenLake-v9")
    with pytest.raises(TypeError, match="apply to the process backend"):
        aiopool.make("CartPole-v1", restart=True)


@pytest.mark.asyncio
async def test_a_registered_gymnasium_env_steps_as_gymnasium_does() -> None:
    """Blackjack-v1 (Tuple observations), seed for seed against gymnasium's SyncVectorEnv
    (next_step autoreset), as ``async_reset`` + ``step`` on a pool."""
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("Blackjack-v1")] * 3)
    with aiopool.make("Blackjack-v1", num_envs=3, seed=7, num_workers=2,
                      backend="processes") as pool:
        want, _ = ref.reset(seed=7)
        pool.async_reset()
        got = [await pool.recv()]
        got_obs = [col[np.argsort(got[0].env_id)] for col in got[0].obs]
        assert isinstance(got[0].obs, tuple)
        assert all(np.array_equal(a, b) for a, b in zip(got_obs, want, strict=True))
        rng = np.random.default_rng(0)
        for _ in range(40):
            actions = rng.integers(0, 2, 3)
            batch = await pool.step(actions)
            obs, reward, term, trunc, _ = ref.step(actions)
            assert all(np.array_equal(a, b) for a, b in zip(batch.obs, obs, strict=True))
            assert np.array_equal(batch.reward, reward)
            assert np.array_equal(batch.terminated, term) and np.array_equal(batch.truncated,
                                                                              trunc)
    ref.close()


@pytest.mark.asyncio
async def test_infinite_actions_go_to_the_env_and_nan_is_refused_as_the_spec_says() -> None:
    """A Box env gets ±inf as gymnasium passes it (Pendulum clips it); NaN is refused, as
    ``spec.rejects_nan_actions`` says (a Ray pool trusts it to refuse what the actors would)."""
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")] * 2)
    with aiopool.make("Pendulum-v1", num_envs=2, seed=3, num_workers=2,
                      backend="processes") as pool:
        assert pool.spec.rejects_nan_actions
        ref.reset(seed=3)
        pool.async_reset()
        await pool.recv()
        with pytest.raises(ValueError, match=r"actions\[1\] contains nan.*must not be NaN"):
            pool.send(np.array([[0.5], [np.nan]], np.float32))
        for actions in (np.array([[np.inf], [-np.inf]], np.float32),
                        np.array([[-np.inf], [1.0]], np.float32)):
            batch = await pool.step(actions)
            obs, reward, *_ = ref.step(actions)
            assert np.array_equal(batch.obs, obs) and np.array_equal(batch.reward, reward)
    ref.close()


@pytest.mark.asyncio
async def test_dict_observations_and_multidiscrete_actions() -> None:
    with aiopool.make(DictObs, num_envs=4, batch_size=2, num_workers=2) as pool:
        assert pool.single_observation_space == DictObs().observation_space
        pool.async_reset()
        seen = 0
        async for batch in pool.stream():
            assert set(batch.obs) == {"pos", "mode", "flags"}
            assert batch.obs["pos"].dtype == np.float32 and batch.obs["pos"].shape == (2, 2)
            assert batch.obs["flags"].dtype == np.int8
            actions = np.stack([batch.env_id % 3, np.full(2, 3)], axis=1).astype(np.int64)
            if seen:  # rows after the first steps echo the actions sent
                assert np.array_equal(batch.obs["mode"][batch.info["elapsed_step"] > 0],
                                      (batch.env_id % 3)[batch.info["elapsed_step"] > 0])
            batch.send(actions)
            seen += 1
            if seen == 20:
                break
        idle = (await pool.recv()).env_id[:1]
        with pytest.raises(ValueError, match=r"actions\[0\]\[1\] is 5, expected 0 <= action < 5"):
            pool.send(np.array([[0, 5]]), idle)
        pool.send(np.array([[2, 4]]), idle)  # the pool is still usable


class Echo(gym.Env[Any, Any]):
    """Observes the action it was given (as float32), for any action space."""

    def __init__(self, space: gym.Space[Any]) -> None:
        self.action_space = space
        self.observation_space = gym.spaces.Box(-9, 9, (3,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return np.zeros(3, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.asarray(action, dtype=np.float32), 0.0, False, False, {}


@pytest.mark.parametrize("space", [gym.spaces.MultiBinary(3), gym.spaces.MultiDiscrete([3] * 3),
                                   gym.spaces.Box(0, 5, (3,), dtype=np.int64)],
                         ids=["MultiBinary", "MultiDiscrete", "int-Box"])
def test_integer_action_spaces_refuse_floats(space: gym.Space[Any]) -> None:
    """Fractional floats for an integer action space are refused (they were cut to ints: a
    sigmoid's 0.9 stepped as 0); whole-number floats are taken (SB3's MultiBinary policies
    give float32 0.0 / 1.0, which gymnasium's spaces take), MultiBinary takes bools."""
    with aiopool.make(functools.partial(Echo, space), num_envs=2, num_workers=1) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        with pytest.raises(ValueError, match=r"actions holds 0\.9, not a whole number"):
            pool.send(np.full((2, 3), 0.9))
        with pytest.raises(ValueError, match=r"actions holds nan, not a whole number"):
            pool.send(np.full((2, 3), np.nan))
        for beyond in (np.full((2, 3), 2.0**70), np.full((2, 3), 2**63, dtype=np.uint64)):
            with pytest.raises(ValueError, match=r"beyond int(8|64): out of"):  # would wrap
                pool.send(beyond)
        good = np.array([[True, False, True]] * 2) if isinstance(
            space, gym.spaces.MultiBinary) else np.array([[1, 0, 2]] * 2)
        for actions in (good, good.astype(np.float32)):
            pool.send(actions)
            assert np.array_equal(pool.recv_blocking(timeout=10).obs, good.astype(np.float32))


def _truncates_at_the_registered_limit(pool: aiopool.Pool, limit: int) -> None:
    """The pool's envs (2 Counting envs of long episodes) are cut at the registration's limit."""
    assert pool.spec.max_episode_steps == limit
    pool.async_reset()
    pool.recv_blocking(timeout=10)
    for step in range(1, limit + 1):
        pool.send(np.zeros(2, dtype=np.int64))
        assert pool.recv_blocking(timeout=10).truncated.all() == (step == limit)


def test_an_id_registered_in_this_process_runs_in_the_workers() -> None:
    """``gym.register`` in the caller's process (or ale-py's ``ALE/`` ids after
    ``gym.register_envs``): the workers, fresh interpreters, get the registration itself (they
    were given the id, unknown there: "Environment ParentOnly doesn't exist")."""
    gym.register("ParentOnly-v0", entry_point=CountingEnv, max_episode_steps=3,
                 kwargs={"episode_length": 100})
    try:
        with aiopool.make("ParentOnly-v0", num_envs=2, num_workers=1) as pool:
            _truncates_at_the_registered_limit(pool, 3)
    finally:
        gym.registry.pop("ParentOnly-v0")


def test_a_module_colon_id_registers_as_gymnasium_make_does(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``"module:Env-v0"``: gymnasium.make imports the module (which registers the id) first;
    so does the process backend, here and in its workers."""
    (tmp_path / "aiopool_test_colon_mod.py").write_text(textwrap.dedent("""
        import gymnasium as gym
        from helpers import CountingEnv

        gym.register("ColonEnv-v0", entry_point=CountingEnv, max_episode_steps=2,
                     kwargs={"episode_length": 100})
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(tmp_path), os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    try:
        with aiopool.make("aiopool_test_colon_mod:ColonEnv-v0", num_envs=2, num_workers=1,
                          backend="processes") as pool:
            _truncates_at_the_registered_limit(pool, 2)
    finally:
        gym.registry.pop("ColonEnv-v0", None)
        sys.modules.pop("aiopool_test_colon_mod", None)


@pytest.mark.asyncio
async def test_an_env_that_raises_reaches_the_consumer_and_the_pool_goes_on() -> None:
    with aiopool.make(Flaky, num_envs=2, batch_size=2, num_workers=2, fail_at=3,
                      episode_length=100) as pool:
        pool.async_reset()
        batch = await pool.recv()
        for _ in range(2):
            batch.send(np.ones(2, np.int64))
            batch = await pool.recv()
        batch.send(np.ones(2, np.int64))
        with pytest.raises(aiopool.EnvError, match="boom at step 3") as caught:
            await pool.recv()
        err = caught.value
        assert err.env_ids == [0, 1]
        assert "Traceback" in err.tracebacks[0] and "in step" in err.tracebacks[0]
        assert err.batch is not None and err.batch.info["env_error"].all()
        assert err.batch.truncated.all() and "boom" in pool.env_error(0)
        err.batch.send(np.ones(2, np.int64))  # the failed envs reset on their next send
        again = await pool.recv()
        assert (again.info["elapsed_step"] == 0).all() and not again.info["env_error"].any()
    with aiopool.make(Flaky, num_envs=1, on_env_error="truncate", fail_at=1) as pool:
        pool.async_reset()
        (await pool.recv()).send([0])
        row = await pool.recv()
        assert row.info["env_error"][0] and row.truncated[0] and "boom" in pool.env_error(0)
    with aiopool.make(Wordy, num_envs=1, on_env_error="truncate", fail_at=1) as pool:
        pool.async_reset()
        (await pool.recv()).send([0])
        await pool.recv()
        text = pool.env_error(0)  # too long to keep whole: its head and its end, cut cleanly
        assert len(text.encode()) <= 4096 and "\ufffd" not in text
        assert text.startswith("env 0 raised in worker process") and "[...]" in text
        assert text.endswith("the last words\n")


@pytest.mark.parametrize("adapter", ["gymnasium", "sb3", "dm"])
def test_an_adapter_steps_on_after_an_env_raised(adapter: str) -> None:
    """A sync adapter over a process pool whose env raised: the step raises the EnvError, and
    the next step (the failed envs resetting, as on the pool) or reset goes on. The adapters
    took the step as still pending: the next step refused, and the reset its own message
    advised waited for rows that had come with the error (NothingInFlight). A factory may be
    a lambda (make_gymnasium refused its name as a gymnasium id)."""
    factory = lambda: Flaky(fail_at=3)  # noqa: E731
    if adapter == "gymnasium":
        env: Any = aiopool.make_gymnasium(factory, 2, num_workers=1)
        env.reset(seed=0)
        step = functools.partial(env.step, np.ones(2, np.int64))
    elif adapter == "sb3":
        pytest.importorskip("stable_baselines3", reason="pip install -e '.[test]'")
        env = aiopool.make_sb3(factory, 2, num_workers=1)
        env.reset()
        step = functools.partial(env.step, np.ones(2, np.int64))
    else:
        env = aiopool.make_dm(factory, 2, num_workers=1)
        env.reset()
        step = functools.partial(env.step, np.ones(2, np.int64))
    try:
        step()
        step()
        with pytest.raises(aiopool.EnvError, match="boom at step 3"):
            step()
        step()  # the failed envs reset at their next step, then step on: their new
        step()  # episode fails at its third step again
        step()
        with pytest.raises(aiopool.EnvError, match="boom at step 3"):
            step()
        env.reset()
        step()
        step()
        with pytest.raises(aiopool.EnvError, match="boom at step 3"):
            step()
        env.reset()
    finally:
        env.close()


@pytest.mark.asyncio
async def test_the_readmes_loop_goes_on_through_env_errors() -> None:
    """README's pattern: EnvError ends the ``async for``; answer its batch, loop again."""
    rows = errors = 0
    with aiopool.make(Flaky, num_envs=4, batch_size=2, num_workers=2, fail_at=3,
                      episode_length=100) as pool:
        while rows < 200:
            try:
                async for batch in pool.stream():
                    rows += len(batch)
                    batch.send(np.ones(len(batch), np.int64))
                    if rows >= 200:
                        break
            except aiopool.EnvError as err:
                errors += 1
                assert err.batch is not None and err.batch.info["env_error"].any()
                err.batch.send(np.ones(len(err.batch), np.int64))
    assert errors >= 4  # each env fails at its 3rd step of every episode, and the loop goes on


@pytest.mark.asyncio
async def test_a_killed_worker_is_reported_naming_the_lost_envs() -> None:
    with aiopool.make(CountingEnv, num_envs=4, batch_size=2, num_workers=2,
                      step_ns=20_000_000) as pool:
        pool.async_reset()
        for _ in range(2):
            (await pool.recv()).send(np.zeros(2, np.int64))
        victim = pool.worker_pids()[1]  # holds envs 2 and 3
        os.kill(victim, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(aiopool.WorkerDied, match=r"killed by SIGKILL.*envs \[") as caught:
            while True:
                (await pool.recv(timeout=5)).send(np.zeros(2, np.int64))
        assert time.monotonic() - start < 1.0
        assert set(caught.value.lost) <= {2, 3} and caught.value.env_ids == [2, 3]
        assert "make the pool with restart=True" in str(caught.value)  # it was not
        with pytest.raises(ValueError, match="lost with its worker process"):
            pool.send(np.zeros(1, np.int64), [2])
        assert _wait_gone([victim], 1.0)


@pytest.mark.asyncio
async def test_too_few_envs_left_to_fill_a_batch_is_said_so() -> None:
    """After a death without restart, NothingInFlight names the lost envs instead of asking
    for sends that the lost envs would refuse."""
    with aiopool.make(CountingEnv, num_envs=2, batch_size=2, num_workers=2,
                      step_ns=20_000_000) as pool:
        pool.async_reset()
        (await pool.recv()).send(np.zeros(2, np.int64))
        os.kill(pool.worker_pids()[1], signal.SIGKILL)  # env 1
        with pytest.raises(aiopool.WorkerDied):
            await pool.recv(timeout=5)
        with pytest.raises(aiopool.NothingInFlight) as caught:
            await pool.recv(timeout=5)
        assert "1 of the 2 envs were lost with their worker processes" in str(caught.value)
        assert "the 1 left cannot fill a batch" in str(caught.value)
        assert "send actions" not in str(caught.value)


@pytest.mark.asyncio
async def test_restart_replaces_a_dead_worker_and_the_stream_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="aiopool")
    with aiopool.make(CountingEnv, num_envs=4, batch_size=2, num_workers=2, restart=True,
                      step_ns=5_000_000) as pool:
        pool.async_reset()
        resets_after_kill: set[int] = set()
        killed_at = None
        rows = 0
        async for batch in pool.stream():
            rows += len(batch)
            if killed_at is None and rows >= 20:
                os.kill(pool.worker_pids()[0], signal.SIGKILL)  # envs 0 and 1
                killed_at = time.monotonic()
            elif killed_at is not None:
                fresh = batch.env_id[batch.obs[:, 0] == 1]  # event 1: a new env's first reset
                resets_after_kill.update(fresh.tolist())
                if resets_after_kill >= {0, 1}:
                    break
                assert time.monotonic() - killed_at < 5.0
            batch.send(np.zeros(len(batch), np.int64))
        assert len(pool.worker_pids()) == 2
        assert pool.restarts == [1, 0]
    warned = [r.getMessage() for r in caplog.records if r.name == "aiopool"]
    assert len(warned) == 1 and "worker 0: killed by SIGKILL" in warned[0], warned
    assert "restarted with fresh envs (1 restarts)" in warned[0]


@pytest.mark.slow  # 7 s of restarts: the exhaustive tier
@pytest.mark.asyncio
async def test_a_worker_that_cannot_make_its_envs_again_is_not_restarted_forever(
        tmp_path: Any) -> None:
    marker = tmp_path / "gone"
    factory = functools.partial(MadeOnce, marker=str(marker), step_ns=2_000_000)
    with aiopool.make(factory, num_envs=2, batch_size=1, num_workers=2, restart=True) as pool:
        pool.async_reset()
        await asyncio.sleep(1.1)  # not a death within 1 s of starting: the next 3 count
        marker.touch()
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        deadline = time.monotonic() + 60
        with pytest.raises(aiopool.WorkerDied) as info:
            while time.monotonic() < deadline:  # env 1 goes on while env 0's cannot start
                batch = await pool.recv(timeout=20)
                batch.send(np.zeros(1, np.int64))
        assert info.value.env_ids == [0]
        assert "before it had made its envs" in str(info.value)
        assert "licence server is gone" in str(info.value)
        assert "not restarted again" in str(info.value)
        assert "make the pool with restart=True" not in str(info.value)  # it was
        assert pool.restarts == [3, 0]


def test_a_helper_the_factory_forks_does_not_delay_the_pools_start() -> None:
    start = time.monotonic()
    with aiopool.make(ForksAHelper, num_envs=1, num_workers=1) as pool:
        assert time.monotonic() - start < 4.0  # the helper holds the ready pipe for 5 s
        pool.async_reset()
        assert len(pool.recv_blocking(timeout=10)) == 1


def test_ctrl_c_in_the_terminal_does_not_kill_the_workers() -> None:
    with aiopool.make(CountingEnv, num_envs=2, batch_size=2, num_workers=2) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        for pid in pool.worker_pids():  # what a terminal's Ctrl-C sends the process group
            os.kill(pid, signal.SIGINT)
        time.sleep(0.2)
        pool.send(np.zeros(2, np.int64))
        assert len(pool.recv_blocking(timeout=10)) == 2


@pytest.mark.parametrize("waiter", ["recv_blocking", "flush"])
def test_close_from_another_thread_wakes_a_sync_waiter(waiter: str) -> None:
    slow = functools.partial(CountingEnv, step_ns=3_000_000_000)  # longer than close waits
    with aiopool.make(slow, num_envs=2, batch_size=2, num_workers=1) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        pool.send(np.zeros(2, np.int64))  # 3 s steps: recv and flush both wait
        closer = threading.Timer(0.3, pool.close)
        closer.start()
        start = time.monotonic()
        with pytest.raises(aiopool.PoolClosed):
            getattr(pool, waiter)(timeout=20)
        assert time.monotonic() - start < 2.5
        closer.join()


@pytest.mark.asyncio
async def test_a_hung_env_is_caught_by_step_timeout() -> None:
    with aiopool.make(Hangs, num_envs=2, batch_size=1, num_workers=2, step_timeout=0.3) as pool:
        pool.async_reset()
        for _ in range(2):
            await pool.recv()
        pool.send(np.array([99, 0]), [0, 1])
        got = [await pool.recv(timeout=5)]
        start = time.monotonic()
        with pytest.raises(aiopool.WorkerDied, match="step_timeout=0.3"):
            await pool.recv(timeout=5)
        assert time.monotonic() - start < 2.0 and got[0].env_id[0] == 1


@pytest.mark.asyncio
async def test_a_field_of_no_elements_goes_through() -> None:
    with aiopool.make(EmptyField, num_envs=4, batch_size=4, num_workers=2) as pool:
        pool.async_reset()
        for t in range(3):
            batch = await pool.recv(timeout=10)
            assert batch.obs["none"].shape == (4, 0) and batch.obs["none"].dtype == np.float32
            assert np.array_equal(batch.obs["pos"][:, 0], np.full(4, t / 100, np.float32))
            batch.send(np.zeros((4, 2), np.int64))


@pytest.mark.asyncio
async def test_a_refused_seeded_reset_leaves_a_queued_step_a_step() -> None:
    """Env 1's step waits behind env 0's 200 ms step in the one worker's queue: a seeded
    reset of env 1 is refused, and must not turn that queued step into a reset."""
    slow = functools.partial(CountingEnv, step_ns=200_000_000)
    with aiopool.make(slow, num_envs=2, batch_size=1, num_workers=1) as pool:
        pool.async_reset()
        [await pool.recv(timeout=10) for _ in range(2)]
        pool.send([0], [0])
        pool.send([0], [1])
        with pytest.raises(ValueError, match="env 1 still has an action in flight"):
            pool.async_reset(seed=7, env_ids=[1])
        rows = [await pool.recv(timeout=10) for _ in range(2)]
        assert [int(b.env_id[0]) for b in rows] == [0, 1]
        assert [int(b.info["elapsed_step"][0]) for b in rows] == [1, 1]  # stepped, not reset


def _memfd_mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum("/memfd:aiopool-" in line for line in f)


def test_close_leaves_no_process_and_no_shared_memory() -> None:
    shm_before = set(os.listdir("/dev/shm"))
    before = _children()
    pool = aiopool.make(CountingEnv, num_envs=4, batch_size=2, num_workers=2)
    pids = pool.worker_pids()
    assert set(pids) <= _children() - before
    maps = _memfd_mappings()
    assert maps >= 1  # the pool's blocks
    pool.close()
    assert _wait_gone(pids, 2.0)
    assert set(os.listdir("/dev/shm")) == shm_before
    assert _memfd_mappings() == maps - 1  # unmapped at close, not when the pool is collected


def _kill_once_it_printed_its_workers(code: str) -> list[int]:
    """Runs ``code``, which prints its pool's two worker pids, and SIGKILLs it once it has."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(p) for p in pids)
    proc.kill()
    proc.wait()
    return pids


def test_a_killed_parent_leaves_no_worker_behind() -> None:
    code = textwrap.dedent("""
        import sys, time
        sys.path.insert(0, %r)
        import aiopool
        from helpers import CountingEnv
        pool = aiopool.make(CountingEnv, num_envs=4, batch_size=2, num_workers=2)
        pool.async_reset()
        print(*pool.worker_pids(), flush=True)
        time.sleep(60)
    """) % os.path.dirname(__file__)
    shm_before = set(os.listdir("/dev/shm"))
    pids = _kill_once_it_printed_its_workers(code)
    assert _wait_gone(pids, 5.0)
    assert set(os.listdir("/dev/shm")) == shm_before


@pytest.mark.parametrize("hang", ["sleeps", "spins", "holds the GIL"])
def test_a_killed_parent_leaves_no_worker_behind_even_one_stuck_in_an_env_call(
        hang: str) -> None:
    """The worker's loop sees its parent gone only between env calls; a native thread sees it
    at once. (Stuck workers outlived the killed parent, at 100 % of a core when spinning:
    the pool's step_timeout watchdog died with it.)"""
    code = textwrap.dedent("""
        import ctypes, sys, time
        import numpy as np
        sys.path.insert(0, %r)
        import aiopool
        from helpers import CountingEnv

        class Stuck(CountingEnv):
            def step(self, action):
                if %r == "sleeps":
                    time.sleep(3600)
                elif %r == "spins":
                    while True:
                        pass
                ctypes.PyDLL(None).sleep(3600)  # libc's sleep, the GIL held

        pool = aiopool.make(Stuck, num_envs=2, batch_size=1, num_workers=2)
        pool.async_reset()
        pool.recv_blocking(), pool.recv_blocking()
        pool.send(np.zeros(2, np.int64))
        time.sleep(0.5)  # both workers inside step
        print(*pool.worker_pids(), flush=True)
        time.sleep(60)
    """) % (os.path.dirname(__file__), hang, hang)
    pids = _kill_once_it_printed_its_workers(code)
    try:
        assert _wait_gone(pids, 5.0)
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.asyncio
async def test_the_adapters_run_on_the_process_backend() -> None:
    envs = aiopool.make_gymnasium("Blackjack-v1", num_envs=2, seed=1, backend="processes")
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("Blackjack-v1")] * 2)
    try:
        assert envs.single_observation_space == ref.single_observation_space
        obs, _ = envs.reset(seed=1)
        want, _ = ref.reset(seed=1)
        assert all(np.array_equal(a, b) for a, b in zip(obs, want, strict=True))
        for t in range(10):
            a = np.array([t % 2, 1])
            got = envs.step(a)
            exp = ref.step(a)
            assert all(np.array_equal(x, y) for x, y in zip(got[0], exp[0], strict=True))
            assert np.array_equal(got[1], exp[1]) and np.array_equal(got[2], exp[2])
    finally:
        envs.close()
        ref.close()


def test_make_gymnasium_takes_an_env_factory() -> None:
    envs = aiopool.make_gymnasium(lambda: gym.make("CartPole-v1"), num_envs=2, seed=3)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2)
    try:
        assert envs.spec is not None and envs.spec.id == "CartPole-v1"
        assert np.array_equal(envs.reset(seed=3)[0], ref.reset(seed=3)[0])
        for _ in range(30):
            got, exp = envs.step(np.array([1, 0])), ref.step(np.array([1, 0]))
            assert np.array_equal(got[0], exp[0]) and np.array_equal(got[2], exp[2])
    finally:
        envs.close()
        ref.close()


@pytest.mark.slow  # benchmarks: the exhaustive tier
def test_the_python_envs_benchmark_runs(tmp_path: Any) -> None:
    proc = subprocess.run([sys.executable, "benchmarks/python_envs.py", "--quick", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(os.path.dirname(__file__)), check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    rates = json.loads((tmp_path / "python_envs_quick.json").read_text())["rates"]
    assert rates["CartPole-v1"]["aiopool processes stream()"][0] > 0
    assert rates["CartPole-v1"]["single-process loop"][0] > 0


@pytest.mark.slow  # ~40 s: fresh pools, each started and stopped
@pytest.mark.asyncio
async def test_whole_batch_waits_never_miss_their_wake_up() -> None:
    # The pool sleeps until the rows its batch lacks are committed (a shared `need` count that
    # workers and the pool both subtract from: layout.py). A race there left the pool asleep
    # with its batch's last row committed in 1 of ~12 fresh 2-env, 2-worker pools; this runs
    # 60 of them through resets and lockstep steps, each bounded in time.
    factory = functools.partial(CountingEnv, episode_length=3)
    for attempt in range(60):
        with aiopool.make(factory, num_envs=2, batch_size=2, num_workers=2,
                          info_keys=CountingEnv.INFO) as pool:
            async def run(pool: aiopool.Pool = pool) -> None:
                pool.async_reset()
                await pool.recv()
                for t in range(20):
                    await pool.step(np.full(2, t + 1))
            try:
                await asyncio.wait_for(run(), 20)
            except TimeoutError:
                pytest.fail(f"pool {attempt} slept through its batch")


def test_the_pool_sides_native_bookkeeping() -> None:
    """The one-call helpers of the pool side (claim, clear, bounds, gather) on their edges: a
    refused claim changes no flag, whatever made it refuse."""
    from aiopool._native import _core

    flags = np.zeros(6, dtype=np.uint8)
    ids = np.array([0, 1, 2], dtype=np.int32)
    assert _core._claim(flags, ids, 0xFF, 1, 3) == 0  # envs 0..2: worker 0 holds them all
    assert flags.tolist() == [1, 1, 1, 0, 0, 0]
    assert _core._claim(flags, np.array([4, 3, 4], dtype=np.int32), 0xFF, 1, 3) == -1  # twice
    assert _core._claim(flags, np.array([3, 6], dtype=np.int32), 0xFF, 1, 3) == -1  # range
    assert _core._claim(flags, np.array([5, -1], dtype=np.int32), 0xFF, 1, 3) == -1
    assert _core._claim(flags, np.array([3, 2], dtype=np.int32), 0xFF, 1, 3) == -1  # 2 busy
    assert flags.tolist() == [1, 1, 1, 0, 0, 0]
    flags[5] = 2  # a flag that refuses a send but not a reset (refuse = busy | lost)
    assert _core._claim(flags, np.array([5], dtype=np.int32), 1 | 8, 1, 3) == 1
    assert _core._claim(flags, np.array([3], dtype=np.int32), 0xFF, 1, 3) == 1
    flags[:] = 0
    assert _core._claim(flags, np.array([2, 3], dtype=np.int32), 0xFF, 1, 3) == -2  # 2 workers
    _core._clear_flags(flags, np.array([3], dtype=np.int32), 1)
    assert flags.tolist() == [0, 0, 1, 0, 0, 0]
    with pytest.raises(TypeError):
        _core._claim(flags, np.array([0, 1], dtype=np.int64), 0xFF, 1, 3)

    low, high = np.array([0, 1], dtype=np.int64), np.array([2, 4], dtype=np.int64)
    assert _core._first_out_of_bounds(np.array([[2, 1], [0, 4]]), low, high) == -1
    assert _core._first_out_of_bounds(np.array([[2, 1], [0, 5]], np.int8), low, high) == 3
    assert _core._first_out_of_bounds(np.array([[2, 0], [0, 5]], np.int32), low, high) == 1
    assert _core._first_out_of_bounds(np.array([[3, 1]], np.uint64), low, high) == -3  # numpy's

    columns = (np.arange(12, dtype=">f4").reshape(6, 2), np.arange(6, dtype=np.int32))
    obs, ints = _core._take_rows(columns, np.array([4, 0], dtype=np.int32))
    assert obs.dtype == np.dtype(">f4") and obs.tolist() == [[8.0, 9.0], [0.0, 1.0]]
    assert ints.tolist() == [4, 0] and not obs.flags.writeable and not ints.flags.writeable
    with pytest.raises(IndexError):
        _core._take_rows(columns, np.array([6], dtype=np.int32))
    empty = np.lib.stride_tricks.as_strided(np.zeros(1, np.float64), (6, 0), (4096, 8))
    (rows,) = _core._take_rows((np.ascontiguousarray(empty),), np.array([5, 0], np.int32))
    assert rows.shape == (2, 0)  # zero-size rows copy nothing, whatever their stride
    with pytest.raises(IndexError):
        _core._take_rows((np.ascontiguousarray(empty),), np.array([6], dtype=np.int32))
    with pytest.raises(TypeError, match="Python objects"):
        _core._take_rows((np.array([None, 1], dtype=object),), np.array([0], np.int32))


def _first_draw(seed: int) -> float:
    """The draw of a CountingEnv's first reset with ``seed``."""
    return float(CountingEnv().reset(seed=seed)[1]["draw"])


def _await_file(path: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear within {within} s"
        time.sleep(0.005)


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
@pytest.mark.asyncio
async def test_a_seeded_reset_lost_before_its_commit_is_redone_with_its_seed(
        autoreset: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: the workers run the seeded resets, write their rows and are held before
    the commit (the worker's test hook); worker 1 is killed there. Its replacement redoes
    envs 2 and 3's resets with their seeds: every env's first draw is its seed's."""
    monkeypatch.setenv("AIOPOOL_TEST_HOLD_COMMIT", str(tmp_path))
    with aiopool.make(CountingEnv, num_envs=4, batch_size=1, num_workers=2, restart=True,
                      autoreset=autoreset, info_keys=CountingEnv.INFO) as pool:
        pool.async_reset()
        [await pool.recv(timeout=10) for _ in range(4)]
        (tmp_path / "hold").touch()
        pool.async_reset(seed=100)
        victim = pool.worker_pids()[1]  # envs 2 and 3
        _await_file(tmp_path / f"held-{victim}", 10)
        os.kill(victim, signal.SIGKILL)
        assert _wait_gone([victim], 5)
        (tmp_path / "hold").unlink()  # worker 0 commits; the replacement holds nothing
        rows = [await pool.recv(timeout=20) for _ in range(4)]
        draws = {int(b.env_id[0]): float(b.info["draw"][0]) for b in rows}
        assert draws == {i: _first_draw(100 + i) for i in range(4)}
        fresh = {int(b.env_id[0]) for b in rows if b.obs[0, 0] == 1}  # a new env's first event
        assert fresh == {2, 3} and pool.restarts == [0, 1]
        # The seed was used once: an unseeded reset continues each env's stream.
        pool.async_reset()
        again = {int(b.env_id[0]): float(b.info["draw"][0])
                 for b in [await pool.recv(timeout=10) for _ in range(4)]}
        for i in range(4):
            env = CountingEnv()
            env.reset(seed=100 + i)
            assert again[i] == env.reset()[1]["draw"], i


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    assert _wait_gone([pid], 5)


@pytest.mark.parametrize("restart", [True, False], ids=["restart", "no restart"])
def test_flush_after_a_worker_died_idle_hands_out_the_rows_written(restart: bool) -> None:
    """Issue 30, 3: envs 0 and 2 stepped (rows written), worker 1 (envs 2, 3) then killed
    while idle. flush() handles the death (a replacement, or WorkerDied naming no lost env)
    and publishes the 2 rows; it returned 0 and left them stuck."""
    with aiopool.make(CountingEnv, num_envs=4, batch_size=4, num_workers=2, restart=restart,
                      info_keys=CountingEnv.INFO) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        pool.send(np.zeros(2, np.int64), [0, 2])
        time.sleep(0.2)  # both rows written
        _kill(pool.worker_pids()[1])
        time.sleep(0.1)  # the watcher has seen it: a flush that ignored it returned 0
        if not restart:
            with pytest.raises(aiopool.WorkerDied) as caught:
                pool.flush(timeout=10)
            assert caught.value.env_ids == [2, 3] and caught.value.lost == []
        assert pool.flush(timeout=10) == 2
        batch = pool.recv_blocking(timeout=10)
        assert sorted(batch.env_id.tolist()) == [0, 2]
        assert (batch.info["elapsed_step"] == 1).all()
        if restart:
            assert pool.restarts == [0, 1]
            pool.send(np.zeros(4, np.int64))  # env 3 too: the replacement resets it
            assert len(pool.recv_blocking(timeout=20)) == 4


@pytest.mark.parametrize("restart", [True, False], ids=["restart", "no restart"])
def test_a_worker_dying_while_flush_waits_for_its_row(restart: bool) -> None:
    """Issue 30, 3: env 2's hung step is in flight when its worker is killed. flush() goes
    on: with restart=True it waits for env 2's reset in the replacement and publishes it with
    env 0's row; without, it raises WorkerDied at once, and the next flush publishes env 0's."""
    with aiopool.make(Hangs, num_envs=4, batch_size=4, num_workers=2, restart=restart) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        pool.send(np.array([0, 99]), [0, 2])  # env 2's step hangs
        victim = pool.worker_pids()[1]
        killer = threading.Timer(0.3, os.kill, (victim, signal.SIGKILL))
        killer.start()
        start = time.monotonic()
        try:
            if restart:
                assert pool.flush(timeout=20) == 2
            else:
                with pytest.raises(aiopool.WorkerDied) as caught:
                    pool.flush(timeout=20)
                assert caught.value.lost == [2]
                assert pool.flush(timeout=1) == 1
        finally:
            killer.join()
        assert time.monotonic() - start < 5
        batch = pool.recv_blocking(timeout=10)
        got = dict(zip(batch.env_id.tolist(), batch.obs[:, 0].tolist(), strict=True))
        assert got == ({0: 2, 2: 1} if restart else {0: 2})  # env 2: a fresh env's reset


def test_a_partial_reset_through_the_gymnasium_adapter_after_a_worker_died() -> None:
    """Issue 30, 3: reset(options={"reset_mask": ...}) after worker 1 died raised
    NothingInFlight; its replacement now resets env 2, seeded as asked."""
    envs = aiopool.make_gymnasium(CountingEnv, 4, num_workers=2, restart=True)
    try:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))
        _kill(envs._steps.pool.worker_pids()[1])
        mask = np.array([False, True, True, False])
        obs, info = envs.reset(seed=50, options={"reset_mask": mask})
        assert info["_elapsed_step"].tolist() == mask.tolist()
        assert obs[2, 0] == 1 and obs[1, 0] == 3  # env 2: a fresh env; env 1: its 3rd event
        obs, *_ = envs.step(np.zeros(4, np.int64))  # env 3 resets in the replacement
        assert obs[:, 2].tolist() == [2, 1, 1, 0]
    finally:
        envs.close()


@pytest.mark.parametrize(("num_envs", "asked", "holds"), [
    (4, 3, [[0, 1], [2, 3]]), (5, 4, [[0, 1], [2, 3], [4]]), (7, 3, [[0, 1, 2], [3, 4, 5], [6]])])
@pytest.mark.asyncio
async def test_no_worker_starts_without_an_env(num_envs: int, asked: int,
                                               holds: list[list[int]]) -> None:
    """Issue 30, 4: 4 envs on 3 workers gave ceil(4/3) = 2 envs to each of 2 workers and
    started a third with none; its death raised IndexError. Env i lives in worker
    i // ceil(num_envs / num_workers), and only workers that hold an env start."""
    with aiopool.make(CountingEnv, num_envs=num_envs, batch_size=1, num_workers=asked) as pool:
        assert pool.num_workers == len(holds) == len(pool.worker_pids())
        assert [w.env_ids for w in pool._native._workers] == holds
        pool.async_reset()
        [await pool.recv(timeout=10) for _ in range(num_envs)]
        _kill(pool.worker_pids()[-1])
        deadline = time.monotonic() + 5
        while not pool._native._deaths:  # the watcher has seen it (a recv then reports it)
            assert time.monotonic() < deadline, "the watcher saw no death"
            time.sleep(0.01)
        with pytest.raises(aiopool.WorkerDied) as caught:
            await pool.recv(timeout=10)
        assert caught.value.env_ids == holds[-1] and caught.value.lost == []


def test_the_death_of_a_worker_that_holds_no_env_is_harmless() -> None:
    """A pool side given a plan with an env-less worker (make_process makes none): its death
    loses nothing and raises nothing."""
    import cloudpickle

    from aiopool._process.backend import ProcessNative
    from aiopool._process.layout import Field, Plan

    plan = Plan(num_envs=4, num_workers=3, per_worker=2, obs=(Field("obs", "<i8", (4,)),),
                action=Field("action", "<i8", ()), info=(), same_step=False)
    native = ProcessNative(cloudpickle.dumps(CountingEnv), plan, env_id="CountingEnv",
                           batch_size=4, autoreset="next_step", spin_us=0.0, restart=False,
                           step_timeout=None, raise_env_errors=True,
                           spec={"action_bounds": None, "action_repr": ""})
    try:
        assert native._workers[2].env_ids == []
        _kill(native.worker_pids()[2])
        deadline = time.monotonic() + 5
        while not native._deaths:
            assert time.monotonic() < deadline, "the watcher saw no death"
            time.sleep(0.01)
        native.reset(np.arange(4, dtype=np.int32))
        assert native.flush(10.0) == 0  # a whole batch: nothing to cut
        arrays = native.take()
        assert arrays is not None and sorted(arrays[4].tolist()) == [0, 1, 2, 3]
    finally:
        native.close()


def test_a_factory_that_returns_no_env_is_told_so() -> None:
    """A factory must return a gymnasium.Env: anything else is a TypeError saying so (it was
    an AttributeError from the probe's close)."""
    with pytest.raises(TypeError, match=r"<lambda> returned 'int', which has no reset, step"):
        aiopool.make(lambda: 42, num_envs=2)
