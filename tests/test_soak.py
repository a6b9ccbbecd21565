"""Soak: over a million env-steps with random cancellations, timeouts and consumer counts;
every env-step is accounted for exactly once, in order per env."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from helpers import Ledger, counting

import aiopool

TARGET_STEPS = 1_000_000


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.timeout(600)
async def test_soak_every_env_step_exactly_once() -> None:
    rng = random.Random(0)
    num_envs = 256
    with counting(num_envs=num_envs, batch_size=32, num_threads=2, chunk=8, jitter_ns=10_000,
                  episode_length=50) as pool:
        ledger = Ledger(num_envs)
        cancelled = timeouts = 0
        sent = num_envs
        pool.async_reset()

        def send(batch: aiopool.Batch) -> None:
            nonlocal sent
            batch.send(np.asarray(ledger.last[batch.env_id] % 1000, dtype=np.int64))
            sent += len(batch)

        async def consume(budget: int) -> None:
            nonlocal cancelled, timeouts
            for _ in range(budget):
                r = rng.random()
                try:
                    if r < 0.05:
                        batch = await pool.recv(timeout=rng.choice([0.0, 1e-6, 1e-5]))
                    else:
                        batch = await pool.recv(timeout=10)
                except TimeoutError:
                    timeouts += 1
                    continue
                except aiopool.NothingInFlight:
                    await asyncio.sleep(0)  # other consumers hold the batches in flight
                    continue
                ledger.record(batch)
                send(batch)
                if r > 0.98:
                    await asyncio.sleep(0)

        async def canceller(tasks: list[asyncio.Task[None]]) -> None:
            nonlocal cancelled
            while any(not t.done() for t in tasks):
                await asyncio.sleep(rng.random() * 1e-3)
                victim = asyncio.create_task(pool.recv())
                await asyncio.sleep(0)
                if rng.random() < 0.5:
                    await asyncio.sleep(0)
                victim.cancel()
                try:
                    batch = await victim
                except asyncio.CancelledError:
                    cancelled += 1
                except aiopool.NothingInFlight:
                    pass  # the consumers' own waits already claim every batch in flight
                else:  # it finished before the cancel landed: account for it
                    ledger.record(batch)
                    send(batch)

        while ledger.rows < TARGET_STEPS:
            consumers = rng.choice([1, 2, 3, 4])
            tasks = [asyncio.create_task(consume(200)) for _ in range(consumers)]
            await asyncio.wait_for(asyncio.gather(*tasks, canceller(tasks)), 120)

        # Drain what is still in flight: every sent step must come back exactly once.
        while pool._native.rows_in_flight:
            ledger.record(await pool.recv(timeout=10))
        assert ledger.rows >= TARGET_STEPS
        assert ledger.rows == sent
        print(f"soak: {ledger.rows} env-steps, {cancelled} cancelled receives, {timeouts} timeouts")
        assert cancelled > 100 and timeouts > 10
