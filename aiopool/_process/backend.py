"""The pool side of the process backend: the same interface as a native pool, so ``Pool`` (its
wait ladder, doorbell, stream, step, cancellation rules) runs unchanged on top of it.

Data path, per env step: ``send`` writes the action into the env's shared-memory row and queues
the env id in its worker's inbox, then rings that worker's eventfd (①–②). The worker steps the
env and writes obs / reward / ... straight into the env's shared rows (③), pushes the id to its
outbox, and rings the pool's eventfd: the doorbell ``Pool`` already watches (④–⑤). ``take``
collects finished ids from the outboxes in the order it sees them and, once ``batch_size`` are
there, gathers their rows into fresh arrays (one native call, ``_core._take_rows``) that
become the ``Batch`` (⑥).

Why rows are gathered and not claimed in a shared block as native workers do: a row claim in
a block that several processes fill makes a killed worker leave a hole that stalls the block
for every env in it. Here a worker's only commit is one store of its outbox tail, so a kill at
any instant loses exactly the envs whose ids it had not pushed, and nothing else. The gather
costs ~7 µs per batch of 16 CartPole rows (a probe's wall time, load ~1).

Threads: every method runs on the thread that owns the ``Pool`` (its loop thread or the sync
adapter's), except ``_watch``, a daemon thread that only waits on the workers' pidfds (and
their step deadlines), records deaths, and rings the doorbell so a waiting ``recv`` wakes.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import mmap
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._native import _core
from ..errors import EnvError, WorkerDied
from .layout import ENV_ERROR, RESET, RESET_SEEDED, STEP, Layout, Plan

_EFD_ONE = (1).to_bytes(8, sys.byteorder)
_BUSY, _FRESH, _ENDED, _LOST, _DRAWING = 1, 2, 4, 8, 16
_READY_TIMEOUT_S = 120.0
_log = logging.getLogger("aiopool")


class _Worker:
    """One worker process and the pool-side ends of its channels."""

    def __init__(self, index: int, env_ids: list[int]) -> None:
        self.index = index
        self.env_ids = env_ids
        self.inbox_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pidfd = -1
        self.generation = 0
        self.started = 0.0
        self.quick_deaths = 0  # deaths in a row within 1 s of starting, or before it was ready
        self.ready_r = -1  # a restarted worker's ready pipe, read when it dies
        self.restarts = 0
        self.render: socket.socket | None = None  # a rendering pool's line to this process


class ProcessNative:
    """Envs made by ``factory`` in ``num_workers`` processes, behind the native pool's interface
    (``send``, ``reset``, ``take``, ``arm``/``drain``/``fileno``, ``wait``, ``flush``, ...)."""

    def __init__(self, factory_bytes: bytes, plan: Plan, *, env_id: str, batch_size: int,
                 autoreset: str, spin_us: float, restart: bool, step_timeout: float | None,
                 raise_env_errors: bool, spec: dict[str, Any], render: bool = False) -> None:
        self.num_envs = plan.num_envs
        self.batch_size = batch_size
        self.num_threads = plan.num_workers
        self.spec = spec
        self.env_id = env_id
        self._plan = plan
        self._factory = factory_bytes
        self._autoreset = autoreset
        self._spin_us = spin_us
        self._restart = restart
        self._step_timeout = step_timeout
        self._raise_env_errors = raise_env_errors
        self._renders = render
        self._hung: dict[tuple[int, int], str] = {}  # (worker, generation) killed as hung
        self.field_names = _field_names(plan)
        n = plan.num_envs
        # Per env, what refuses a command (one gather checks them all): _BUSY, sent and not
        # yet taken; _FRESH, never reset; _ENDED, its episode ended with autoreset="disabled";
        # _LOST, its worker died and was not restarted.
        self._flags = np.full(n, _FRESH, dtype=np.uint8)
        self._ready: list[int] = []  # finished, not yet taken, in the order they were seen
        # The batches flush published, oldest first, at the head of _ready: each flush cuts
        # the whole batches it finds and one short batch, taken in that order, as the native
        # pool's blocks are (a second flush before the first short batch is taken publishes
        # a second short batch, not one merged with the first).
        self._cuts: collections.deque[int] = collections.deque()
        self._errors_taken = 0                         # error rows taken (layout.errors: raised)
        self._no_errors_cache: dict[int, npt.NDArray[np.bool_]] = {}
        self._error_field = 3 + len(plan.info)         # env_error's index among the extras
        self._untaken = 0
        self._closed = False
        self._deaths: collections.deque[tuple[int, int, str]] = collections.deque()
        self._add, self._load, self._store = (_core._atomic_add, _core._atomic_load,
                                              _core._atomic_store)
        size = Layout(plan).size
        self._memfd = os.memfd_create(f"aiopool-{env_id}", os.MFD_CLOEXEC)
        os.ftruncate(self._memfd, size)
        self._mm = mmap.mmap(self._memfd, size)
        self.lay = Layout(plan, self._mm)
        per = self._per = -(-n // plan.num_workers)  # worker w holds ids [w * per, (w + 1) * per)
        self._workers = [_Worker(w, list(range(w * per, min(n, (w + 1) * per))))
                         for w in range(plan.num_workers)]
        bounds = spec["action_bounds"]
        self._bounds = None if bounds is None else tuple(
            np.ascontiguousarray(b, dtype=np.int64).reshape(-1) for b in bounds)
        # The columns a batch gathers, in _gather's order: obs, the extras, reward, flags.
        lay = self.lay
        self._columns = (*(lay.obs[f.name] for f in plan.obs), lay.elapsed_step,
                         lay.episode_return, lay.episode_length,
                         *(lay.info[f.name] for f in plan.info),
                         *((*(lay.final_obs[f.name] for f in plan.obs), lay.final_elapsed_step)
                           if plan.same_step else ()),
                         lay.reward, lay.terminated, lay.truncated)
        self._in_tail = [0] * plan.num_workers
        self._out_head = [0] * plan.num_workers
        self._pool_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._alive_r, self._alive_w = os.pipe()  # EOF in the workers when this process dies
        self._watch_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()  # guards the workers' pidfds against the watcher
        try:
            ready = [self._start(worker) for worker in self._workers]
            for worker, fd in zip(self._workers, ready, strict=True):
                self._await_ready(worker, fd)
        except BaseException:
            self.close()
            raise
        self._watcher = threading.Thread(target=self._watch, name=f"aiopool-watch-{env_id}",
                                         daemon=True)
        self._watcher.start()

    # -- the native pool's interface --------------------------------------------------------

    @property
    def rows_in_flight(self) -> int:
        """Env steps sent and not yet taken, in batch units as the native pool counts them: a
        flushed short batch counts as a whole one."""
        return self._untaken + sum(self.batch_size - cut for cut in self._cuts)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def lost_envs(self) -> int:
        """Envs lost with a worker that was not restarted: they take no more actions."""
        return int(np.count_nonzero(self._flags & _LOST))

    @property
    def ready_count(self) -> int:
        """Whole batches ready to take (a flushed short batch counts)."""
        self._collect()
        return len(self._cuts) + (len(self._ready) - sum(self._cuts)) // self.batch_size

    def fileno(self) -> int:
        return self._pool_fd

    def arm(self) -> None:
        """Ask the workers to ring the eventfd once the rows the next batch lacks are
        committed (see layout.py); the caller then re-checks with ``take``."""
        self._arm(self.batch_size - len(self._ready))

    def _arm(self, rows: int) -> None:
        self._store(self.lay.need[0], max(1, rows))
        self._store(self.lay.armed[0], 1)

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            os.read(self._pool_fd, 8)

    def stage_seeds(self, ids: npt.NDArray[np.int32], seeds: Sequence[int] | None) -> None:
        """Seed ``ids`` at their next reset: ``reset(seed=s)``, or unseeded for None (after
        ``check_reset``: an env's command in flight must not turn into a reset)."""
        lay = self.lay
        if seeds is None:
            lay.command[ids] = RESET
            return
        lay.seed[ids] = np.asarray(seeds, dtype=np.uint64)
        lay.command[ids] = RESET_SEEDED

    def check_reset(self, ids: npt.NDArray[np.int32]) -> None:
        """Raise what ``reset(ids)`` would, changing nothing."""
        if self._closed:
            raise RuntimeError("async_reset() on a closed pool")
        if (((ids < 0) | (ids >= self.num_envs)).any() or len(np.unique(ids)) < len(ids)
                or (self._flags[ids] & (_BUSY | _LOST)).any()):
            self._refuse(ids, "async_reset", need_reset_ok=False)

    def reset(self, ids: npt.NDArray[np.int32]) -> None:
        owner = self._claim(ids, "async_reset", need_reset_ok=False)  # flags: _BUSY only
        cmd = self.lay.command
        stepping = cmd[ids] == STEP
        cmd[ids[stepping]] = RESET
        self._dispatch(ids, owner)

    def send(self, actions: Any, ids: Any) -> None:
        plan = self._plan
        if (not isinstance(actions, np.ndarray) or not isinstance(ids, np.ndarray)
                or ids.dtype != np.int32 or ids.ndim != 1
                or actions.dtype != np.dtype(plan.action.dtype)
                or actions.shape != (len(ids), *plan.action.shape)):
            raise TypeError("convert")  # Pool converts the input, or explains what is wrong
        owner = self._claim(ids, "send", need_reset_ok=True)  # bad ids and states first
        try:
            self._check_actions(actions)
        except BaseException:
            _core._clear_flags(self._flags, ids, _BUSY)  # a send claims only clear flags
            raise
        self.lay.action[ids] = actions
        self.lay.command[ids] = STEP
        self._dispatch(ids, owner)

    def take(self, spin_ns: int = 0) -> tuple[Any, ...] | None:
        if self._deaths:
            self._handle_deaths()
        self._collect()
        if not self._cuts and len(self._ready) < self.batch_size and spin_ns > 0:
            until = time.perf_counter_ns() + spin_ns
            while len(self._ready) < self.batch_size and time.perf_counter_ns() < until:
                self._collect()
        if self._cuts:
            rows = self._cuts.popleft()
        elif len(self._ready) >= self.batch_size:
            rows = self.batch_size
        else:
            return None
        ids = np.array(self._ready[:rows], dtype=np.int32)
        del self._ready[:rows]
        _core._clear_flags(self._flags, ids, _BUSY)
        self.lay.command[ids] = STEP  # a staged seed is used once: consumed with its row
        self._untaken -= rows
        arrays = self._gather(ids)
        if self._autoreset == "disabled":
            self._flags[ids] |= (arrays[2] | arrays[3]).astype(np.uint8) * np.uint8(_ENDED)
        errors = arrays[5].env_error
        if self._raise_env_errors and errors.any():
            texts = {int(i): self.lay.error_text(int(i)) for i in ids[errors]}
            raise EnvError(texts, arrays)
        return arrays

    def wait(self, timeout: float) -> None:
        """Sleep until the rows the next batch lacks are committed (or ``timeout`` s; < 0: no
        limit), GIL released."""
        self._sleep_for(self.batch_size - len(self._ready), timeout)

    def _sleep_for(self, rows: int, timeout: float) -> None:
        had = len(self._ready)
        self._arm(rows)
        self._collect()  # the re-check after arming; it subtracts what it finds from `need`
        if self._deaths or self._cuts or len(self._ready) - had >= rows:
            return
        poller = select.poll()
        poller.register(self._pool_fd, select.POLLIN)
        # poll takes an int of ms; beyond ~24 days, wake up and let the caller wait again
        poller.poll(None if timeout < 0 else min(int(timeout * 1000) + 1, 2**31 - 1))
        if not self._closed:  # closed meanwhile: the fd may be gone (the caller says closed)
            self.drain()

    def flush(self, timeout: float) -> int:
        """Wait for every step in flight, then publish the rows short of a whole batch. A
        worker's death found on the way is handled as ``take`` handles it: its lost envs'
        resets go to its replacement and are waited for, or (no restart) ``WorkerDied``."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        self._collect()
        while not self._closed:
            if self._deaths:
                self._flush_deaths()
                continue
            if self._untaken <= len(self._ready):
                break
            remaining = -1.0 if deadline is None else deadline - time.monotonic()
            if deadline is not None and remaining <= 0:
                return -1
            self._sleep_for(self._untaken - len(self._ready), remaining)
            self._collect()
        uncut = len(self._ready) - sum(self._cuts)
        short = uncut % self.batch_size
        if self._closed or not short:
            return 0
        self._cuts.extend([self.batch_size] * (uncut // self.batch_size) + [short])
        os.write(self._pool_fd, _EFD_ONE)  # wake a parked receiver for the short batch
        return short

    def _flush_deaths(self) -> None:
        """``_handle_deaths`` for ``flush``; a death that loses envs for good also rings the
        doorbell, so that receivers parked for those rows look again at what can come."""
        try:
            self._handle_deaths()
        except WorkerDied:
            _ring(self._pool_fd)
            raise
        self._collect()

    def env_error(self, env_id: int) -> str:
        """The traceback of the last exception env ``env_id`` raised, or ""."""
        if not 0 <= env_id < self.num_envs:
            raise ValueError(f"env_id is {env_id}, expected 0 <= env_id < {self.num_envs}")
        return self.lay.error_text(env_id) if self.lay.status[env_id] == ENV_ERROR else ""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if getattr(self, "_pool_fd", -1) >= 0:
            _ring(self._pool_fd)  # a receiver asleep in another thread wakes and sees it closed
        if hasattr(self, "lay"):
            self._store(self.lay.shutdown[0], 1)
        for worker in self._workers:
            if worker.proc is not None and worker.proc.poll() is None:
                _ring(worker.inbox_fd)
        deadline = time.monotonic() + 1.0
        for worker in self._workers:
            if worker.proc is None:
                continue
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
        _ring(self._watch_fd)
        watcher = getattr(self, "_watcher", None)
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=5)
        with self._lock:
            for worker in self._workers:
                _close_fd(worker.inbox_fd)
                _close_fd(worker.pidfd)
                _close_fd(worker.ready_r)
                worker.pidfd = worker.ready_r = -1
                _close_line(worker)
        for fd in (self._alive_r, self._alive_w, self._memfd, self._watch_fd):
            _close_fd(fd)
        # The pool's eventfd closes last: Pool removes its reader first (asyncio loses a
        # reused fd otherwise). Batches already taken are private copies and stay valid.
        _close_fd(self._pool_fd)
        self.lay = None  # type: ignore[assignment]
        self._columns = ()  # views of the mapping: it cannot close while they live
        with contextlib.suppress(BufferError):  # a view still held: the mapping goes with it
            self._mm.close()

    def worker_pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers if w.proc is not None]

    def render(self, ids: npt.NDArray[np.int32]) -> list[npt.NDArray[np.uint8]]:
        """The current frames of envs ``ids``, each its own ``render()`` in its worker process
        (the worker answers between steps). Envs with a step in flight, never reset, or lost
        are refused as ``send`` refuses them; while drawn, they take no command."""
        if self._closed:
            raise RuntimeError("render() on a closed pool")
        if not self._renders:
            raise ValueError(f"this {self.env_id} pool renders nothing: make it with "
                             "render_mode='rgb_array'")
        # Its own flag: a worker's death while it draws loses no step (_handle_deaths reads
        # _BUSY), and sends and resets are refused until the frame is back.
        refuse = _BUSY | _LOST | _FRESH | _DRAWING
        if _core._claim(self._flags, ids, refuse, _DRAWING, self._per) == -1:
            self._refuse(ids, "render", need_reset_ok=True)
        try:
            return [self._ask_frame(self._workers[i // self._per], i) for i in ids.tolist()]
        finally:
            _core._clear_flags(self._flags, ids, _DRAWING)

    def _ask_frame(self, worker: _Worker, env_id: int) -> npt.NDArray[np.uint8]:
        """One frame from ``worker``'s env ``env_id`` (worker.py's ``_serve_render``): a request
        of 4 bytes, an answer of its length (8 bytes) and a pickled ("ok", frame) or ("error",
        traceback), or ("fresh", None) for an env its process has not reset yet. A line cut
        short (a dead worker, an error mid-answer) is closed: its worker draws no more."""
        line = worker.render
        if line is None:
            raise RuntimeError(f"render: env {env_id}'s worker process is gone")
        try:
            line.sendall(env_id.to_bytes(4, "little"))
            size = int.from_bytes(_read_exactly(line, 8), "little")
            status, value = pickle.loads(_read_exactly(line, size))
        except BaseException as e:
            with self._lock:
                _close_line(worker)
            if isinstance(e, OSError | EOFError):
                raise RuntimeError(f"render: env {env_id}'s worker process died while it drew "
                                   f"({e or 'end of stream'})") from None
            raise
        if status == "fresh":
            raise ValueError(f"render: env {env_id} has not been reset since its worker process "
                             "restarted; it draws after its next send or async_reset")
        if status != "ok":
            raise RuntimeError(f"render: env {env_id}'s render() raised in its worker "
                               f"process:\n{value}")
        return np.asarray(value, dtype=np.uint8)

    def restarts(self) -> list[int]:
        return [w.restarts for w in self._workers]

    # -- internals ---------------------------------------------------------------------------

    def _claim(self, ids: npt.NDArray[np.int32], what: str, need_reset_ok: bool) -> int:
        """Mark ``ids`` busy, or refuse them all: ids out of range, repeated, or of envs that
        cannot take this command (a send needs every flag clear; a reset only _BUSY and _LOST).
        Returns the one worker holding them all, or -2 if they span several. The fast path is
        one native pass over the ids; the slow one finds what to say."""
        if self._closed:
            raise RuntimeError(f"{what}() on a closed pool")
        refuse = 0xFF if need_reset_ok else _BUSY | _LOST | _DRAWING
        owner = _core._claim(self._flags, ids, refuse, _BUSY, self._per)
        if owner == -1:
            self._refuse(ids, what, need_reset_ok)
        return owner

    def _refuse(self, ids: npt.NDArray[np.int32], what: str, need_reset_ok: bool) -> None:
        """Raise the ValueError that says why ``_claim`` refused ``ids``."""
        n = self.num_envs
        out = (ids < 0) | (ids >= n)
        if out.any():
            j = int(np.flatnonzero(out)[0])
            raise ValueError(f"{what}: env_ids[{j}] is {int(ids[j])}, expected 0 <= env_id < "
                             f"{n}")
        flags = self._flags[ids]
        seen: set[int] = set()
        for i in ids.tolist():
            if i in seen:
                raise ValueError(f"{what}: env_ids names env {i} twice; give each env at most "
                                 "one action")
            seen.add(i)
        lost = " was lost with its worker process" + (
            "" if self._restart else " (make the pool with restart=True to replace dead workers)")
        checks = [(_LOST, lost),
                  (_BUSY, " still has an action in flight; receive its result before sending "
                          "it another"),
                  (_DRAWING, " is being drawn (render()); send to it when its frame is back")]
        if need_reset_ok:
            checks += [(_FRESH, " has not been reset yet; call async_reset() first"),
                       (_ENDED, " ended its episode and autoreset is 'disabled'; call "
                                "async_reset(env_ids=[...]) for it first")]
        for bit, why in checks:
            hit = (flags & bit) != 0
            if hit.any():
                raise ValueError(f"{what}: env {int(ids[hit][0])}{why}")
        raise AssertionError(f"{what}: refused env_ids {ids.tolist()} with no reason found")

    def _check_actions(self, actions: npt.NDArray[Any]) -> None:
        bounds = self._bounds
        if not actions.size:
            return
        if bounds is None:  # Box: any value but NaN (spec.rejects_nan_actions), passed on as it is
            if actions.dtype.kind == "f" and np.isnan(actions).any():
                j = int(np.flatnonzero(np.isnan(actions.reshape(len(actions), -1)).any(1))[0])
                raise ValueError(f"actions[{j}] contains nan; this pool's actions must not be NaN "
                                 "(inf and out-of-range values go to the env as they are)")
            return
        low, high = bounds
        flat = actions.reshape(len(actions), -1)
        at = _core._first_out_of_bounds(np.ascontiguousarray(actions), low, high)
        if at == -1:
            return
        if at == -3:  # a dtype the native check does not take
            bad = (flat < low) | (flat > high)
            if not bad.any():
                return
            at = int(np.flatnonzero(bad.reshape(-1))[0])
        j, d = divmod(at, flat.shape[1])
        lo, hi = int(low[d]), int(high[d])
        where = f"actions[{j}]" if not self._plan.action.shape else f"actions[{j}][{d}]"
        raise ValueError(f"{where} is {int(flat[j, d])}, expected {lo} <= action < {hi + 1} "
                         f"({self.spec['action_repr']})")

    def _dispatch(self, ids: npt.NDArray[np.int32], owner: int) -> None:
        """Queue claimed ``ids`` to their workers (``owner``: the one holding them all, or -2)."""
        if not len(ids):
            return
        self._untaken += len(ids)
        if owner >= 0:  # one worker's envs (common)
            self._push(self._workers[owner], ids)
            return
        owners = ids // self._per
        for worker in self._workers:
            mine = ids[owners == worker.index]
            if len(mine):
                self._push(worker, mine)

    def _push(self, worker: _Worker, ids: npt.NDArray[np.int32]) -> None:
        """Queue ``ids`` in ``worker``'s inbox, then publish the tail and ring it."""
        w = worker.index
        tail = self._in_tail[w]
        cap = self._plan.per_worker
        start = tail % cap
        if start + len(ids) <= cap:
            self.lay.inbox[w, start:start + len(ids)] = ids
        else:
            self.lay.inbox[w, (tail + np.arange(len(ids))) % cap] = ids
        tail += len(ids)
        self._in_tail[w] = tail
        self._store(self.lay.inbox_tail[w], tail)
        if self._load(self.lay.sleeping[w]):  # Dekker: tail first, then the flag
            _ring(worker.inbox_fd)

    def _collect(self) -> None:
        """Move finished env ids from the workers' outboxes to the ready queue, and take them
        off the rows an armed wait still needs (layout.py)."""
        lay = self.lay
        cap = self._plan.per_worker
        for w in range(len(self._workers)):
            tail = self._load(lay.outbox_tail[w])
            head = self._out_head[w]
            if tail == head:
                continue
            box = lay.outbox[w]
            start, end = head % cap, tail % cap
            if start < end:
                self._ready.extend(box[start:end].tolist())
            else:
                self._ready.extend(box[np.arange(head, tail) % cap].tolist())
            self._out_head[w] = tail
            # Like a worker's commit: if this takes `need` to 0, ring. A row that a worker also
            # subtracted (committed around the arming) can make this happen before the batch
            # is whole; the ring then makes the waiter re-arm for what is left, where staying
            # silent would leave it asleep with `need` already spent.
            got = tail - head
            if self._load(lay.armed[0]) and 0 < self._add(lay.need[0], -got) <= got:
                _ring(self._pool_fd)

    def _gather(self, ids: npt.NDArray[np.int32]) -> tuple[Any, ...]:
        lay = self.lay
        plan = self._plan

        taken = _core._take_rows(self._columns, ids)  # read-only copies, in _columns' order
        k = len(plan.obs)
        obs_cols = list(taken[:k])
        obs: Any = obs_cols[0] if plan.obs[0].name == "obs" else _structured(plan, obs_cols)
        ids.flags.writeable = False
        extras = list(taken[k:k + 3 + len(plan.info)])
        if self._load(lay.errors[0]) > self._errors_taken:  # some env raised: find which
            errors = lay.status.take(ids) == ENV_ERROR
            self._errors_taken += int(errors.sum())
        else:
            errors = self._no_errors(len(ids))
        errors.flags.writeable = False
        extras.append(errors)
        if plan.same_step:  # final_obs (structured as obs), final_info.elapsed_step
            final = list(taken[k + 3 + len(plan.info):-4])
            extras.append(final[0] if plan.obs[0].name == "obs" else _structured(plan, final))
            extras.append(taken[-4])
        fields = _Fields(obs_cols, extras)
        fields._error_field = self._error_field
        reward, terminated, truncated = taken[-3:]
        return (obs, reward, terminated, truncated, ids, fields)

    def _no_errors(self, rows: int) -> npt.NDArray[np.bool_]:
        cached = self._no_errors_cache.get(rows)
        if cached is None:
            cached = self._no_errors_cache[rows] = np.zeros(rows, dtype=bool)
            cached.flags.writeable = False
        return cached

    # -- workers --------------------------------------------------------------------------------

    def _start(self, worker: _Worker) -> int:
        """Start ``worker``'s process; returns the read end of its ready pipe."""
        ready_r, ready_w = os.pipe()
        config = {
            "sys_path": list(sys.path), "plan": self._plan, "memfd": self._memfd,
            "worker": worker.index, "env_ids": worker.env_ids, "factory": self._factory,
            "inbox_fd": worker.inbox_fd, "pool_fd": self._pool_fd, "parent_fd": self._alive_r,
            "ready_fd": ready_w, "spin_us": self._spin_us, "commit_rows": self.batch_size,
            "env_name": self.env_id,
        }
        fds: tuple[int, ...] = (self._memfd, worker.inbox_fd, self._pool_fd, self._alive_r,
                                ready_w)
        ours = theirs = None
        if self._renders:  # frames asked for and sent back on a socket of their own
            ours, theirs = socket.socketpair()
            config["render_fd"] = theirs.fileno()
            fds += (theirs.fileno(),)
        proc = None
        try:
            try:
                proc = subprocess.Popen([sys.executable, "-m", "aiopool._process.worker"],
                                        stdin=subprocess.PIPE, pass_fds=fds, close_fds=True)
            finally:
                os.close(ready_w)
                if theirs is not None:
                    theirs.close()
            assert proc.stdin is not None
            proc.stdin.write(pickle.dumps(config))
            proc.stdin.close()
            pidfd = os.pidfd_open(proc.pid)
        except BaseException:  # no half-started worker: no process, no fd left
            os.close(ready_r)
            if ours is not None:
                ours.close()
            if proc is not None:
                proc.kill()
                proc.wait()
            raise
        worker.proc = proc
        worker.generation += 1
        worker.started = time.monotonic()
        with self._lock:
            _close_fd(worker.pidfd)
            worker.pidfd = pidfd
            _close_line(worker)
            worker.render = ours
        _ring(self._watch_fd)
        return ready_r

    def _await_ready(self, worker: _Worker, ready_r: int) -> None:
        chunks = []
        poller = select.poll()
        poller.register(ready_r, select.POLLIN)
        deadline = time.monotonic() + _READY_TIMEOUT_S
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not poller.poll(int(left * 1000)):
                    raise RuntimeError(f"worker process {worker.index} of {self.env_id} did not "
                                       f"start within {_READY_TIMEOUT_S:.0f} s")
                chunk = os.read(ready_r, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
                with contextlib.suppress(Exception):  # a whole message: done (a process the
                    pickle.loads(b"".join(chunks))    # factory forked may hold the pipe open)
                    break
        finally:
            os.close(ready_r)
        data = b"".join(chunks)
        status, detail = pickle.loads(data) if data else ("error", "it exited before saying why")
        if status != "ready":
            raise RuntimeError(f"worker process {worker.index} of {self.env_id} could not make "
                               f"its envs {worker.env_ids}:\n{detail}")

    def _watch(self) -> None:
        """Wait on the workers' pidfds; record each death (and hung steps, with a timeout)."""
        timeout_ms = None if self._step_timeout is None else max(
            10, int(self._step_timeout * 250))
        while not self._closed:
            poller = select.poll()
            poller.register(self._watch_fd, select.POLLIN)
            with self._lock:
                by_fd = {w.pidfd: w for w in self._workers if w.pidfd >= 0}
            for fd in by_fd:
                poller.register(fd, select.POLLIN)
            try:
                events = poller.poll(timeout_ms)
            except (OSError, ValueError):
                return
            if self._closed:
                return
            for fd, _ in events:
                if fd == self._watch_fd:
                    with contextlib.suppress(BlockingIOError, OSError):
                        os.read(fd, 8)
                    continue
                worker = by_fd.get(fd)
                if worker is None or worker.proc is None:
                    continue
                code = worker.proc.wait()
                with self._lock:
                    _close_fd(worker.pidfd)
                    worker.pidfd = -1
                self._deaths.append((worker.index, worker.generation, _describe_exit(code)))
                _ring(self._pool_fd)
            if self._step_timeout is not None:
                self._check_hung()

    def _check_hung(self) -> None:
        assert self._step_timeout is not None
        now = time.monotonic_ns()
        for worker in self._workers:
            since = self._load(self.lay.busy_since[worker.index]) if self.lay else 0
            if (since and now - since > self._step_timeout * 1e9 and worker.proc is not None
                    and worker.proc.poll() is None):
                self._hung[(worker.index, worker.generation)] = (
                    f"an env call ran longer than step_timeout={self._step_timeout} s, so the "
                    "worker was killed")
                worker.proc.send_signal(signal.SIGKILL)

    def _handle_deaths(self) -> None:
        while self._deaths:
            index, generation, how = self._deaths.popleft()
            worker = self._workers[index]
            hung = self._hung.pop((index, generation), None)  # its own reason, no other's
            if generation != worker.generation or self._closed:
                continue
            if not worker.env_ids:  # it held no env (make_process starts none such): no loss
                _log.warning("%s worker %d, which held no env: %s", self.env_id, index, how)
                continue
            if hung:
                how = f"{how}: {hung}"
            self._collect()  # what it committed before dying is delivered
            mine = np.asarray(worker.env_ids, dtype=np.int32)
            ready = np.zeros(self.num_envs, dtype=bool)
            ready[self._ready] = True
            busy = (self._flags[mine] & _BUSY) != 0
            lost = mine[busy & ~ready[mine]]
            unready = self._start_failure(worker)
            if unready:
                how += f" before it had made its envs:\n{unready}"
            quick = unready or time.monotonic() - worker.started < 1.0
            worker.quick_deaths = worker.quick_deaths + 1 if quick else 0
            if self._restart and worker.quick_deaths < 3:
                try:
                    self._replace(worker, lost)
                except OSError as e:  # no process could start (fds, memory): lost, not stuck
                    how += f", and no new worker could start ({e!r})"
                else:
                    worker.restarts += 1
                    _log.warning("%s worker %d: %s; restarted with fresh envs (%d restarts), "
                                 "envs %s lost their steps in flight", self.env_id, index, how,
                                 worker.restarts, lost.tolist())
                    continue
            elif self._restart:
                how += (" three times in a row within 1 s of starting or before making its "
                        "envs, so it was not restarted again")
            self._flags[mine] |= _LOST
            self._flags[lost] &= ~np.uint8(_BUSY)
            self._untaken -= len(lost)
            raise WorkerDied(index, how, [int(i) for i in lost], list(worker.env_ids),
                             self._restart)

    def _start_failure(self, worker: _Worker) -> str:
        """Why a restarted worker that died never made its envs (its ready pipe's message),
        or "" if it did, or if it was one the pool waited for at its start."""
        if worker.ready_r < 0:
            return ""
        chunks = []
        with self._lock:  # close() closes it under the lock too
            if self._closed or worker.ready_r < 0:
                return ""
            with contextlib.suppress(BlockingIOError, OSError):
                while chunk := os.read(worker.ready_r, 65536):
                    chunks.append(chunk)
            _close_fd(worker.ready_r)
            worker.ready_r = -1
        data = b"".join(chunks)
        try:
            status, detail = pickle.loads(data) if data else ("error", "it said nothing")
        except Exception:  # cut short by its death
            status, detail = "error", "its message was cut short"
        return "" if status == "ready" else str(detail)

    def _replace(self, worker: _Worker, lost: npt.NDArray[np.int32]) -> None:
        """A fresh worker with fresh envs; the lost envs' next rows are their resets (the
        others reset at their next send: a new worker's envs all start un-reset)."""
        w = worker.index
        lay = self.lay
        for counter in (lay.inbox_tail[w], lay.outbox_tail[w], lay.busy_since[w]):
            self._store(counter, 0)
        self._in_tail[w] = self._out_head[w] = 0
        ready_r = self._start(worker)  # not awaited: the loop goes on while it starts
        os.set_blocking(ready_r, False)
        worker.ready_r = ready_r  # read if it dies: did it make its envs, and if not, why
        # A seeded reset in flight keeps its seed: its command is consumed only when its row
        # is taken, so a worker killed after the reset ran but before its commit leaves it.
        seeded = lay.command[lost] == RESET_SEEDED
        lay.command[lost[~seeded]] = RESET
        self._push(worker, lost)


class _Fields:
    """The ``handle`` of a gathered batch: ``array(i)`` is field ``i`` of ``field_names``."""

    __slots__ = ("_all", "_error_field")

    def __init__(self, obs_cols: list[npt.NDArray[Any]], extras: list[npt.NDArray[Any]]) -> None:
        self._all = obs_cols, extras
        self._error_field = -1

    @property
    def env_error(self) -> npt.NDArray[np.bool_]:
        return self._all[1][self._error_field]

    def array(self, field: int) -> npt.NDArray[Any]:
        _obs_cols, extras = self._all
        return extras[field - 5]


def _structured(plan: Plan, cols: list[npt.NDArray[Any]]) -> Any:
    keys = [f.name[len("obs."):] for f in plan.obs]
    if all(k.isdigit() for k in keys):
        return tuple(cols)
    return dict(zip(keys, cols, strict=True))


def _field_names(plan: Plan) -> tuple[str, ...]:
    names = ["obs", "reward", "terminated", "truncated", "env_id", "elapsed_step",
             "episode_return", "episode_length", *(f.name for f in plan.info), "env_error"]
    if plan.same_step:  # one final_obs field, a dict or tuple of arrays as obs is
        names += ["final_obs", "final_info.elapsed_step"]
    return tuple(names)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _close_line(worker: _Worker) -> None:
    """Close ``worker``'s render socket: shut down first, so that a ``recv`` blocked on it in
    another thread returns."""
    line, worker.render = worker.render, None
    if line is not None:
        with contextlib.suppress(OSError):
            line.shutdown(socket.SHUT_RDWR)
        line.close()


def _read_exactly(line: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = line.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


def _ring(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, _EFD_ONE)


def _close_fd(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)


Factory = Callable[[], Any]
