"""Several consumers on one pool get disjoint batches; each is delivered exactly once."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from helpers import Ledger, counting

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.mark.asyncio
@pytest.mark.parametrize("consumers", [2, 4])
async def test_consumers_share_the_stream_exactly_once(consumers: int) -> None:
    with counting(num_envs=32, batch_size=4, jitter_ns=20_000) as pool:
        ledger = Ledger(32)
        pool.async_reset()
        seen: list[int] = []

        async def consume() -> None:
            while ledger.rows < 4000:
                batch = await pool.recv(timeout=5)
                ledger.record(batch)
                seen.append(id(batch))
                await asyncio.sleep(0)
                batch.send(np.ones(len(batch), dtype=np.int64))

        await asyncio.wait_for(asyncio.gather(*(consume() for _ in range(consumers))), 60)
        assert ledger.rows >= 4000


@pytest.mark.asyncio
async def test_waiters_are_served_in_fifo_order() -> None:
    with counting(num_envs=4, batch_size=1, step_ns=20_000_000, recv_spin_us=0) as pool:
        pool.async_reset()
        for _ in range(4):
            (await pool.recv(timeout=5)).send([0])  # steps take 20 ms: every waiter parks
        order: list[int] = []

        async def wait(i: int) -> None:
            await pool.recv(timeout=5)
            order.append(i)

        tasks = [asyncio.create_task(wait(i)) for i in range(4)]
        await asyncio.gather(*tasks)
        assert order == [0, 1, 2, 3]
