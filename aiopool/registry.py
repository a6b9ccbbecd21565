"""make() and list_envs(), read from the native registry."""

from __future__ import annotations

import difflib
import os
from typing import Any

from ._native import _core  # the extension module built from _native/bindings.cc
from .pool import Pool
from .spec import EnvSpec

_AUTORESET_MODES = ("next_step", "same_step", "disabled")


def list_envs() -> list[str]:
    """Every env id ``make`` accepts."""
    return list(_core.list_envs())


def make(env_id: str, num_envs: int = 1, batch_size: int | None = None,
         num_threads: int | None = None, seed: int | None = 0, autoreset: str = "next_step",
         *, max_episode_steps: int | None = None, recv_spin_us: float | None = None,
         worker_spin_us: float | None = None, **env_kwargs: Any) -> Pool:
    """Make a pool of ``num_envs`` copies of ``env_id``.

    Args:
        env_id: a registered id (``aiopool.list_envs()``), such as ``"CartPole-v1"``.
        num_envs: envs in the pool.
        batch_size: env steps per received batch (default ``num_envs``). ``batch_size <=
            num_envs // 2`` lets stepping and your policy overlap.
        num_threads: worker threads (default: one less than the cores, at least 1, at most
            ``num_envs``), leaving a core for the Python thread.
        seed: env ``i`` is seeded ``seed + i`` exactly as ``gymnasium.make(env_id).reset(
            seed=seed + i)``; None draws fresh entropy.
        autoreset: ``"next_step"`` (gymnasium 1.x and EnvPool default), ``"same_step"``
            (final observation in ``info["final_obs"]``) or ``"disabled"``.
        max_episode_steps: override gymnasium's time limit (0: none).
        recv_spin_us: how long ``recv`` busy-polls before sleeping on the eventfd (default
            20 µs: waking a sleeping thread costs ~20 µs on a VM).
        worker_spin_us: how long an idle worker busy-polls before sleeping (default 50 µs).
            At most ``cores - 1`` workers poll at once, so the Python thread keeps a core.
        **env_kwargs: the env's gymnasium constructor arguments.

    Raises:
        ValueError: unknown env id, bad sizes or autoreset mode.
        TypeError: an unknown or mistyped env kwarg (the message lists the valid ones).
    """
    ids = _core.list_envs()
    if env_id not in ids:
        close = difflib.get_close_matches(env_id, ids, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown env id {env_id!r}{hint} (aiopool.list_envs() lists all)")
    for name, value in (("num_envs", num_envs), ("batch_size", batch_size),
                        ("num_threads", num_threads)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 1):
            raise ValueError(f"{name} is {value!r}, expected a positive int")
    batch_size = num_envs if batch_size is None else batch_size
    if batch_size > num_envs:
        raise ValueError(f"batch_size ({batch_size}) must not exceed num_envs ({num_envs})")
    cores = len(os.sched_getaffinity(0)) or 1
    if num_threads is None:
        num_threads = max(1, min(num_envs, cores - 1))
    if autoreset not in _AUTORESET_MODES:
        raise ValueError(f"autoreset is {autoreset!r}, expected one of {_AUTORESET_MODES}")
    if max_episode_steps is not None and (not isinstance(max_episode_steps, int)
                                          or max_episode_steps < 0):
        raise ValueError(f"max_episode_steps is {max_episode_steps!r}, expected an int >= 0")
    # At most cores - 1 workers busy-poll at once, leaving a core for the Python thread.
    max_spinners = num_threads if num_threads < cores else max(1, cores - 1)
    if recv_spin_us is None:
        recv_spin_us = 20.0
    if worker_spin_us is None:
        worker_spin_us = 50.0
    config = _config(env_id, env_kwargs)
    native = _core.Pool(env_id, {k: float(v) for k, v in config.items()}, num_envs, batch_size,
                        num_threads, autoreset, int(worker_spin_us * 1000),
                        -1 if max_episode_steps is None else max_episode_steps, max_spinners)
    spec = EnvSpec.from_native(env_id, native.spec, config)
    return Pool(native, spec, seed=seed, autoreset=autoreset, recv_spin_us=recv_spin_us)


def _config(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    keys, _ = _core.env_config(env_id)
    valid = {name: (kind, default) for name, kind, default in keys}
    names = ", ".join(valid) or "none"
    config: dict[str, Any] = {}
    for name, (kind, default) in valid.items():
        config[name] = {"bool": bool, "int": int}.get(kind, float)(default)
    for name, value in kwargs.items():
        if name not in valid:
            raise TypeError(f"{env_id} got an unexpected keyword argument {name!r}; "
                            f"valid: {names}")
        kind = valid[name][0]
        ok = {"bool": isinstance(value, bool),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "float": isinstance(value, int | float) and not isinstance(value, bool)}[kind]
        if not ok:
            raise TypeError(f"{env_id} keyword argument {name!r} is {value!r}, expected {kind}")
        config[name] = value
    return config
