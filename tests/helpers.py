"""Shared test helpers: the counting env (native, and the same env in Python for the process
backend), the backend the contract tests run on, and per-env accounting of the rows."""

from __future__ import annotations

import functools
import time
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

import aiopool

# The backend ``counting`` builds pools on; the ``backend`` fixture (conftest.py) sets it, so
# the contract tests that use ``counting`` run on native threads and on worker processes.
BACKEND = "threads"
_NATIVE_ONLY = ("chunk",)


def counting(num_envs: int = 8, batch_size: int | None = None, num_threads: int = 2,
             num_actors: int | None = None, **kw: Any) -> aiopool.Pool:
    """A Counting-v0 pool on the backend under test. ``num_actors`` (Ray only) fixes the
    actors; by default two when each gets whole batches (so ``step()`` works), else one.
    Two actors step their envs at the same time: a test that needs one batch to land
    before another (as on one thread) asks for one."""
    if BACKEND == "ray":  # the remote pool of aiopool.distributed (a running Ray needed)
        from aiopool.distributed import make_remote

        b = num_envs if batch_size is None else batch_size
        # half a CPU each
        k = num_actors or (2 if num_envs % 2 == 0 and (num_envs // 2) % b == 0 else 1)
        kw.pop("chunk", None)
        return make_remote("Counting-v0", num_envs=num_envs, batch_size=b,  # type: ignore[return-value]
                           num_actors=k, num_cpus=0.5, num_threads=num_threads, **kw)
    if BACKEND == "processes":
        pool_kw = {k: kw.pop(k) for k in ("seed", "autoreset", "recv_spin_us", "worker_spin_us",
                                          "max_episode_steps") if k in kw}
        for k in _NATIVE_ONLY:
            kw.pop(k, None)
        steps = pool_kw.pop("max_episode_steps", None)
        factory = functools.partial(CountingEnv, max_episode_steps=steps, **kw)
        return aiopool.make(factory, num_envs=num_envs, batch_size=batch_size,
                            num_workers=num_threads, info_keys=CountingEnv.INFO, **pool_kw)
    return aiopool.make("Counting-v0", num_envs=num_envs, batch_size=batch_size,
                        num_threads=num_threads, **kw)


async def step_in_mode(pool: Any, ref: Any, actions: Any, mode: str,
                       ended: Any = None) -> tuple[Any, dict[int, Any] | None]:
    """One step of every env of ``pool`` and of a parity test's reference (``ref.ended``, its
    ``reset(ids)`` and ``step(actions, ids)`` give the rows each env should have): the batch
    and the expected rows. In ``disabled`` mode the envs whose episode ended are reset instead,
    as a user of that mode does; in the other modes the pool resets them itself. Without a
    reference (a recorded case: ``ref`` None), ``ended`` says which envs ended, and no rows are
    expected."""
    if mode != "disabled":
        batch = await pool.step(actions)
        return batch, None if ref is None else ref.step(actions, list(range(len(actions))))
    flags = np.asarray(ref.ended if ref is not None else ended, dtype=bool)
    reset = np.flatnonzero(flags).tolist()
    live = np.flatnonzero(~flags).tolist()
    if reset:
        pool.async_reset(env_ids=reset)
    if live:
        pool.send(actions[live], env_ids=live)
    batch = await pool.recv()
    if ref is None:
        return batch, None
    expected = ref.reset(reset)
    expected.update(ref.step(actions, live))
    return batch, expected


def num_waiting(pool: Any) -> int:
    """Receivers parked in ``recv`` (a remote pool counts its own)."""
    return int(pool.num_waiting if BACKEND == "ray" else pool._doorbell.num_waiting)


def rows_in_flight(pool: Any) -> int:
    """Env steps sent whose rows the consumer has not taken yet."""
    return int(pool.rows_in_flight if BACKEND == "ray" else pool._native.rows_in_flight)


def needs_local_doorbell() -> None:
    """Skip on the Ray backend: the test drives the local doorbell's internals."""
    import pytest

    if BACKEND == "ray":
        pytest.skip("drives the local pool's doorbell internals; the remote pool has its own "
                    "(tests/test_distributed.py covers its cancellation)")


class CountingEnv(gym.Env[np.ndarray, int]):
    """Counting-v0 (``aiopool/_native/envs/testing/counting.h``) in Python, step for step:
    obs = [events, episode, elapsed, last_action], reward = action, terminated when elapsed
    reaches ``episode_length``; each reset draws one uniform (``info["draw"]``) from the env's
    ``np_random``, which is what the native env's rng draws for the same seed."""

    INFO: ClassVar[dict[str, Any]] = {"draw": np.float64, "events_parity": np.int32}

    def __init__(self, episode_length: int = 10, num_actions: int = 1000, step_ns: int = 0,
                 jitter_ns: int = 0, max_episode_steps: int | None = None) -> None:
        self.observation_space = gym.spaces.Box(0, 1e18, (4,), np.int64)
        self.action_space = gym.spaces.Discrete(num_actions)
        self.episode_length, self.step_ns, self.jitter_ns = episode_length, step_ns, jitter_ns
        self.limit = max_episode_steps
        self.events, self.episode, self.elapsed, self.last, self.draw = 0, -1, 0, -1, 0.0

    def _obs(self) -> tuple[np.ndarray, dict[str, Any]]:
        obs = np.array([self.events, self.episode, self.elapsed, self.last], dtype=np.int64)
        return obs, {"draw": self.draw, "events_parity": self.events % 2}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.events += 1
        self.episode += 1
        self.elapsed, self.last = 0, -1
        self.draw = float(self.np_random.random())
        return self._obs()

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        wait = self.step_ns
        if self.jitter_ns:
            wait += int(self.np_random.random() * self.jitter_ns)
        if wait:
            until = time.perf_counter_ns() + wait
            while time.perf_counter_ns() < until:
                pass
        self.events += 1
        self.elapsed += 1
        self.last = int(action)
        truncated = self.limit is not None and self.limit > 0 and self.elapsed >= self.limit
        obs, info = self._obs()
        return obs, float(action), self.elapsed >= self.episode_length, truncated, info


class Ledger:
    """Checks that every env event (reset or step) of the counting env arrives exactly once,
    in order per env: obs[:, 0] is the env's event counter."""

    def __init__(self, num_envs: int) -> None:
        self.last = np.zeros(num_envs, dtype=np.int64)
        self.rows = 0

    def record(self, batch: aiopool.Batch) -> None:
        ids = batch.env_id
        events = batch.obs[:, 0]
        assert len(np.unique(ids)) == len(ids), f"an env appears twice in one batch: {ids}"
        expected = self.last[ids] + 1
        assert np.array_equal(events, expected), (
            f"env events out of order or duplicated: env {ids}, got {events}, "
            f"expected {expected}")
        self.last[ids] = events
        self.rows += len(ids)


class DictObsEnv(gym.Env[dict[str, Any], int]):
    """A small env with Dict observations (Box, Discrete and MultiBinary entries), for the
    adapters' parity tests on the process backend. The reset draws the start position from
    the env's ``np_random`` (so seeds show); an episode ends by termination (the position
    leaves [-3, 3]) or by truncation (12 steps)."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(-10.0, 10.0, (2,), np.float32),
            "phase": gym.spaces.Discrete(5),
            "seen": gym.spaces.MultiBinary(3)})
        self.action_space = gym.spaces.Discrete(3)
        self.position = np.zeros(2, np.float32)
        self.phase, self.t = 0, 0
        self.seen = np.zeros(3, np.int8)

    def _obs(self) -> dict[str, Any]:
        # in the space's key order (gymnasium sorts a Dict space's keys), as final_obs keeps it
        return {"phase": self.phase, "position": self.position.copy(), "seen": self.seen.copy()}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        self.phase, self.t = int(self.np_random.integers(5)), 0
        self.seen = np.zeros(3, np.int8)
        return self._obs(), {}

    def step(self, action: int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.t += 1
        self.position = self.position + np.float32(0.75) * np.float32(int(action) - 1)
        self.phase = (self.phase + 1) % 5
        self.seen[int(action)] = 1
        terminated = bool(abs(self.position[0]) > 3.0)
        return self._obs(), float(self.position.sum()), terminated, self.t >= 12, {}
