"""Shared test helpers: the counting env and per-env accounting of its rows."""

from __future__ import annotations

from typing import Any

import numpy as np

import aiopool


def counting(num_envs: int = 8, batch_size: int | None = None, num_threads: int = 2,
             **kw: Any) -> aiopool.Pool:
    return aiopool.make("Counting-v0", num_envs=num_envs, batch_size=batch_size,
                        num_threads=num_threads, **kw)


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
