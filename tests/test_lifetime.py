"""Batches are zero-copy views whose block is recycled only when the last view dies."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from helpers import counting


@pytest.mark.asyncio
async def test_kept_batches_stay_intact_while_the_pool_runs_on() -> None:
    with counting(num_envs=8, batch_size=4) as pool:
        pool.async_reset()
        kept = []
        copies = []
        async for batch in pool.stream():
            kept.append(batch)
            copies.append((batch.obs.copy(), batch.env_id.copy(), batch.reward.copy()))
            batch.send(np.full(len(batch), len(kept) % 1000, dtype=np.int64))
            if len(kept) == 300:
                break
        for batch, (obs, env_id, reward) in zip(kept, copies, strict=True):
            assert np.array_equal(batch.obs, obs)
            assert np.array_equal(batch.env_id, env_id)
            assert np.array_equal(batch.reward, reward)
        assert pool._native.blocks_allocated >= 300  # kept blocks were never reused


@pytest.mark.asyncio
async def test_dropped_batches_are_recycled() -> None:
    with counting(num_envs=8, batch_size=4) as pool:
        pool.async_reset()
        n = 0
        async for batch in pool.stream():
            batch.send(np.zeros(len(batch), dtype=np.int64))
            n += 1
            if n == 2000:
                break
        assert pool._native.blocks_allocated < 20


@pytest.mark.asyncio
async def test_views_outlive_the_pool() -> None:
    pool = counting(num_envs=4, batch_size=4)
    pool.async_reset()
    batch = await pool.recv()
    obs, info = batch.obs, batch.info
    expected = obs.copy()
    pool.close()
    del pool, batch
    gc.collect()
    churn = [np.full(obs.shape, 7, dtype=np.int64) for _ in range(100)]  # reuse freed memory
    assert np.array_equal(obs, expected)
    assert info["draw"].shape == (4,)
    del churn


@pytest.mark.asyncio
async def test_batch_send_after_the_pool_is_gone() -> None:
    import aiopool

    pool = counting(num_envs=2, batch_size=2)
    pool.async_reset()
    batch = await pool.recv()
    pool.close()
    with pytest.raises(aiopool.PoolClosed):
        batch.send(np.zeros(2, dtype=np.int64))
    del pool
    gc.collect()
    with pytest.raises(aiopool.PoolClosed):
        batch.send(np.zeros(2, dtype=np.int64))


@pytest.mark.asyncio
@pytest.mark.parametrize("end", ["close", "drop"])
async def test_pools_made_and_ended_inside_one_task_are_freed(end: str) -> None:
    """A periodic evaluation: pools made and closed (or dropped) one at a time inside one
    long-lived task, each left with a batch it never sent. Each pool's count of held batches
    goes with it, and with it the unsent batch's block (the task's done-callback kept both
    until the task ended: ~1.5 MB per Atari evaluation)."""
    gone = []
    for _ in range(3):
        pool = counting(num_envs=4, batch_size=4)
        pool.async_reset()
        batch = await pool.recv()  # handed out to this task, never sent
        gone.append(weakref.ref(pool._holders))
        if end == "close":
            pool.close()
        del pool, batch
        gc.collect()
    assert [ref() for ref in gone] == [None] * 3
