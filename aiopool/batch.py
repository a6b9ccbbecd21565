"""Batch: one block of finished env steps, as read-only zero-copy numpy views.

Lifetime: the arrays of a batch share one owner in C++. The block goes back to the pool's free
list only when the last array of the batch is dropped, so a batch you keep (a replay buffer,
another task) is never overwritten, even after the pool is closed. Arrays are read-only;
``np.array(batch.obs)`` makes a writeable copy.

Holding: from the moment a receive hands a batch to a task until its actions are sent
(``send``), it is released (``release()``) or the Batch object is dropped, the pool counts its
envs as ones that task may still send, so other receivers wait for them (see ``Pool.recv``).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ._holders import SENT, Token

if TYPE_CHECKING:
    from .pool import Pool


class Batch:
    """``batch_size`` env steps, in the order the envs finished.

    Attributes:
        obs: observations, shape ``(batch_size, *obs_shape)``.
        reward: float64 rewards.
        terminated: bool, the episode ended in a terminal state.
        truncated: bool, the episode hit the time limit (or the env truncated it).
        env_id: int32 id of the env each row came from.
        info: dict of arrays: ``elapsed_step``, ``episode_return`` and ``episode_length``
            (totals of the current episode including this step; the ended episode's where
            ``terminated | truncated``), family extras, and with ``autoreset="same_step"``
            ``final_obs`` and ``final_info`` (valid where the episode ended). An extra that
            the env sets on some steps only comes with its mask, as in gymnasium's vector
            infos: ``_lap_finished`` is True where CarRacing's ``lap_finished`` was set.

    Example:
        >>> batch = await pool.recv()
        >>> batch.send(policy(batch.obs))        # the same as pool.send(actions, batch.env_id)
    """

    __slots__ = ("__weakref__", "_fields", "_handle", "_info", "_names", "_pool", "_sent",
                 "_token", "env_id", "obs", "reward", "terminated", "truncated")

    def __init__(self, arrays: tuple[Any, ...], names: tuple[str, ...],
                 pool: weakref.ReferenceType[Pool]) -> None:
        # arrays: (obs, reward, terminated, truncated, env_id, handle) from the native take();
        # the handle makes the other fields on demand and owns the block.
        self.obs, self.reward, self.terminated, self.truncated, self.env_id, self._handle = arrays
        self._fields: tuple[npt.NDArray[Any], ...] | None = None
        self._names = names
        self._info: dict[str, Any] | None = None
        self._pool = pool
        # While handed out and not sent: its token in the pool's count of held rows (a weak
        # reference to it, whose callback releases its rows if it is dropped unsent).
        self._token: Token | None = None
        self._sent = False  # its send() is refused from then on

    def fields(self) -> tuple[npt.NDArray[Any], ...]:
        """Every field of the batch, in the native layout's order (see ``Pool.field_names``)."""
        if self._fields is None:
            head = (self.obs, self.reward, self.terminated, self.truncated, self.env_id)
            rest = tuple(map(self._handle.array, range(len(head), len(self._names))))
            self._fields = head + rest
        return self._fields

    @property
    def info(self) -> dict[str, Any]:
        if self._info is None:
            info: dict[str, Any] = {}
            final: dict[str, Any] = {}
            for name, arr in zip(self._names[5:], self.fields()[5:], strict=True):
                if name.startswith("final_info."):
                    final[name[len("final_info."):]] = arr
                else:
                    info[name] = arr
            if final:
                info["final_info"] = final
            self._info = info
        return self._info

    def __len__(self) -> int:
        return len(self.env_id)

    def __repr__(self) -> str:
        return f"Batch(size={len(self)}, env_id={self.env_id.tolist()})"

    def send(self, actions: npt.ArrayLike) -> None:
        """Send one action per row to the envs of this batch: ``pool.send(actions, env_id)``.

        Once per batch: a second send raises ``ValueError`` (it would step the envs on
        observations they have left; the envs may be idle again by then, so the pool alone
        could not tell). A released batch may still be sent, once.
        """
        pool = self._pool()
        if pool is None:
            from .errors import PoolClosed

            raise PoolClosed("the pool of this batch no longer exists")
        if self._sent:
            pool._check_open()  # a closed pool says so first, as for any send
            raise ValueError(f"this batch (env_id {self.env_id.tolist()}) was already sent: its "
                             "envs' next results come in a later batch; pool.send(actions, "
                             "batch.env_id) sends to its envs again")
        pool._send(actions, self.env_id)
        self._sent = True
        # Its rows are no longer held by anyone, as after pool.send(actions, env_id): the batch
        # itself when it holds every row still (one pop); else, per env, whichever newer batch
        # holds the rows of its envs (some were sent already, or it was released: a send to
        # an env is the newer batch's).
        token, self._token = self._token, None
        held = pool._holders.sent(token, None) if token is not None else None
        if (held is None or held[SENT] is not None) and pool._holders:
            pool._holders.sent_ids(self.env_id)

    def _moved(self) -> Batch:
        """The same rows in a new Batch object, handed to nobody: a batch given back by a
        cancelled receiver goes on in a new object, since the cancelled task's traceback may
        keep the old one alive (a receiver that drops the batch must really drop it)."""
        new = Batch.__new__(Batch)
        new.obs, new.reward, new.terminated, new.truncated = (
            self.obs, self.reward, self.terminated, self.truncated)
        new.env_id, new._handle, new._fields, new._info = (
            self.env_id, self._handle, self._fields, self._info)
        new._names, new._pool, new._token, new._sent = self._names, self._pool, None, False
        return new

    def release(self) -> None:
        """Say that this task will not send this batch's actions (it keeps the arrays).

        Receivers of other tasks then stop waiting for these envs: one that no other batch
        can serve gets ``NothingInFlight`` instead of waiting. Dropping the batch does the
        same. The envs stay idle; ``pool.send`` to them later is fine.
        """
        if self._token is not None:
            token, self._token = self._token, None
            pool = self._pool()
            if pool is not None:
                pool._holders.release(token)

    @classmethod
    def sorted_concat(cls, batches: list[Batch]) -> Batch:
        """One batch of all rows of ``batches``, ordered by env_id (a copy)."""
        first = batches[0]
        env_id = np.concatenate([b.env_id for b in batches])
        order = np.argsort(env_id, kind="stable")
        columns = zip(*(b.fields() for b in batches), strict=True)
        fields: list[Any] = [_sorted(parts, order) for parts in columns]
        out = cls((*fields[:5], None), first._names, first._pool)
        out._fields = tuple(fields)
        return out


def _sorted(parts: tuple[Any, ...], order: npt.NDArray[np.intp]) -> Any:
    """The rows of ``parts`` (arrays, or the dicts / tuples of arrays of Dict / Tuple
    observations) concatenated and put in ``order``, read-only."""
    if isinstance(parts[0], dict):
        return {k: _sorted(tuple(p[k] for p in parts), order) for k in parts[0]}
    if isinstance(parts[0], tuple):
        return tuple(_sorted(tuple(p[k] for p in parts), order) for k in range(len(parts[0])))
    a = (parts[0] if len(parts) == 1 else np.concatenate(parts))[order]
    a.flags.writeable = False
    return a


Parts = Sequence[tuple[str | int, tuple[int, ...]]]


def splitter(parts: Parts, names: Sequence[str], dtypes: Sequence[npt.DTypeLike] = (),
             ) -> Callable[[tuple[Any, ...]], tuple[Any, ...]] | None:
    """For a native env whose observation is a Tuple / Dict (``EnvSpec.obs_parts``), the
    function that turns the arrays of a taken block, ``(obs, reward, terminated, truncated,
    env_id, handle)``, into the same with ``obs`` a tuple / dict of read-only views of each
    part, and a handle whose ``final_obs`` field (``autoreset="same_step"``) is split alike.
    None for an array observation.

    The row holds the parts one after another, so each part is a view of its columns:
    ``obs[:, start]`` for a scalar (Discrete) part, ``obs[:, start:end]`` reshaped for a Box.
    Where the parts' ``dtypes`` differ (MuJoCo's ``obs_type="state+pixels"``: float64 state,
    uint8 frames), the row is their bytes and each part is a view of its bytes as its dtype.
    """
    if not parts:
        return None
    kinds = {np.dtype(d) for d in dtypes}
    as_bytes = len(kinds) > 1
    slices: list[tuple[str | int, int | slice, tuple[int, ...], np.dtype[Any] | None]] = []
    start = 0
    for i, (key, shape) in enumerate(parts):
        size = math.prod(shape)
        if as_bytes:
            dtype = np.dtype(dtypes[i])
            slices.append((key, slice(start, start + size * dtype.itemsize), shape, dtype))
            start += size * dtype.itemsize
        else:
            slices.append((key, start if shape == () else slice(start, start + size), shape, None))
            start += size
    as_tuple = all(isinstance(key, int) for key, _ in parts)

    def view(flat: npt.NDArray[Any], at: int | slice, shape: tuple[int, ...],
             dtype: np.dtype[Any] | None) -> npt.NDArray[Any]:
        if dtype is not None:
            return flat[:, at].view(dtype).reshape((len(flat), *shape))
        if isinstance(at, int) or len(shape) == 1:
            return flat[:, at]
        return flat[:, at].reshape((len(flat), *shape))

    def split_obs(flat: npt.NDArray[Any]) -> Any:
        views = ((key, view(flat, at, shape, dtype)) for key, at, shape, dtype in slices)
        if as_tuple:
            return tuple(v for _, v in views)
        return dict(views)

    final = names.index("final_obs") if "final_obs" in names else -1

    def split(arrays: tuple[Any, ...]) -> tuple[Any, ...]:
        obs, reward, terminated, truncated, env_id, handle = arrays
        return (split_obs(obs), reward, terminated, truncated, env_id,
                _SplitHandle(handle, split_obs, final))

    return split


class _SplitHandle:
    """A block's handle (it owns the block) whose ``final_obs`` field is split as the obs are.
    It has no native ``copies``: the sync adapters copy such batches per part, in Python."""

    __slots__ = ("_final", "_handle", "_split")

    def __init__(self, handle: Any, split: Callable[[npt.NDArray[Any]], Any],
                 final: int) -> None:
        self._handle, self._split, self._final = handle, split, final

    def array(self, field: int) -> Any:
        arr = self._handle.array(field)
        return self._split(arr) if field == self._final else arr
