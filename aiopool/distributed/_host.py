"""The host side: one async Ray actor owns one aiopool pool (its envs, its threads).

Runs on the actor's asyncio loop (Ray's "AsyncIO Thread"), where the pool's eventfd is awaited
as it is in any process; nothing here blocks that loop except ``flush``, which waits in C++ with
the GIL released, as ``Pool.flush`` does.

One method does the work: ``call((gen, seq, op, env_ids, payload, recv, life))``. Its first
part (send actions, reset envs, replace the pool, flush) runs strictly in ``seq`` order within a
generation, whatever order Ray starts the coroutines in; its second part, when ``recv`` is set,
awaits the pool's next batch and returns it. The driver keeps the counts right: every batch a
``recv`` call waits for is covered by rows already sent, so the pool never raises
``NothingInFlight`` here.
A generation is one life of the host's envs: the driver starts the next one with ``RECOVER``
after a failure, and calls of older generations are refused (``StaleCall``). A call also names
the actor's life it was meant for (``incarnation``; None while the driver does not know it
yet): an actor that Ray restarted while the driver had nothing in flight there refuses the
calls meant for its previous life (``NewLife``), so the driver starts a generation instead of
the call waiting for turns that went with the old life.

Rollout mode (``set_policy`` / ``set_weights`` / ``fragment``): the actor runs the policy over
its envs itself and returns ``T`` steps of all of them in one reply, lockstep when one batch
holds every env (best for cheap envs), else as a stream of batches. Fragments too carry
``(gen, seq)`` and run one at a time in ``seq`` order: each continues the one before, and Ray
may start an async actor's coroutines in another order than they were sent.

Env ids are local (``0 .. num_envs - 1``) on the way in; returned batches carry global ids
(``offset + local``), so the driver never touches them. The returned fields are the pool's own
views; Ray copies them once into the reply (or the object store, from 100 KiB) and the driver
gets read-only views of that copy.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import os
import uuid
import warnings
from typing import Any

import numpy as np
import numpy.typing as npt

import aiopool


class Op(enum.IntEnum):
    """What a call does before its optional recv (the values travel over Ray)."""

    NONE = 0      # only recv
    SEND = 1      # payload: actions
    RESET = 2     # payload: None or one seed (int or None) per env id
    RECOVER = 3   # begin a generation: a fresh pool unless this life's pool is still unused
    FLUSH = 4     # payload: timeout; returns (rows, fields or None)


class StaleCall(RuntimeError):
    """A call of a generation the driver has given up on (it never reaches the user)."""


class _Turns:
    """Calls that run one at a time in ``seq`` order within a generation, whatever order they
    start in; a newer generation (the driver gave up on the calls in flight) starts at 0 and
    the waiting calls of older ones raise ``StaleCall``."""

    def __init__(self) -> None:
        self.gen = 0
        self.next = 0
        self._waiting: dict[tuple[int, int], asyncio.Future[None]] = {}

    async def wait(self, gen: int, seq: int) -> None:
        if gen > self.gen:
            self.gen, self.next = gen, 0
            self._wake_all()
        while not (gen == self.gen and seq == self.next):
            if gen < self.gen:
                raise StaleCall(f"generation {gen} is over (now {self.gen})")
            fut = asyncio.get_running_loop().create_future()
            self._waiting[(gen, seq)] = fut
            try:
                await fut
            except asyncio.CancelledError:  # cancelled as its turn came: pass the turn on
                self.done(gen, seq)
                raise
            finally:
                self._waiting.pop((gen, seq), None)

    def done(self, gen: int, seq: int) -> None:
        if (gen, seq) == (self.gen, self.next):
            self.next += 1
            fut = self._waiting.get((gen, self.next))
            if fut is not None and not fut.done():
                fut.set_result(None)

    def _wake_all(self) -> None:
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_result(None)


class NewLife(RuntimeError):
    """A call meant for the actor's previous life: Ray restarted it since the driver heard from
    it (the driver starts a new generation, as after any failure)."""


class PoolHost:
    """Owns one aiopool pool inside a Ray actor. Wrap with ``ray.remote`` (see ``pool.py``).

    A restarted actor (Ray re-runs this constructor) makes its pool with fresh entropy instead
    of ``seed``: re-seeding would replay the episodes its envs already played.
    """

    def __init__(self, env_id: Any, num_envs: int, batch_size: int, offset: int,
                 seed: int | None, make_kwargs: dict[str, Any]) -> None:
        self._make_args = (env_id, num_envs, batch_size, make_kwargs)
        self._offset = np.int32(offset)
        self._calls = _Turns()  # the first parts of `call`; RECOVER is call 0 of a generation
        self.incarnation = uuid.uuid4().hex
        self.reconstructed = _was_reconstructed()
        self._error: BaseException | None = None
        self._policy: Any = None
        self._weights: tuple[Any, int] | None = None  # pushed, applied at the next fragment
        self._version = 0
        self._rolling = asyncio.Lock()
        self._fragments = _Turns()
        self._policy_set = asyncio.Event()
        try:
            self._new_pool(None if self.reconstructed else seed)
        except Exception as e:  # reported by describe(): a constructor error kills the actor
            self._error = e

    _obs: npt.NDArray[Any] | None  # rollout mode: the obs the next actions are taken on

    def _new_pool(self, seed: int | None) -> None:
        env_id, num_envs, batch_size, make_kwargs = self._make_args
        self._pool = aiopool.make(env_id, num_envs=num_envs, batch_size=batch_size, seed=seed,
                                  **make_kwargs)
        self._fresh = np.ones(num_envs, dtype=bool)  # never reset by this pool
        self._used = False
        self._obs = None

    # -- what the driver asks once ----------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        if self._error is not None:
            raise self._error
        pool = self._pool
        native_spec = getattr(pool, "_native", None)
        spec_dict = getattr(native_spec, "spec", {}) if native_spec is not None else {}
        return {"spec": pool.spec, "field_names": tuple(pool._names),
                "num_envs": pool.num_envs, "batch_size": pool.batch_size,
                "num_threads": getattr(pool, "num_threads", None), "backend": pool.backend,
                "autoreset": pool.autoreset, "max_seed": int(spec_dict.get("max_seed", -1)),
                "render_fps": pool.render_fps if pool.render_mode is not None else 0.0,
                "pid": os.getpid(), "incarnation": self.incarnation,
                "reconstructed": self.reconstructed}

    def pid(self) -> int:
        return os.getpid()

    def env_error(self, env_id: int) -> str:
        return self._pool.env_error(env_id)

    async def render(self, env_ids: npt.NDArray[np.int32]) -> npt.NDArray[np.uint8]:
        """The frames of this actor's envs ``env_ids`` (its pool's ``arender``)."""
        return await self._pool.arender(env_ids)

    def close(self) -> None:
        self._pool.close()

    # -- the per-batch call -----------------------------------------------------------------

    async def call(self, msg: tuple[int, int, int, npt.NDArray[np.int32] | None, Any, bool,
                                    str | None]) -> Any:
        """``msg`` is ``(gen, seq, op, env_ids, payload, recv, life)``: one argument, so Ray
        serializes one object per call (it serializes each argument on its own). RECOVER
        returns this life's ``incarnation``."""
        gen, seq, op, env_ids, payload, recv, life = msg
        self._check_life(life)
        await self._calls.wait(gen, seq)
        if op != Op.RECOVER:
            self._used = True
        rows = 0
        try:
            if op == Op.SEND:
                assert env_ids is not None
                self._send(payload, env_ids)
            elif op == Op.RESET:
                assert env_ids is not None
                self._pool.async_reset(seed=payload, env_ids=env_ids)
                self._fresh[env_ids] = False
            elif op == Op.RECOVER:
                self._recover()
            elif op == Op.FLUSH:
                rows = self._pool.flush(payload)
        finally:
            self._calls.done(gen, seq)
        if op == Op.FLUSH:
            return rows, (self._pack(await self._pool.recv()) if rows > 0 else None)
        if op == Op.RECOVER:
            return self.incarnation
        if not recv:
            return None
        return self._pack(await self._pool.recv())

    def _check_life(self, life: str | None) -> None:
        if life is not None and life != self.incarnation:
            raise NewLife("this pool actor was restarted since the driver last heard from it "
                          "(its envs start over)")

    def _recover(self) -> None:
        """Begin a generation: the driver gave up on every env step in flight here."""
        if self._used:  # the same life as before the failure: start over with fresh envs
            self._pool.close()
            self._new_pool(None)

    def _send(self, actions: Any, env_ids: npt.NDArray[np.int32]) -> None:
        fresh = self._fresh[env_ids]
        if fresh.any():  # this life's pool never reset them (a restart): they reset instead
            self._pool.async_reset(env_ids=env_ids[fresh])
            self._fresh[env_ids[fresh]] = False
            keep = ~fresh
            env_ids, actions = env_ids[keep], np.asarray(actions)[keep]
        if len(env_ids):
            self._pool.send(actions, env_ids)

    def _pack(self, batch: aiopool.Batch) -> tuple[Any, ...]:
        fields = list(batch.fields())
        fields[4] = fields[4] + self._offset  # global env ids (int32 + int32)
        return tuple(fields)

    # -- rollout mode: the policy runs here, fragments of T steps go back -------------------

    def set_policy(self, policy: Any) -> str:
        """Ray resolves the policy's ObjectRef before running this, so a ``fragment`` call
        sent after it may start first: it waits for ``_policy_set``. Returns this life's
        ``incarnation``."""
        self._policy = policy
        self._policy_set.set()
        return self.incarnation

    def set_weights(self, weights: Any, version: int) -> None:
        newest = self._version if self._weights is None else self._weights[1]
        if version > newest:  # pushes may arrive in any order: keep the newest
            self._weights = (weights, version)

    async def fragment(self, horizon: int, gen: int, seq: int,
                       life: str | None = None) -> dict[str, Any]:
        """``horizon`` steps of every env here under the policy, as (T, n) arrays; weights
        pushed meanwhile apply from the next fragment on. Fragment ``seq`` of the driver's
        generation ``gen`` starts where fragment ``seq - 1`` ended; ``life``: as in ``call``.

        The envs run as a stream, not in lockstep: each batch's rows go into their envs'
        own next time slot and get their next actions at once, so the policy of one batch
        overlaps the stepping of the others. Envs that have their ``horizon`` steps wait for
        the rest (the last short batches are flushed out)."""
        self._check_life(life)
        await self._fragments.wait(gen, seq)
        try:
            async with self._rolling:  # a fragment of a generation given up on may still run
                if gen > 0 and seq == 0 and self._used:
                    # The driver gave up on this life's fragments in flight (it lost their
                    # replies): fresh episodes, as after a restart, not a silent gap.
                    self._pool.close()
                    self._new_pool(None)
                await self._policy_set.wait()
                if self._weights is not None:
                    weights, self._version = self._weights
                    self._weights = None
                    self._policy.set_weights(weights)
                try:
                    return await self._fragment(horizon)
                except BaseException:  # envs left mid-step: start over with fresh ones next
                    self._pool.close()
                    self._new_pool(None)
                    raise
        finally:
            self._fragments.done(gen, seq)

    async def _fragment(self, horizon: int) -> dict[str, Any]:
        pool = self._pool
        self._used = True
        n = pool.num_envs
        cur = self._obs if self._obs is not None else await self._first_obs()
        all_ids = np.arange(n, dtype=np.int32)
        if pool.batch_size == n:
            return await self._lockstep(horizon, cur, all_ids)
        t = np.zeros(n, dtype=np.int64)
        # Per batch only what the next send needs; rows are put in place at the end (the
        # batches' blocks stay alive until then: no copy before the one scatter per field).
        rows: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int32], tuple[Any, ...]]]
        rows = []
        act = await self._act(cur)
        acted = [(t.copy(), all_ids, cur.copy(), act)]
        pool.send(act, all_ids)
        left = n * horizon
        while left:
            batch = await self._recv_or_flush()
            ids = batch.env_id
            slot = t[ids]
            rows.append((slot, ids, batch.fields()))
            nxt = slot + 1
            t[ids] = nxt
            left -= len(ids)
            more = nxt < horizon
            if more.all():
                go, o, at = ids, batch.obs, nxt
            elif more.any():
                go, o, at = ids[more], batch.obs[more], nxt[more]
            else:
                continue
            a = await self._act(o)
            acted.append((at, go, o, a))
            pool.send(a, go)
        slots = np.concatenate([r[0] for r in rows])
        ids = np.concatenate([r[1] for r in rows])
        columns: dict[str, npt.NDArray[Any]] = {}
        for k, name in enumerate(pool._names):
            if name == "env_id":
                continue
            part = np.concatenate([r[2][k] for r in rows])
            if name == "obs":  # the obs after each env's last step: the next start
                last = slots == horizon - 1
                cur[ids[last]] = part[last]
                continue
            columns[name] = np.empty((horizon, n, *part.shape[1:]), part.dtype)
            columns[name][slots, ids] = part
        at = np.concatenate([r[0] for r in acted])
        go = np.concatenate([r[1] for r in acted])
        obs = np.empty((horizon, *cur.shape), dtype=cur.dtype)
        obs[at, go] = np.concatenate([r[2] for r in acted])
        first = acted[0][3]
        actions = np.empty((horizon, *first.shape), dtype=first.dtype)
        actions[at, go] = np.concatenate([r[3] for r in acted])
        self._obs = cur
        return {"obs": obs, "actions": actions, "next_obs": cur.copy(),
                "env_id": all_ids + self._offset, "fields": columns,
                "policy_version": self._version, "life": self.incarnation}

    async def _lockstep(self, horizon: int, cur: npt.NDArray[Any],
                        all_ids: npt.NDArray[np.int32]) -> dict[str, Any]:
        """One batch is every env (``batch_size == num_envs``), the loop for cheap envs: per
        step, the policy on the batch's obs (every env, in env order), the send (the envs
        step from here on), then, while they step, the batch's rows copied into row ``t`` of
        buffers made once per fragment. Nothing else runs per step: no sorting, no arrays
        but the batch's own views. Rows come in finish order; when that is not env order
        (several threads), they are scattered by env id before the policy sees them."""
        pool, policy, recv, send = self._pool, self._policy, self._pool.recv, self._pool.send
        in_order = all_ids.tobytes()
        keep = [k for k, name in enumerate(pool._names) if name not in ("obs", "env_id")]
        obs = np.empty((horizon + 1, *cur.shape), cur.dtype)  # row T: the next fragment's start
        obs[0] = cur
        act = await self._act(obs[0])
        actions = np.empty((horizon, *act.shape), act.dtype)
        actions[0] = act
        send(act, all_ids)
        columns: list[tuple[npt.NDArray[Any], int]] = []
        for t in range(horizon):
            fields = (await recv()).fields()
            more = t + 1 < horizon
            if not columns:
                columns = [(np.empty((horizon, *fields[k].shape), fields[k].dtype), k)
                           for k in keep]
            ids = fields[4]
            ordered = ids.tobytes() == in_order
            if not ordered:  # the policy sees every env in env order: put the rows in place
                obs[t + 1][ids] = fields[0]
            if more:
                act = policy(fields[0] if ordered else obs[t + 1])
                if not isinstance(act, np.ndarray):
                    act = np.asarray(await act if inspect.isawaitable(act) else act)
                send(act, all_ids)
                actions[t + 1] = act
            if ordered:
                obs[t + 1] = fields[0]
                for col, k in columns:
                    col[t] = fields[k]
            else:
                for col, k in columns:
                    col[t][ids] = fields[k]
        self._obs = obs[horizon].copy()
        return {"obs": obs[:horizon], "actions": actions, "next_obs": obs[horizon],
                "env_id": all_ids + self._offset,
                "fields": {pool._names[k]: col for col, k in columns},
                "policy_version": self._version, "life": self.incarnation}

    async def _first_obs(self) -> npt.NDArray[Any]:
        """Reset every env (a fresh pool: seeded as made) and gather the observations."""
        pool = self._pool
        pool.async_reset()
        first: npt.NDArray[Any] | None = None
        got = 0
        while got < pool.num_envs:
            batch = await self._recv_or_flush()
            if first is None:
                first = np.empty((pool.num_envs, *batch.obs.shape[1:]), batch.obs.dtype)
            first[batch.env_id] = batch.obs
            got += len(batch)
        assert first is not None
        return first

    async def _act(self, obs: npt.NDArray[Any]) -> npt.NDArray[Any]:
        act = self._policy(obs)
        if inspect.isawaitable(act):
            act = await act
        return np.asarray(act)

    async def _recv_or_flush(self) -> aiopool.Batch:
        """The next batch; when the rows in flight fill no batch, the short one they make."""
        try:
            return await self._pool.recv()
        except aiopool.NothingInFlight:
            if self._pool.flush() <= 0:
                raise
            return await self._pool.recv()


def _was_reconstructed() -> bool:
    import ray

    with warnings.catch_warnings():  # Ray 2.60 warns from inside this property
        warnings.simplefilter("ignore")
        return bool(ray.get_runtime_context().was_current_actor_reconstructed)
