"""Autoreset modes on the counting env (episode_length 3), with exact expected tables."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import counting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


async def _run(pool: aiopool.Pool, steps: int) -> list[aiopool.Batch]:
    pool.async_reset()
    out = [await pool.recv()]
    for t in range(steps):
        out.append(await pool.step(np.full(pool.num_envs, t + 1)))
    return out


@pytest.mark.asyncio
async def test_next_step_resets_on_the_step_after_the_end() -> None:
    with counting(num_envs=2, batch_size=2, episode_length=3) as pool:
        rows = await _run(pool, 5)
        # (elapsed, reward, terminated, episode) of env 0 after reset, then steps 1..5
        got = [(int(b.info["elapsed_step"][0]), float(b.reward[0]), bool(b.terminated[0]),
                int(b.obs[0, 1]))
               for b in [rows[0]] + [r for r in rows[1:]]]
        assert got == [(0, 0.0, False, 0), (1, 1.0, False, 0), (2, 2.0, False, 0),
                       (3, 3.0, True, 0),
                       (0, 0.0, False, 1),   # action 4 ignored: the env resets instead
                       (1, 5.0, False, 1)]
        ended = rows[3]
        assert ended.info["episode_return"][0] == 6.0 and ended.info["episode_length"][0] == 3


@pytest.mark.asyncio
async def test_same_step_resets_at_once_and_keeps_the_final_obs() -> None:
    with counting(num_envs=2, batch_size=2, episode_length=3, autoreset="same_step") as pool:
        rows = await _run(pool, 4)
        end = rows[3]
        assert bool(end.terminated[0]) and end.reward[0] == 3.0
        assert end.obs[0].tolist() == [5, 1, 0, -1]        # the reset obs, episode 1
        assert end.info["final_obs"][0].tolist() == [4, 0, 3, 3]  # the terminal obs
        assert end.info["final_info"]["elapsed_step"][0] == 3
        assert end.info["elapsed_step"][0] == 0
        assert end.info["episode_return"][0] == 6.0 and end.info["episode_length"][0] == 3
        nxt = rows[4]
        assert nxt.reward[0] == 4.0 and nxt.info["elapsed_step"][0] == 1


@pytest.mark.asyncio
async def test_disabled_requires_an_explicit_reset() -> None:
    with counting(num_envs=2, batch_size=1, episode_length=2, autoreset="disabled") as pool:
        pool.async_reset()
        ended = {}
        while len(ended) < 2:  # each env: reset, step, step (terminated), in any interleaving
            b = await pool.recv()
            if b.terminated[0]:
                ended[int(b.env_id[0])] = b
            else:
                b.send([1])
        assert all(b.info["elapsed_step"][0] == 2 for b in ended.values())
        with pytest.raises(ValueError, match="autoreset is 'disabled'.*async_reset"):
            pool.send([1], [0])
        pool.async_reset(env_ids=[0])
        b = await pool.recv()
        assert b.env_id[0] == 0 and b.info["elapsed_step"][0] == 0
        b.send([7])
        b = await pool.recv()
        assert b.reward[0] == 7.0


@pytest.mark.asyncio
async def test_time_limit_truncates() -> None:
    with counting(num_envs=1, episode_length=100, max_episode_steps=2) as pool:
        rows = await _run(pool, 3)
        assert [bool(b.truncated[0]) for b in rows] == [False, False, True, False]
        assert [bool(b.terminated[0]) for b in rows] == [False] * 4
