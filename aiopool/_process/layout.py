"""The shared memory of a process-backed pool: one memfd, mapped by the pool and its workers.

Both sides compute the same ``Layout`` from the same ``Plan`` and map the same file, so the
arrays below are the same bytes in every process. Nothing has a name in ``/dev/shm``: the memfd
lives exactly as long as the last process that maps it, so a crash leaks nothing.

Per env ``i`` (written by whoever holds the env at that moment):
    ``action[i]``, ``command[i]``, ``seed[i]``        the pool, before it queues ``i`` (and
                                                      ``command[i]`` when it takes ``i``'s row)
    ``obs.*[i]``, ``reward[i]``, ... ``status[i]``    the env's worker, before it completes ``i``
    ``error[i]``                                      the worker, when the env raised
Per worker ``w`` (single producer, single consumer rings of env ids):
    ``inbox[w]``,  ``inbox_tail[w]``   the pool pushes env ids to step; the worker consumes them
    ``outbox[w]``, ``outbox_tail[w]``  the worker pushes finished env ids; the pool consumes them
    ``busy_since[w]``                  monotonic ns when the worker entered an env call, or 0
    ``sleeping[w]``, ``armed``         "ring my eventfd": set by a side about to sleep
    ``need``                           rows the sleeping pool still waits for

Wake-ups (a Dekker pair, both sides seq_cst): a side about to sleep sets its flag, then
re-checks its ring; a producer stores the tail, then reads the flag and writes the eventfd only
if it is set. So an eventfd is written only when its reader sleeps (a write that wakes a
process costs ~200 µs on a 2-core VM), and no wake-up is ever lost.

The pool sleeps for a whole batch, not for the next row: before it sets ``armed`` it stores in
``need`` the rows its batch lacks. A worker that commits ``k`` rows and sees ``armed`` subtracts
``k`` from ``need`` and rings only when that takes ``need`` from above 0 to 0 or below; the pool
subtracts the rows it collects itself after arming (its re-check). Every row committed after
the pool's re-check is subtracted by its worker (the Dekker argument above), every earlier one
by the pool, so the ring is never late. Whoever takes ``need`` to 0 rings, the pool too (its own
eventfd): a row subtracted twice (its worker saw the flag while the pool collected it) makes that
happen early, and the woken pool then arms again for what is left. With slow envs (a MuJoCo
step of ~0.5 ms, commits every ~1 ms) this is one wake-up of the pool per batch instead of one
per commit.

Ordering: a producer writes the rows, then the ring entry, then stores the tail (seq_cst, via
``_core._atomic_store``); the consumer loads the tail (seq_cst) before reading entries and rows.
So an env id in a ring always refers to a complete row, and a killed producer never leaves a
half-written row visible: its last tail store is the commit.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt

# command[i]
STEP = 0
RESET = 1         # reset, not re-seeded
RESET_SEEDED = 2  # reset(seed=seed[i])

# status[i]
OK = 0
ENV_ERROR = 1     # the env raised: error[i] holds the traceback, the row ends its episode

ERROR_BYTES = 4096
_ALIGN = 64  # a cache line: counters of different writers never share one


@dataclasses.dataclass(frozen=True)
class Field:
    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything both sides need to lay out the shared memory (picklable, no numpy types)."""

    num_envs: int
    num_workers: int
    per_worker: int                 # ring capacity: the most envs one worker holds
    obs: tuple[Field, ...]          # one field "obs", or "obs.<key>" per Dict / Tuple entry
    action: Field
    info: tuple[Field, ...]         # scalar info keys carried into batch.info
    same_step: bool                 # keep final_obs / final_info.elapsed_step rows


class Layout:
    """Named numpy views of the shared memory of ``plan`` (``buf``: the mapped file, or None
    to only compute the size)."""

    def __init__(self, plan: Plan, buf: Any = None) -> None:
        self.plan = plan
        self._buf = buf
        self._offset = 0
        n, w = plan.num_envs, plan.num_workers
        self.inbox_tail = self._counters(w)
        self.outbox_tail = self._counters(w)
        self.busy_since = self._counters(w)
        self.sleeping = self._counters(w)  # 1 while worker w sleeps in poll: ring its eventfd
        self.armed = self._counters(1)     # 1 while the pool waits on its eventfd: ring it
        self.need = self._counters(1)      # rows the pool waits for (workers subtract theirs)
        self.shutdown = self._counters(1)
        self.errors = self._counters(1)    # env calls that raised, ever (workers add)
        self.inbox = self._array("int64", (w, plan.per_worker))
        self.outbox = self._array("int64", (w, plan.per_worker))
        self.action = self._array(plan.action.dtype, (n, *plan.action.shape))
        self.command = self._array("int64", (n,))
        self.seed = self._array("uint64", (n,))
        self.obs = {f.name: self._array(f.dtype, (n, *f.shape)) for f in plan.obs}
        self.reward = self._array("float64", (n,))
        self.terminated = self._array("bool", (n,))
        self.truncated = self._array("bool", (n,))
        self.elapsed_step = self._array("int32", (n,))
        self.episode_return = self._array("float64", (n,))
        self.episode_length = self._array("int32", (n,))
        self.status = self._array("uint8", (n,))
        self.info = {f.name: self._array(f.dtype, (n, *f.shape)) for f in plan.info}
        self.final_obs = ({f.name: self._array(f.dtype, (n, *f.shape)) for f in plan.obs}
                          if plan.same_step else {})
        self.final_elapsed_step = self._array("int32", (n,)) if plan.same_step else None
        self.error_length = self._array("int64", (n,))
        self.error = self._array("uint8", (n, ERROR_BYTES))
        self.size = self._offset

    def _array(self, dtype: str, shape: tuple[int, ...]) -> npt.NDArray[Any]:
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        start = self._offset
        self._offset = -(-(start + max(nbytes, 1)) // _ALIGN) * _ALIGN
        if self._buf is None:
            return np.empty(0, dtype=dt)
        return np.frombuffer(self._buf, dtype=dt, count=nbytes // dt.itemsize,
                             offset=start).reshape(shape)

    def _counters(self, count: int) -> list[int]:
        """``count`` int64 counters, one per cache line, as addresses for ``_core._atomic_*``."""
        words = _ALIGN // 8
        arr = self._array("int64", (count * words,))
        if self._buf is None:
            return [0] * count
        base = arr.ctypes.data
        return [base + k * _ALIGN for k in range(count)]

    def error_text(self, env_id: int) -> str:
        length = int(self.error_length[env_id])
        return bytes(self.error[env_id, :length]).decode("utf-8", "replace")

    def set_error_text(self, env_id: int, text: str) -> None:
        data = text.encode("utf-8", "replace")
        if len(data) > ERROR_BYTES:
            # Its head (the first exception of a chain, the worker's note) and its end (the
            # line that raised), each cut on a character boundary.
            gap = b"\n[...]\n"
            head = data[:ERROR_BYTES // 4].decode("utf-8", "ignore").encode()
            tail = data[-(ERROR_BYTES - len(head) - len(gap)):].decode("utf-8", "ignore")
            data = head + gap + tail.encode()
        self.error[env_id, :len(data)] = np.frombuffer(data, dtype=np.uint8)
        self.error_length[env_id] = len(data)
