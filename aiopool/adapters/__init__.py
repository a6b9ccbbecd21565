"""Sync adapters: a pool driven in lockstep behind the gymnasium, dm_env and SB3 APIs.

- ``aiopool.adapters.gymnasium``: ``GymnasiumVectorEnv`` / ``make_gymnasium``
- ``aiopool.adapters.dm_env``: ``DmEnvironment`` / ``make_dm`` (needs ``dm-env``)
- ``aiopool.adapters.sb3``: ``Sb3VecEnv`` / ``make_sb3`` (needs ``stable-baselines3``)

Each adapter owns a ``Lockstep``: a pool whose ``batch_size`` is the adapter's ``num_envs``. A
call sends to its envs, waits for exactly their rows (in ``recv_blocking``, GIL released) and
returns them ordered by env id as writeable copies. Resetting only some envs (gymnasium's
``reset_mask``) ends with ``Pool.flush``, which hands out their rows as one short batch.

The copies are the adapters' main cost per call, so the common case takes a short path: a call
whose rows come in one batch (a step's always do) has every field the adapter reads (``Plan``,
worked out once per pool) copied in one native call (``BlockHandle.copies``), straight into env
id order if the rows are not in it already (the calling thread steps some envs itself, see
``Pool._caller_helps``, so they can finish out of order even with one worker), and the
info dict built there too (from ``info_base``). The batches of a process-backed pool, and the
rare calls whose rows come in several batches, are copied in Python (``_rows_in_order``,
``_rows``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..batch import Batch
from ..errors import EnvError, NothingInFlight, WorkerDied
from ..pool import Pool
from ..registry import family_of, make, pool_size
from ..spec import InfoField

__all__ = ["Lockstep", "Plan", "Rows"]

Seeds = int | Sequence[int | None] | None


def render_metadata(pool: Pool) -> dict[str, Any]:
    """What an env's ``metadata`` says of rendering, as gymnasium's env of that id says it:
    the render modes, and where the env renders, the videos' frame rate."""
    out: dict[str, Any] = {"render_modes": ["rgb_array"] if pool.spec.renders else []}
    if pool.spec.renders or pool.spec.render_fps:  # the env's (a Python env's without a mode)
        fps = pool.render_fps  # an int where gymnasium's is one (every id it registers)
        out["render_fps"] = int(fps) if fps.is_integer() else fps
    return out


def reference_method(pool: Pool, name: str) -> Callable[[], Any] | None:
    """The method ``name`` of the reference's env, without arguments, where the pool's family
    answers it for its envs (``NativeFamily.env_methods``: Atari's ``get_action_meanings``)."""
    family = family_of(pool.spec.id) if pool.spec.family is not None else None
    method = None if family is None else family.env_methods.get(name)
    return None if method is None else functools.partial(method, pool.spec.id, pool.spec.config)


def episode_ended(terminated: npt.NDArray[np.bool_], truncated: npt.NDArray[np.bool_],
                  final_info: Mapping[str, Any] | None) -> npt.NDArray[np.bool_]:
    """Rows whose episode ended (and, with ``same_step``, was reset): terminated or truncated,
    less a lost Atari life with ``life_loss_info`` (terminated, but the game goes on: nothing
    is reset, there is no final row, and its ``final_info["elapsed_step"]`` is 0)."""
    ended = terminated | truncated
    if final_info is not None and "elapsed_step" in final_info:
        ended &= final_info["elapsed_step"] > 0
    return ended


def optional_info_keys(fields: Iterable[InfoField],
                       keys: Collection[str] | None = None) -> dict[str, str]:
    """The info keys an env sets on some steps only, each with its mask's key: a bool field
    ``_key`` of one value per row beside ``key`` is True where ``key`` is set (CarRacing's
    ``lap_finished``), as in gymnasium's vector infos. The adapters give such a key only where
    its env set it. ``keys``: only pairs whose both keys are in it (the keys an adapter reads)."""
    by_name = {f.name: f for f in fields}
    pairs: dict[str, str] = {}
    for name in by_name:
        mask = by_name.get(f"_{name}")
        if mask is not None and mask.dtype == np.bool_ and mask.shape == () and (
                keys is None or (name in keys and mask.name in keys)):
            pairs[name] = mask.name
    return pairs


class Rows(NamedTuple):
    """One row per env of a lockstep call, ordered by env id; every array but ``env_id`` (the
    lockstep's own read-only ids, or the ``env_ids`` it was asked for) is a writeable copy, and
    so is ``obs`` unless the lockstep was made with ``copy_obs=False``.

    ``info`` holds the pool's info arrays (``elapsed_step``, ``episode_return``,
    ``episode_length``, family extras; only the adapter's ``info_keys`` if it named some), after
    the entries of the lockstep's ``info_base`` when the call covers every env, and,
    with ``autoreset="same_step"`` when an episode ended, ``final_obs`` and the dict
    ``final_info`` (valid where ``terminated | truncated``; left out when no episode ended).
    """

    env_id: npt.NDArray[np.int32]
    obs: npt.NDArray[Any]
    reward: npt.NDArray[np.float64]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]
    info: dict[str, Any]


class Plan(NamedTuple):
    """Where each key of ``Rows.info`` comes from: indices into ``Batch.fields()``, worked out
    once per pool from its field names; and the same as the arguments of one native copy."""

    info: tuple[tuple[int, str], ...]  # (field, key) of the plain info keys
    final_obs: int | None  # the field of final_obs (same_step)
    final_info: tuple[tuple[int, str], ...]  # (field, key) of final_info's keys (same_step)
    fields: tuple[int, ...]  # obs, reward, terminated, truncated, then those of ``info``
    keys: tuple[str, ...]  # the plain info keys, in field order
    final_fields: tuple[int, ...]  # final_obs (if any), then those of ``final_info``
    final_keys: tuple[str, ...]  # final_info's keys

    @classmethod
    def of(cls, names: Sequence[str], keep: Collection[str] | None) -> Plan:
        info: list[tuple[int, str]] = []
        final_info: list[tuple[int, str]] = []
        final_obs = None
        for i, name in enumerate(names[5:], 5):
            if name.startswith("final_info."):
                final_info.append((i, name[len("final_info."):]))
            elif name == "final_obs":
                final_obs = i
            elif keep is None or name in keep:
                info.append((i, name))
        return cls(tuple(info), final_obs, tuple(final_info),
                   (0, 1, 2, 3, *(i for i, _ in info)), tuple(key for _, key in info),
                   (*(() if final_obs is None else (final_obs,)), *(i for i, _ in final_info)),
                   tuple(key for _, key in final_info))


def refuse_autoreset(make_kwargs: Mapping[str, Any], adapter: str, how: str) -> None:
    """An adapter sets its pool's autoreset itself: ``autoreset=`` among the kwargs that it
    passes to ``aiopool.make`` is an error that says how the adapter resets instead."""
    if "autoreset" in make_kwargs:
        raise TypeError(f"{adapter} sets its pool's autoreset itself: {how}")


class Lockstep:
    """A pool stepped like a sync vector env: each call returns every row it asked for.

    Args:
        env_id, num_envs, seed, autoreset, num_threads: as ``aiopool.make``.
        info_keys: the info keys the adapter reads (default all); the others are not copied.
            A mapping of key to dtype is ``aiopool.make``'s (the info keys a process-backed
            env reports): it goes to the pool, and the adapter reads every key.
        copy_obs: False returns the obs of a call whose rows arrive in env id order as the
            pool's read-only view instead of a copy (``SyncVectorEnv(copy=False)``).
        **make_kwargs: passed on to ``aiopool.make`` (``max_episode_steps``, env kwargs, ...).

    A call interrupted while waiting (Ctrl-C) loses nothing: the rows received so far are
    kept, ``wait`` finishes an interrupted step, and ``reset`` drains whatever is pending.
    ``send`` refuses to run while rows are pending, since the caller has not seen them.

    ``info_base`` (default None) is a dict whose entries start the ``info`` of every call that
    covers all envs, before the values (the gymnasium adapter's all-True ``_key`` masks): the
    native copy builds the adapter's dict in one go.
    """

    def __init__(self, env_id: str | Callable[[], Any], num_envs: int, *, seed: int | None,
                 autoreset: str,
                 num_threads: int | None, info_keys: Collection[str] | None = None,
                 copy_obs: bool = True, **make_kwargs: Any) -> None:
        if "batch_size" in make_kwargs:
            raise TypeError("the sync adapters step every env at once; batch_size is num_envs "
                            "(use aiopool.make for batches smaller than the pool)")
        num_envs = pool_size("num_envs", num_envs)
        self.num_envs = num_envs
        if isinstance(info_keys, Mapping):  # make()'s info_keys, for a process-backed env
            make_kwargs["info_keys"], info_keys = info_keys, None
        self.pool: Pool = make(env_id, num_envs, batch_size=num_envs,
                               num_threads=num_threads, seed=seed, autoreset=autoreset,
                               **make_kwargs)
        self.pool._caller_helps()  # this thread steps envs too while it waits
        self.plan = Plan.of(self.pool._names, info_keys)
        self.copy_obs = copy_obs
        self.info_base: dict[str, Any] | None = None
        self.ever_reset = False
        self._ids = np.arange(num_envs, dtype=np.int32)
        self._ids.flags.writeable = False  # the env_id of every whole-pool Rows
        self._ids_bytes = self._ids.tobytes()
        self._pending: str | None = None  # "reset" or "step" while its rows are awaited
        self._awaiting = 0  # rows of the pending call not yet received
        self._inbox: list[Batch] = []  # batches of the pending call received so far
        # The batches of the last call's rows and the env ids it asked for (``last_obs``).
        self._last: list[Batch] = []
        self._last_ids = self._ids
        self._native_copies = True  # False: copy in Python even where the batch could (tests)

    def reset(self, env_ids: npt.NDArray[np.int32] | None = None,
              seed: Seeds = None) -> Rows:
        """Reset ``env_ids`` (sorted; default all) and return their first rows.

        ``seed``: None continues each env's random stream; an int seeds env ``i`` with
        ``seed + i``; a sequence gives env ``i`` the seed ``seed[i]`` (None: unseeded).
        """
        ids = self._ids if env_ids is None else env_ids
        if seed is not None and not isinstance(seed, int | np.integer):
            if not hasattr(seed, "__len__") or isinstance(seed, str) or (
                    len(seed) != self.num_envs):  # a float, a str, a list of another length
                raise ValueError(f"seed is {seed!r}, expected None, an int or a list of "
                                 f"{self.num_envs} ints or Nones (one per env)")
            seed = [seed[i] for i in ids.tolist()]
        self._drain()
        self._pending, self._awaiting = "reset", len(ids)  # before: see _sent
        self._sent(self.pool.async_reset, seed=seed, env_ids=ids)
        if len(ids) < self.num_envs:
            self.pool.flush()  # the rows of a partial reset, as one short batch
        self.ever_reset = True
        return self._gather(ids)

    def send(self, actions: npt.ArrayLike) -> None:
        """Send one action per env; ``wait`` returns the rows."""
        if self._pending is not None or not self.ever_reset:
            self._check_can_send()
        self._pending, self._awaiting = "step", self.num_envs
        self._sent(self.pool.send, actions, self._ids)

    def wait(self) -> Rows:
        """The rows of the last ``send``, ordered by env id."""
        if self._pending != "step":
            raise RuntimeError("nothing to wait for: send actions first "
                               "(SB3: call step_async() before step_wait())")
        return self._gather(self._ids)

    def step(self, actions: npt.ArrayLike) -> Rows:
        """``send`` then ``wait`` (inlined: this is every adapter's hot path)."""
        if self._pending is not None or not self.ever_reset:
            self._check_can_send()
        self._pending, self._awaiting = "step", self.num_envs
        self._sent(self.pool.send, actions, self._ids)
        batch = self._recv()  # interrupted: nothing received, the step pending
        if len(batch.env_id) < self.num_envs:  # not with batch_size = num_envs; kept general
            self._inbox.append(batch)
            self._awaiting -= len(batch.env_id)
            return self._gather(self._ids)
        self._pending, self._awaiting = None, 0
        return self._rows_of(batch, self._ids)

    @property
    def last_obs(self) -> Any:
        """The obs of the last call's rows, ordered as the env ids it asked for and read-only:
        the pool's batch's own when they came in that order, else a sorted copy (worked out
        only when asked: the caller's obs may have been changed since); None before any."""
        batches, ids = self._last, self._last_ids
        if not batches:
            return None
        if len(batches) == 1 and batches[0].env_id.tobytes() == (
                self._ids_bytes if len(ids) == self.num_envs else ids.tobytes()):
            return batches[0].obs
        return Batch.sorted_concat(batches).obs

    def close(self) -> None:
        self.pool.close()

    # -- internals ------------------------------------------------------------------------

    def _check_can_send(self) -> None:
        if not self.ever_reset:
            raise RuntimeError("step() before reset(): call reset() first")
        raise RuntimeError(
            f"the results of the previous {self._pending} have not all been received (it "
            "was interrupted, or SB3's step_async() was not followed by step_wait()); call "
            "reset(), or step_wait() to receive a pending step")

    def _sent(self, send: Callable[..., None], *args: Any, **kwargs: Any) -> None:
        """``send(*args, **kwargs)`` for the call just made pending. If it raised and nothing
        went out (bad actions; a Ctrl-C before the native send), the call is not pending; a
        Ctrl-C that lands after the native send, in the send's own bookkeeping, leaves it
        pending, so ``wait`` or ``reset`` receives its rows (pending only once the send had
        returned, those rows were in flight unawaited: every later step and reset refused)."""
        try:
            send(*args, **kwargs)
        except BaseException:
            if not self._rows_in_flight():
                self._pending, self._awaiting = None, 0
            raise

    def _rows_in_flight(self) -> bool:
        return bool(self.pool._native.rows_in_flight or self.pool._returned)

    def _drain(self) -> None:
        """Receive and drop the rows of a pending call, and any others in flight, so every env
        is idle again (an env's error among them is dropped too; rows that can never come,
        their envs lost with a worker process, are given up: the reset that follows names
        those envs)."""
        while self._awaiting > 0 or self._rows_in_flight():
            try:
                self._awaiting -= len(self._recv())
            except EnvError:  # _recv counted its batch's rows
                pass
            except NothingInFlight:  # fewer rows than a batch: a partial reset cut short
                try:                     # before its flush, or rows lost with a worker
                    if self.pool.flush() > 0:
                        continue
                except WorkerDied:
                    pass
                break
        self._inbox.clear()
        self._pending, self._awaiting = None, 0

    def _recv(self) -> Batch:
        """A batch of the pending call. An env's error (process backend) comes with its batch,
        whose rows count as received: once the call's rows are all in, it is over, and the
        failed envs reset at their next step, as on a pool."""
        try:
            return self.pool.recv_blocking()
        except EnvError as e:
            self._awaiting -= len(e.batch.env_id)  # type: ignore[attr-defined]
            if self._awaiting <= 0:
                self._inbox, self._pending, self._awaiting = [], None, 0
            raise

    def _gather(self, ids: npt.NDArray[np.int32]) -> Rows:
        batches = self._inbox
        while self._awaiting > 0:
            batch = self._recv()
            batches.append(batch)
            self._awaiting -= len(batch.env_id)
        self._inbox, self._pending = [], None
        if len(batches) == 1:  # mostly
            return self._rows_of(batches[0], ids)
        self._last, self._last_ids = batches, ids
        return _rows(batches, self.plan, self.info_base if len(ids) == self.num_envs else None)

    def _rows_of(self, batch: Batch, ids: npt.NDArray[np.int32]) -> Rows:
        """The rows of one batch that holds exactly the envs ``ids``."""
        self._last, self._last_ids = [batch], ids
        whole = len(ids) == self.num_envs
        base = self.info_base if whole else None
        # A native batch copies itself, and puts the rows of a whole pool in env id order
        # whatever order they came in; a process-backed pool's batch cannot.
        copies = getattr(batch._handle, "copies", None) if self._native_copies else None
        if copies is not None and whole and self.copy_obs:  # a step's, mostly
            return _rows_copied(copies, batch.obs, ids, self.plan, True, base, True)
        in_order = batch.env_id.tobytes() == (self._ids_bytes if whole else ids.tobytes())
        if copies is not None and (in_order or whole):  # copy_obs=False, or a subset in order
            rows = _rows_copied(copies, batch.obs, ids, self.plan,
                                self.copy_obs or not in_order, base, not in_order)
            if not self.copy_obs and not in_order:  # a sorted copy stands in for the view:
                rows.obs.flags.writeable = False  # read-only as the view would be
            return rows
        if in_order:
            return _rows_in_order(batch, ids, self.plan, self.copy_obs, base)
        return _rows([batch], self.plan, base)


def _rows_copied(copies: Callable[..., tuple[Any, ...]], obs: Any,
                 ids: npt.NDArray[np.int32], plan: Plan, copy_obs: bool,
                 base: dict[str, Any] | None, by_env_id: bool) -> Rows:
    """``_rows_in_order`` in one native call, ``copies`` (``BlockHandle.copies`` of the batch,
    whose obs are ``obs``), or with ``by_env_id`` ``_rows`` of one batch holding every env of
    its pool (sorted on the way): each field the plan names copied once, the info dict built
    from ``base`` on the way; the final fields only if an episode ended. Without
    ``copy_obs`` (and ``by_env_id``), the obs are ``obs``."""
    if copy_obs:
        obs, reward, terminated, truncated, info = copies(plan.fields, plan.keys, base,
                                                          by_env_id)
    else:  # in order: the obs are the batch's own view
        reward, terminated, truncated, info = copies(plan.fields[1:], plan.keys, base)
    if plan.final_fields and (np.count_nonzero(terminated) or np.count_nonzero(truncated)):
        *final_obs, final_info = copies(plan.final_fields, plan.final_keys, None, by_env_id)
        if final_obs:
            info["final_obs"] = final_obs[0]
        if plan.final_info:
            info["final_info"] = final_info
    # tuple.__new__: a NamedTuple's own __new__ is a Python function, a call more per step.
    return tuple.__new__(Rows, (ids, obs, reward, terminated, truncated, info))


def _rows_in_order(batch: Batch, ids: npt.NDArray[np.int32], plan: Plan,
                   copy_obs: bool = True, base: dict[str, Any] | None = None) -> Rows:
    """The rows of a batch that holds exactly ``ids``, in that order (a lockstep step
    mostly is one): each field the plan names copied once (the obs only if ``copy_obs``), and
    the final ones only if an episode ended. ``info`` starts with the entries of ``base``."""
    f = batch.fields()
    obs = f[0]
    info: dict[str, Any] = {} if base is None else base.copy()
    info.update((key, f[i].copy()) for i, key in plan.info)
    terminated, truncated = f[2], f[3]
    if (plan.final_info or plan.final_obs is not None) and (
            np.count_nonzero(terminated) or np.count_nonzero(truncated)):
        if plan.final_obs is not None:
            info["final_obs"] = obs_map(_copy, [f[plan.final_obs]])
        if plan.final_info:
            info["final_info"] = {key: f[i].copy() for i, key in plan.final_info}
    if copy_obs:
        obs = obs.copy() if type(obs) is np.ndarray else obs_map(_copy, [obs])
    return Rows(ids, obs, f[1].copy(), terminated.copy(), truncated.copy(), info)


def _rows(batches: list[Batch], plan: Plan, base: dict[str, Any] | None = None) -> Rows:
    """The rows of ``batches`` (one per env asked for, in any order) ordered by env id, each
    field the plan names gathered once (a writeable copy): the general form of
    ``_rows_in_order``."""
    if len(batches) == 1:
        f = batches[0].fields()
    else:
        f = tuple(obs_map(np.concatenate, list(parts))
                  for parts in zip(*(b.fields() for b in batches), strict=True))
    order = f[4].argsort(kind="stable")
    info: dict[str, Any] = {} if base is None else base.copy()
    info.update((key, f[i][order]) for i, key in plan.info)
    terminated, truncated = f[2][order], f[3][order]
    if (plan.final_info or plan.final_obs is not None) and (
            np.count_nonzero(terminated) or np.count_nonzero(truncated)):
        if plan.final_obs is not None:
            info["final_obs"] = obs_map(lambda parts: parts[0].take(order, axis=0),
                                        [f[plan.final_obs]])
        if plan.final_info:
            info["final_info"] = {key: f[i][order] for i, key in plan.final_info}
    obs = f[0]
    obs = (obs.take(order, axis=0) if type(obs) is np.ndarray  # faster than obs[order]
           else obs_map(lambda parts: parts[0].take(order, axis=0), [obs]))
    return Rows(f[4][order], obs, f[1][order], terminated, truncated, info)


def _copy(parts: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    return parts[0].copy()


def obs_map(fn: Callable[[list[npt.NDArray[Any]]], Any], parts: list[Any]) -> Any:
    """``fn(parts)`` for array observations; for the dict / tuple observations of Dict / Tuple
    spaces (process-backed pools), the same per key, keeping the structure."""
    if isinstance(parts[0], dict):
        return {k: fn([p[k] for p in parts]) for k in parts[0]}
    if isinstance(parts[0], tuple):
        return tuple(fn([p[k] for p in parts]) for k in range(len(parts[0])))
    return fn(parts)
