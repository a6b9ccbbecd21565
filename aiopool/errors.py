"""Exceptions raised by aiopool."""

from __future__ import annotations


class PoolClosed(RuntimeError):
    """The pool was closed (or belongs to the parent of a forked process)."""


class NothingInFlight(RuntimeError):
    """A receive could never complete: too few env steps are in flight to fill a batch.

    EnvPool hangs forever here; aiopool raises at once and says how many actions are missing.
    """


class PolicyClosed(RuntimeError):
    """The policy (a ``DynamicBatcher``, ...) was closed before or while a call waited."""


class EnvError(RuntimeError):
    """A Python env raised in its worker process (process-backed pools).

    Raised by ``recv`` (and ``stream``, ``step``, ...) for the batch that holds the failed
    rows. Nothing is lost: ``batch`` is that batch, whose failed rows have ``truncated`` set
    and ``info["env_error"]`` True (their episodes end; the next send resets those envs), and
    ``tracebacks`` maps each failed env id to the traceback text from its worker.
    """

    def __init__(self, tracebacks: dict[int, str], arrays: tuple[object, ...]) -> None:
        ids = sorted(tracebacks)
        first = tracebacks[ids[0]].rstrip().splitlines()
        super().__init__(f"env {ids[0] if len(ids) == 1 else ids} raised in its worker process: "
                         f"{first[-1] if first else '?'}\n\n{tracebacks[ids[0]]}")
        self.env_ids = ids
        self.tracebacks = tracebacks
        self.arrays = arrays
        self.batch: object = None  # the Batch, set by the pool before this reaches you


class WorkerDied(RuntimeError):
    """A worker process of a process-backed pool died (killed, crashed, or hung past
    ``step_timeout``) and the pool was made without ``restart=True``.

    Attributes:
        worker: the worker's index.
        lost: env ids whose actions were in flight in it: their results will never come.
        env_ids: every env it held; sends to them are refused from now on.
    """

    def __init__(self, worker: int, how: str, lost: list[int], env_ids: list[int],
                 restart: bool = False) -> None:
        advice = "" if restart else " (make the pool with restart=True to replace dead workers)"
        super().__init__(f"worker process {worker} {how}; the results of envs {lost} are lost "
                         f"and its envs {env_ids[0]}..{env_ids[-1]} cannot be stepped any more"
                         + advice)
        self.worker = worker
        self.lost = lost
        self.env_ids = env_ids
