"""A consumer that always finds its batch ready still lets other tasks on the loop run."""

from __future__ import annotations

import asyncio
import itertools
import time

import numpy as np
import pytest
from helpers import counting

from aiopool.pool import _YIELD_EVERY


@pytest.mark.asyncio
async def test_other_tasks_are_not_starved() -> None:
    # 100 µs of "policy" per batch with no awaits: the consumer would find every batch
    # ready and never yield if recv did not yield every _YIELD_EVERY fast returns.
    with counting(num_envs=64, batch_size=8, num_threads=1) as pool:
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                await asyncio.sleep(0)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        pool.async_reset()
        ticks_at_batch: list[int] = []
        async for batch in pool.stream():
            t = time.perf_counter() + 100e-6
            while time.perf_counter() < t:
                pass
            batch.send(np.zeros(len(batch), dtype=np.int64))
            ticks_at_batch.append(ticks)
            if len(ticks_at_batch) == 400:
                break
        stop = True
        await task
        longest, run = 0, 1
        for a, b in itertools.pairwise(ticks_at_batch):
            run = run + 1 if a == b else 1
            longest = max(longest, run)
        assert longest <= _YIELD_EVERY + 1, f"{longest} batches in a row without a tick"
