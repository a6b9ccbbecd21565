"""A cancelled recv() loses nothing: a batch claimed for it goes back to the queue."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
from helpers import Ledger, counting, needs_local_doorbell, rows_in_flight

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.asyncio
async def test_cancel_while_waiting_then_receive() -> None:
    with counting(num_envs=4, batch_size=4, step_ns=2_000_000) as pool:
        ledger = Ledger(4)
        pool.async_reset()
        ledger.record(await pool.recv())
        pool.send(np.zeros(4, dtype=np.int64))
        task = asyncio.create_task(pool.recv())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ledger.record(await pool.recv(timeout=5))
        assert ledger.rows == 8


@pytest.mark.asyncio
async def test_cancel_after_the_batch_was_handed_over() -> None:
    needs_local_doorbell()
    # The future already holds a batch when the cancel lands: it must be pushed back.
    with counting(num_envs=4, batch_size=2, step_ns=50_000_000, recv_spin_us=0) as pool:
        ledger = Ledger(4)
        pool.async_reset()
        ledger.record(await pool.recv())
        ledger.record(await pool.recv())
        pool.send(np.zeros(4, dtype=np.int64))
        waiter = asyncio.create_task(pool.recv())
        while pool._doorbell.num_waiting == 0:  # recv may first yield for fairness
            assert not waiter.done()
            await asyncio.sleep(0)
        while pool._native.ready_count == 0:
            time.sleep(0.0005)  # block the loop: the reader callback cannot run yet
        pool._doorbell._dispatch()  # what the reader callback does: hand the batch over
        assert pool._doorbell.num_waiting == 0
        waiter.cancel()  # before the task resumes
        with pytest.raises(asyncio.CancelledError):
            await waiter
        ledger.record(await pool.recv(timeout=5))
        ledger.record(await pool.recv(timeout=5))
        assert ledger.rows == 8


@pytest.mark.asyncio
async def test_timeouts_lose_nothing_under_load() -> None:
    with counting(num_envs=16, batch_size=4, jitter_ns=300_000) as pool:
        ledger = Ledger(16)
        pool.async_reset()
        timeouts = 0
        while ledger.rows < 600:
            try:
                batch = await pool.recv(timeout=0.0002)
            except TimeoutError:
                timeouts += 1
                continue
            ledger.record(batch)
            batch.send(np.ones(len(batch), dtype=np.int64))
        assert timeouts > 0


@pytest.mark.asyncio
async def test_cancelled_step_pushes_back_what_it_received() -> None:
    # One actor on Ray: with two, both batches are stepped at once and land together.
    with counting(num_envs=4, batch_size=2, num_threads=1, num_actors=1,
                  step_ns=20_000_000) as pool:
        ledger = Ledger(4)
        pool.async_reset()
        ledger.record(await pool.recv())
        ledger.record(await pool.recv())
        for _ in range(5):
            task = asyncio.create_task(pool.step(np.zeros(4, dtype=np.int64)))
            while rows_in_flight(pool) != 2 and not task.done():  # sent 4, took 2
                await asyncio.sleep(0.0002)
            if not task.done():
                break
            # This loop was paused for both batches (a loaded machine): step() finished
            # before it could be cancelled. Its rows count; try again.
            ledger.record(task.result())
        else:
            pytest.fail("step() finished 5 times before it could be cancelled")
        rows = ledger.rows
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        ledger.record(await pool.recv(timeout=5))
        ledger.record(await pool.recv(timeout=5))
        assert ledger.rows == rows + 4


@pytest.mark.asyncio
async def test_a_batch_given_back_by_a_cancelled_receiver_goes_to_the_next_waiter() -> None:
    needs_local_doorbell()
    # A and B wait; the batch handed to A comes back when A is cancelled before it resumes.
    # B must get it at once, not wait for the next block (100 ms later here).
    with counting(num_envs=8, batch_size=4, num_threads=1, step_ns=100_000_000,
                  recv_spin_us=0) as pool:
        ledger = Ledger(8)
        pool.async_reset()
        for _ in range(2):
            b = await pool.recv()
            ledger.record(b)
            b.send(np.zeros(4, dtype=np.int64))
        a = asyncio.create_task(pool.recv())
        b_task = asyncio.create_task(pool.recv())
        while pool._doorbell.num_waiting < 2:
            await asyncio.sleep(0)
        first, _ = pool._doorbell._waiters[0]
        while not first.done():  # the reader callback hands the first block to A
            await asyncio.sleep(0)
        a.cancel()
        with pytest.raises(asyncio.CancelledError):
            await a
        assert b_task.done() or pool._doorbell.num_waiting == 0, "B still waits"
        batch = await asyncio.wait_for(b_task, 0.05)
        ledger.record(batch)
        ledger.record(await pool.recv(timeout=5))
        assert ledger.rows == 16
