"""Receivers in order: NothingInFlight exactly when no batch can come for a receiver, parked
receivers served first (FIFO) by every kind of receive, cancelled receives change nothing."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import counting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def one_core() -> Iterator[None]:
    """The test process on one core, as on a loaded machine (workers and loop interleave)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@pytest.mark.asyncio
async def test_recv_after_the_last_batch_raises_at_once(one_core: None) -> None:
    """The worker that publishes a block used to count it only after pushing it, so a loop woken
    by the push could take it and call recv() while it still counted as in flight: that recv
    then waited forever."""
    with counting(num_envs=4, batch_size=4, num_threads=1, seed=0, recv_spin_us=0.0) as pool:
        pool.async_reset()
        await pool.recv(timeout=5)
        for i in range(200):
            pool.send(np.zeros(4, np.int64))
            await pool.recv(timeout=5)
            start = time.monotonic()
            with pytest.raises(aiopool.NothingInFlight):
                await pool.recv(timeout=2)
            assert time.monotonic() - start < 1, f"round {i}: recv waited instead of raising"


async def _parked(pool: aiopool.Pool, n: int) -> None:
    """Until n receivers wait in the pool (a receiver may first yield at its fairness check)."""
    end = time.monotonic() + 5
    while pool._doorbell.num_waiting < n:
        assert time.monotonic() < end, f"{pool._doorbell.num_waiting} receivers parked, not {n}"
        await asyncio.sleep(0)


def _busy_until_published(pool: aiopool.Pool, batches: int = 1) -> None:
    """Keep the loop busy (a policy computing) until `batches` batches are ready."""
    end = time.monotonic() + 10
    while pool._native.ready_count < batches:
        assert time.monotonic() < end, "the batch was never published"


@pytest.mark.asyncio
@pytest.mark.parametrize("late", ["recv", "try_recv", "recv_blocking"])
async def test_a_late_receiver_does_not_take_a_parked_receivers_batch(late: str) -> None:
    """One batch in flight, receiver A parked on it, the loop busy (a policy computing) while it
    is published: a receive that starts then must not take it. A gets it. The late receive
    waits (A may send the batch back: a channel's rule), until its timeout."""
    with counting(num_envs=4, batch_size=2, num_threads=1, step_ns=30_000_000) as pool:
        pool.async_reset(env_ids=[0, 1])
        await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64), [0, 1])
        a = asyncio.ensure_future(pool.recv(timeout=5))
        await _parked(pool, 1)
        _busy_until_published(pool)
        if late == "recv":
            with pytest.raises(TimeoutError):
                await pool.recv(timeout=0.3)
        elif late == "try_recv":
            assert pool.try_recv() is None
        else:
            with pytest.raises(TimeoutError):
                pool.recv_blocking(timeout=0.3)
        batch = await asyncio.wait_for(a, 5)
        assert sorted(batch.env_id.tolist()) == [0, 1]


@pytest.mark.asyncio
async def test_parked_receivers_are_served_in_order_before_fast_takes() -> None:
    with counting(num_envs=6, batch_size=2, num_threads=1, step_ns=20_000_000) as pool:
        pool.async_reset()
        for _ in range(3):
            await pool.recv(timeout=5)
        waiters = []
        for k in range(3):
            pool.send(np.zeros(2, np.int64), [2 * k, 2 * k + 1])
            waiters.append(asyncio.ensure_future(pool.recv(timeout=5)))
            await _parked(pool, k + 1)
        _busy_until_published(pool, 3)
        with pytest.raises(TimeoutError):  # waits: the parked ones may send theirs back
            await pool.recv(timeout=0.3)
        got = [sorted((await asyncio.wait_for(w, 5)).env_id.tolist()) for w in waiters]
        assert sorted(got) == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.asyncio
async def test_a_send_to_an_env_whose_result_was_given_back_is_refused() -> None:
    """A cancelled receive puts its batch back; until someone receives it, its envs are not
    idle for the user, so cancelling changes nothing."""
    with counting(num_envs=2, batch_size=2, num_threads=1, step_ns=30_000_000) as pool:
        pool.async_reset()
        await pool.recv(timeout=5)
        pool.send(np.zeros(2, np.int64))
        task = asyncio.ensure_future(pool.recv())
        await _parked(pool, 1)
        _busy_until_published(pool)
        assert pool.try_recv() is None  # which hands it to the parked task first
        task.cancel()  # the task is cancelled before it runs: its batch goes back
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(pool._returned) == 1
        with pytest.raises(ValueError, match="has not been received yet"):
            pool.send(np.zeros(2, np.int64))
        batch = await pool.recv(timeout=5)
        assert sorted(batch.env_id.tolist()) == [0, 1]
        pool.send(np.zeros(2, np.int64))
        assert len(await pool.recv(timeout=5)) == 2


@pytest.mark.asyncio
async def test_stream_of_a_pool_closed_before_any_reset_ends() -> None:
    pool = counting(num_envs=2, batch_size=2)
    pool.close()
    assert [b async for b in pool.stream()] == []
