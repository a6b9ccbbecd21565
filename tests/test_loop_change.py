"""A pool used from a second event loop re-registers its reader there."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import uvloop
from helpers import Ledger, counting

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


def test_pool_moves_between_loops() -> None:
    pool = counting(num_envs=4, batch_size=2, step_ns=200_000, recv_spin_us=0)
    ledger = Ledger(4)

    async def run(n: int) -> None:
        if ledger.rows == 0:
            pool.async_reset()
        for _ in range(n):
            batch = await pool.recv(timeout=5)
            ledger.record(batch)
            batch.send(np.ones(len(batch), dtype=np.int64))

    asyncio.run(run(50))
    uvloop.run(run(50))
    with asyncio.Runner() as runner:
        runner.run(run(50))
        runner.run(run(50))  # same loop again
    asyncio.run(run(50))
    assert ledger.rows == 500
    pool.close()


def test_loop_closed_with_a_pending_recv() -> None:
    pool = counting(num_envs=2, batch_size=2, step_ns=20_000_000, recv_spin_us=0)
    ledger = Ledger(2)

    async def leave_pending() -> None:
        pool.async_reset()
        ledger.record(await pool.recv(timeout=5))
        pool.send(np.ones(2, dtype=np.int64))
        asyncio.get_running_loop().create_task(pool.recv())
        await asyncio.sleep(0)

    asyncio.run(leave_pending())  # cancels the pending recv, then closes the loop

    async def resume() -> None:
        ledger.record(await pool.recv(timeout=5))

    uvloop.run(resume())
    assert ledger.rows == 4
    pool.close()
