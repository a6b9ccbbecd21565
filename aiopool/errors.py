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
