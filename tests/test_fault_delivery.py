"""Faults of the process backend reach receivers as batches do (issue 30, parts 1 and 2): a
worker's death reaches every parked receiver, and an env's error or a death handed to a
receiver that is cancelled before it runs goes back to the front of the queue."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import numpy as np
import pytest
from helpers import CountingEnv
from test_process_backend import Flaky

import aiopool


class SlowFlaky(Flaky):
    """Flaky whose failing step takes ``fail_after`` seconds first."""

    def __init__(self, fail_after: float = 0.05, **kw: Any) -> None:
        super().__init__(**kw)
        self.fail_after = fail_after

    def step(self, action: int) -> Any:
        time.sleep(self.fail_after)
        return super().step(action)


def _parked(pool: Any) -> int:
    return int(pool._doorbell.num_waiting)


async def _until_parked(pool: Any, n: int) -> None:
    for _ in range(500):
        if _parked(pool) >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{n} receivers never parked")


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["recv", "stream"])
async def test_a_death_reaches_every_parked_receiver(how: str) -> None:
    """Two receivers parked on envs 2 and 3 of worker 1, which is killed: one gets WorkerDied,
    the other NothingInFlight at once (it waited forever before)."""
    with aiopool.make(CountingEnv, num_envs=4, batch_size=1, num_workers=2,
                      step_ns=300_000_000) as pool:
        pool.async_reset()
        for _ in range(4):
            await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64), [2, 3])

        async def receive() -> Any:
            if how == "recv":
                return await pool.recv()
            async for batch in pool.stream():
                return batch
            return None

        tasks = [asyncio.create_task(receive()) for _ in range(2)]
        await _until_parked(pool, 2)
        os.kill(pool.worker_pids()[1], signal.SIGKILL)
        _, pending = await asyncio.wait(tasks, timeout=3)
        assert not pending, "a parked receiver still waits after the worker died"
        kinds = sorted(type(t.exception()).__name__ for t in tasks)
        assert kinds == ["NothingInFlight", "WorkerDied"], kinds


@pytest.mark.asyncio
@pytest.mark.parametrize("ends", ["raises", "returns"])
@pytest.mark.parametrize("how", ["recv", "stream"])
async def test_an_env_error_reaches_one_parked_receiver_and_the_other_once_its_holder_ends(
        how: str, ends: str) -> None:
    """Two receivers parked on env 2's step, which raises: one gets the EnvError with its
    batch, and the other waits while that batch may still be sent. Once the first task ends,
    by the error or by returning after catching it (the batch dropped with the error), the
    other gets NothingInFlight at once. It waited for the gc before: the parked receive's own
    frames, kept by the error's traceback, held the error, and so its batch, in a cycle."""
    with aiopool.make(SlowFlaky, num_envs=4, batch_size=1, num_workers=2, fail_at=1,
                      fail_after=0.2) as pool:
        pool.async_reset()
        for _ in range(4):
            await pool.recv(timeout=5)
        pool.send(np.zeros(1, np.int64), [2])
        caught = asyncio.Event()
        go_on = asyncio.Event()

        async def receive() -> Any:
            try:
                if how == "recv":
                    return await pool.recv()
                async for batch in pool.stream():
                    return batch
                return None
            except aiopool.EnvError as e:
                assert e.batch.env_id.tolist() == [2]
                caught.set()
                await go_on.wait()  # holds the error's batch meanwhile
                if ends == "raises":
                    raise
                return "caught"

        tasks = [asyncio.create_task(receive()) for _ in range(2)]
        await asyncio.wait_for(caught.wait(), 5)
        await asyncio.sleep(0.2)
        assert sum(t.done() for t in tasks) == 0, "the error's batch may still be sent"
        go_on.set()
        _, pending = await asyncio.wait(tasks, timeout=2)
        assert not pending, "a parked receiver still waits after the error's holder ended"
        outcomes = sorted(type(t.exception()).__name__ if t.exception() else t.result()
                          for t in tasks)
        assert outcomes == sorted(["NothingInFlight",
                                   "EnvError" if ends == "raises" else "caught"]), outcomes


@pytest.mark.asyncio
async def test_an_env_error_handed_to_a_receiver_whose_timeout_fired_is_not_lost() -> None:
    """The error batch lands and the timer expires while the loop is busy: the receiver gets
    TimeoutError, and the next receive the EnvError with its batch."""
    with aiopool.make(SlowFlaky, num_envs=2, batch_size=2, num_workers=1, fail_at=1) as pool:
        pool.async_reset()
        await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64))
        receiver = asyncio.create_task(pool.recv(timeout=0.2))
        await _until_parked(pool, 1)
        time.sleep(0.5)  # a policy or learner step holds the loop
        with pytest.raises(TimeoutError):
            await receiver
        with pytest.raises(aiopool.EnvError) as caught:
            await pool.recv(timeout=2)
        assert sorted(caught.value.batch.env_id.tolist()) == [0, 1]


@pytest.mark.asyncio
async def test_an_env_error_served_by_try_recv_to_a_receiver_then_cancelled_is_not_lost() -> None:
    with aiopool.make(SlowFlaky, num_envs=2, batch_size=2, num_workers=1, fail_at=1) as pool:
        pool.async_reset()
        await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64))
        receiver = asyncio.create_task(pool.recv())
        await _until_parked(pool, 1)
        time.sleep(0.3)  # the error lands
        assert pool.try_recv() is None  # serves the parked receiver first
        receiver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await receiver
        with pytest.raises(aiopool.EnvError) as caught:
            await pool.recv(timeout=2)
        caught.value.batch.send(np.zeros(2, np.int64))  # the pool goes on
        assert len(await pool.recv(timeout=5)) == 2


@pytest.mark.asyncio
async def test_a_death_handed_to_a_receiver_then_cancelled_is_not_lost() -> None:
    with aiopool.make(CountingEnv, num_envs=2, batch_size=2, num_workers=1,
                      step_ns=300_000_000) as pool:
        pool.async_reset()
        await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64))
        receiver = asyncio.create_task(pool.recv())
        await _until_parked(pool, 1)
        os.kill(pool.worker_pids()[0], signal.SIGKILL)
        time.sleep(0.3)
        assert pool.try_recv() is None  # hands the death to the parked receiver
        receiver.cancel()
        with pytest.raises(asyncio.CancelledError):
            await receiver
        with pytest.raises(aiopool.WorkerDied) as caught:
            await pool.recv(timeout=2)
        assert caught.value.lost == [0, 1]


@pytest.mark.asyncio
async def test_rows_of_envs_lost_with_their_worker_stop_counting_as_held() -> None:
    """Another task holds envs 2 and 3's rows when their worker dies (no restart): a send to
    them is refused, so no batch can come of them, and a receive raises NothingInFlight at
    once (it waited for them forever)."""
    with aiopool.make(CountingEnv, num_envs=4, batch_size=2, num_workers=2,
                      restart=False) as pool:
        pool.async_reset(env_ids=[2, 3])
        has_it, done = asyncio.Event(), asyncio.Event()
        theirs: list[Any] = []

        async def holder() -> None:
            theirs.append(await pool.recv(timeout=5))
            has_it.set()
            await done.wait()

        task = asyncio.create_task(holder())
        await asyncio.wait_for(has_it.wait(), 5)
        assert sorted(theirs[0].env_id.tolist()) == [2, 3]
        pool.async_reset(env_ids=[0, 1])
        (await pool.recv(timeout=5)).send(np.zeros(2, np.int64))
        os.kill(pool.worker_pids()[1], signal.SIGKILL)
        await asyncio.sleep(0.5)  # the death is seen by then: the next receive reports it
        with pytest.raises(aiopool.WorkerDied) as caught:
            for _ in range(100):
                (await pool.recv(timeout=5)).send(np.zeros(2, np.int64))
        assert caught.value.env_ids == [2, 3]
        with pytest.raises(ValueError, match="lost with its worker process"):
            theirs[0].send(np.zeros(2, np.int64))
        kept = await pool.recv(timeout=5)  # envs 0 and 1, sent before the death was heard
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=2)
        assert sorted(kept.env_id.tolist()) == [0, 1]
        done.set()
        await asyncio.wait_for(task, 5)
