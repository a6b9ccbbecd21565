"""Exceptions of the Ray backend."""

from __future__ import annotations

from ..errors import WorkerDied


class ActorDied(WorkerDied):
    """A pool actor died (its process or node went away, or a call to it failed) and the pool
    was made without ``restart=True``, or it could not be restarted.

    A ``WorkerDied``, so ``except aiopool.WorkerDied`` catches the process backend's and this.
    Raised once, by the ``recv`` (or ``stream``, ``step``) that comes to it; the other actors'
    envs go on, and sends to this actor's envs are refused from then on.

    Attributes:
        worker: the actor's index (``actor`` is the same).
        lost: env ids whose results were in flight in it: they will never come.
        env_ids: every env it held (global ids).
        cause: the Ray exception that reported it (``ActorDiedError``, ``ActorUnavailableError``,
            or the error a call raised), also chained as ``__cause__``.
    """

    def __init__(self, actor: int, how: str, lost: list[int], env_ids: list[int],
                 cause: BaseException | None = None, restart: bool = False) -> None:
        advice = "" if restart else " (make the pool with restart=True to restart dead actors)"
        RuntimeError.__init__(
            self, f"pool actor {actor} {how}; the results of envs {lost} are lost and its envs "
                  f"{env_ids[0]}..{env_ids[-1]} cannot be stepped any more" + advice)
        self.worker = self.actor = actor
        self.lost = lost
        self.env_ids = env_ids
        self.cause = cause
        self.__cause__ = cause
