"""Sync adapters: a pool driven in lockstep behind the gymnasium, dm_env and SB3 APIs.

- ``aiopool.adapters.gymnasium``: ``GymnasiumVectorEnv`` / ``make_gymnasium``
- ``aiopool.adapters.dm_env``: ``DmEnvironment`` / ``make_dm`` (needs ``dm-env``)
- ``aiopool.adapters.sb3``: ``Sb3VecEnv`` / ``make_sb3`` (needs ``stable-baselines3``)

Each adapter owns a ``Lockstep``: a pool whose ``batch_size`` is the adapter's ``num_envs``. A
call sends to its envs, waits for exactly their rows (in ``recv_blocking``, GIL released) and
returns them ordered by env id as writeable copies. Resetting only some envs (gymnasium's
``reset_mask``) ends with ``Pool.flush``, which hands out their rows as one short batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..batch import Batch
from ..pool import Pool
from ..registry import make

__all__ = ["Lockstep", "Rows"]

Seeds = int | Sequence[int | None] | None


class Rows(NamedTuple):
    """One row per env of a lockstep call, ordered by env id; every array is a writeable copy.

    ``info`` holds the pool's info arrays (``elapsed_step``, ``episode_return``,
    ``episode_length``, family extras) and, with ``autoreset="same_step"``, ``final_obs`` and
    the dict ``final_info`` (valid where ``terminated | truncated``).
    """

    env_id: npt.NDArray[np.int32]
    obs: npt.NDArray[Any]
    reward: npt.NDArray[np.float64]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]
    info: dict[str, Any]


class Lockstep:
    """A pool stepped like a sync vector env: each call returns every row it asked for.

    Args:
        env_id, num_envs, seed, autoreset, num_threads: as ``aiopool.make``.
        **make_kwargs: passed on to ``aiopool.make`` (``max_episode_steps``, env kwargs, ...).

    A call interrupted while waiting (Ctrl-C) loses nothing: the rows received so far are
    kept, ``wait`` finishes an interrupted step, and ``reset`` drains whatever is pending.
    ``send`` refuses to run while rows are pending, since the caller has not seen them.
    """

    def __init__(self, env_id: str, num_envs: int, *, seed: int | None, autoreset: str,
                 num_threads: int | None, **make_kwargs: Any) -> None:
        if "batch_size" in make_kwargs:
            raise TypeError("the sync adapters step every env at once; batch_size is num_envs "
                            "(use aiopool.make for batches smaller than the pool)")
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs is {num_envs!r}, expected a positive int")
        self.num_envs = num_envs
        self.pool: Pool = make(env_id, num_envs, batch_size=num_envs,
                               num_threads=num_threads, seed=seed, autoreset=autoreset,
                               **make_kwargs)
        self.ever_reset = False
        self._ids = np.arange(num_envs, dtype=np.int32)
        self._pending: str | None = None  # "reset" or "step" while its rows are awaited
        self._awaiting = 0  # rows of the pending call not yet received
        self._inbox: list[Batch] = []  # batches of the pending call received so far

    def reset(self, env_ids: npt.NDArray[np.int32] | None = None,
              seed: Seeds = None) -> Rows:
        """Reset ``env_ids`` (default all) and return their first rows.

        ``seed``: None continues each env's random stream; an int seeds env ``i`` with
        ``seed + i``; a sequence gives env ``i`` the seed ``seed[i]`` (None: unseeded).
        """
        ids = self._ids if env_ids is None else env_ids
        if seed is not None and not isinstance(seed, int | np.integer):
            if isinstance(seed, str) or len(seed) != self.num_envs:
                raise ValueError(f"seed is {seed!r}, expected None, an int or a list of "
                                 f"{self.num_envs} ints or Nones (one per env)")
            seed = [seed[i] for i in ids.tolist()]
        self._drain()
        self.pool.async_reset(seed=seed, env_ids=ids)
        if len(ids) < self.num_envs:
            self.pool.flush()  # the rows of a partial reset, as one short batch
        self.ever_reset = True
        self._pending, self._awaiting = "reset", len(ids)
        return self._gather(ids)

    def send(self, actions: npt.ArrayLike) -> None:
        """Send one action per env; ``wait`` returns the rows."""
        if not self.ever_reset:
            raise RuntimeError("step() before reset(): call reset() first")
        if self._pending is not None:
            raise RuntimeError(
                f"the results of the previous {self._pending} have not all been received (it "
                "was interrupted, or SB3's step_async() was not followed by step_wait()); call "
                "reset(), or step_wait() to receive a pending step")
        self.pool.send(actions, self._ids)
        self._pending, self._awaiting = "step", self.num_envs

    def wait(self) -> Rows:
        """The rows of the last ``send``, ordered by env id."""
        if self._pending != "step":
            raise RuntimeError("nothing to wait for: send actions first "
                               "(SB3: call step_async() before step_wait())")
        return self._gather(self._ids)

    def step(self, actions: npt.ArrayLike) -> Rows:
        self.send(actions)
        return self.wait()

    def close(self) -> None:
        self.pool.close()

    # -- internals ------------------------------------------------------------------------

    def _drain(self) -> None:
        """Receive and drop the rows of a pending call, so every env is idle again."""
        while self._awaiting > 0:
            self._awaiting -= len(self.pool.recv_blocking())
        self._inbox.clear()
        self._pending = None

    def _gather(self, ids: npt.NDArray[np.int32]) -> Rows:
        while self._awaiting > 0:
            batch = self.pool.recv_blocking()
            self._inbox.append(batch)
            self._awaiting -= len(batch)
        batches, self._inbox, self._pending = self._inbox, [], None
        return _rows(batches, ids)


def _rows(batches: list[Batch], ids: npt.NDArray[np.int32]) -> Rows:
    """The rows of ``ids`` (sorted env ids) out of ``batches``, ordered by env id."""
    if len(batches) == 1 and len(batches[0]) == len(ids):
        return _rows_of_one(batches[0])
    env_id = np.concatenate([b.env_id for b in batches])
    order = np.argsort(env_id, kind="stable")
    take = order[np.searchsorted(env_id[order], ids)]

    def pick(parts: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
        whole = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return whole[take]  # fancy indexing: a writeable copy

    info: dict[str, Any] = {}
    for key, value in batches[0].info.items():
        if isinstance(value, dict):
            info[key] = {k: pick([b.info[key][k] for b in batches]) for k in value}
        else:
            info[key] = pick([b.info[key] for b in batches])
    return Rows(env_id=pick([b.env_id for b in batches]),
                obs=obs_map(pick, [b.obs for b in batches]),
                reward=pick([b.reward for b in batches]),
                terminated=pick([b.terminated for b in batches]),
                truncated=pick([b.truncated for b in batches]), info=info)


def _rows_of_one(batch: Batch) -> Rows:
    """``_rows`` of one batch holding every env asked for (a lockstep step): each field
    copied once, in env id order (a plain copy when the rows already are, as they mostly
    are with one worker thread)."""
    names = batch._names
    fields = batch.fields()
    ids = fields[4]
    if len(ids) < 2 or bool((ids[1:] > ids[:-1]).all()):
        copied = [f.copy() for f in fields[1:]]
        obs = obs_map(lambda parts: parts[0].copy(), [fields[0]])
    else:
        order = np.argsort(ids, kind="stable")
        copied = [f[order] for f in fields[1:]]
        obs = obs_map(lambda parts: parts[0][order], [fields[0]])
    copied.insert(0, obs)
    info: dict[str, Any] = {}
    final: dict[str, Any] = {}
    for name, value in zip(names[5:], copied[5:], strict=True):
        if name.startswith("final_info."):
            final[name[len("final_info."):]] = value
        else:
            info[name] = value
    if final:
        info["final_info"] = final
    return Rows(env_id=copied[4], obs=copied[0], reward=copied[1], terminated=copied[2],
                truncated=copied[3], info=info)


def obs_map(fn: Callable[[list[npt.NDArray[Any]]], Any], parts: list[Any]) -> Any:
    """``fn(parts)`` for array observations; for the dict / tuple observations of Dict / Tuple
    spaces (process-backed pools), the same per key, keeping the structure."""
    if isinstance(parts[0], dict):
        return {k: fn([p[k] for p in parts]) for k in parts[0]}
    if isinstance(parts[0], tuple):
        return tuple(fn([p[k] for p in parts]) for k in range(len(parts[0])))
    return fn(parts)
