"""The process backend: any gymnasium env, stepped in worker processes, behind ``Pool``.

``aiopool.make`` picks it for a registered gymnasium id that aiopool has no native env for,
for a factory (any picklable callable returning a ``gymnasium.Env``; lambdas and local functions
are pickled with cloudpickle), and for any id with ``backend="processes"``. The pool contract
is unchanged: ``ProcessPool`` is a ``Pool`` whose native half is ``backend.ProcessNative``.

Spaces: ``Box``, ``Discrete``, ``MultiDiscrete`` and ``MultiBinary`` observations and actions;
``Text`` observations (and other spaces of strings, such as minigrid's ``MissionSpace``) as
fixed-width numpy strings, one per row (``spec.text_dtype``); ``Dict`` and ``Tuple``
observations of those become named fields, so a batch's ``obs`` is a dict (or a tuple) of
arrays, as gymnasium batches them.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from ..pool import Pool, per_env_seeds
from ..spec import EnvSpec, InfoField, text_dtype
from .backend import ProcessNative
from .layout import Field, Plan

_SIMPLE = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


class ProcessPool(Pool):
    """A ``Pool`` whose envs are Python envs in worker processes. Build it with ``aiopool.make``.

    Beyond ``Pool``: ``num_workers``; ``worker_pids()``; ``env_error(env_id)`` returns the
    traceback of the env's last exception; ``batch.info["env_error"]`` marks rows whose env
    raised (see ``aiopool.EnvError``); a dead worker raises ``aiopool.WorkerDied`` from the
    receive that notices it, or, with ``restart=True``, is replaced with fresh envs.
    """

    backend = "processes"

    def _caller_helps(self, on: bool = True) -> None:
        """The envs live in the worker processes: the calling thread cannot step them."""

    @property
    def num_workers(self) -> int:
        return int(self._native.num_threads)

    def worker_pids(self) -> list[int]:
        """The process ids of the live workers (for monitoring, and tests that kill one)."""
        self._check_open()
        return list(self._native.worker_pids())

    @property
    def restarts(self) -> list[int]:
        """How many times each worker was replaced after it died (``restart=True``); each
        restart is also logged as a warning on the ``aiopool`` logger."""
        return list(self._native.restarts())

    def _stage_seeds(self, ids: npt.NDArray[np.int32],
                     seed: int | Sequence[int | None] | None) -> None:
        """Env ``i`` resets with ``reset(seed=seed + i)``; None: an unseeded reset."""
        if seed is None:
            self._native.stage_seeds(ids, None)
            return
        ids, seeds = per_env_seeds(seed, ids, 2**64 - 1)
        self._native.stage_seeds(ids, seeds)

    def __repr__(self) -> str:
        return (f"ProcessPool({self.spec.id!r}, num_envs={self.num_envs}, batch_size="
                f"{self.batch_size}, num_workers={self.num_workers}, autoreset="
                f"{self.autoreset!r}, state={self._state.value})")


def make_process(env: str | Callable[[], gym.Env[Any, Any]], num_envs: int, batch_size: int,
                 num_workers: int, seed: int | None, autoreset: str, *,
                 max_episode_steps: int | None, recv_spin_us: float, worker_spin_us: float,
                 restart: bool, step_timeout: float | None, on_env_error: str,
                 info_keys: Mapping[str, Any], env_kwargs: dict[str, Any],
                 render_mode: str | None = None) -> ProcessPool:
    """A ``ProcessPool``; ``aiopool.make`` documents the arguments."""
    import cloudpickle

    if on_env_error not in ("raise", "truncate"):
        raise ValueError(f"on_env_error is {on_env_error!r}, expected 'raise' or 'truncate'")
    if step_timeout is not None and not step_timeout > 0:
        raise ValueError(f"step_timeout is {step_timeout!r}, expected seconds > 0 or None")
    if render_mode is not None:
        from .._render import headless_defaults

        headless_defaults()  # before the workers start: they inherit the environment
    factory: Callable[[], gym.Env[Any, Any]]
    if isinstance(env, str):
        kwargs = dict(env_kwargs)
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        # The registration itself, not the id: the workers are fresh interpreters, where an
        # id the caller registered (gym.register, ale-py's ALE/ ids) is not known. An id
        # gymnasium resolves itself ("module:Env-v0", an unversioned one) goes as it came.
        module, colon, name = env.rpartition(":")
        if colon:
            importlib.import_module(module)  # what gymnasium.make would import, to register
        registered = gym.registry.get(name)
        factory = functools.partial(gym.make, registered if registered is not None else env,
                                    **kwargs)
    else:
        if max_episode_steps is not None:
            raise TypeError("max_episode_steps applies to registered ids; wrap your factory's "
                            "env in gymnasium.wrappers.TimeLimit instead")
        factory = functools.partial(env, **env_kwargs) if env_kwargs else env
    probe = factory()  # as gymnasium's AsyncVectorEnv, one env in this process for the spaces
    missing = [a for a in ("reset", "step", "close", "observation_space", "action_space")
               if not hasattr(probe, a)]
    if missing:
        raise TypeError(f"{_name_of(env) if callable(env) else env} returned "
                        f"{type(probe).__name__!r}, which has no {', '.join(missing)}: a factory "
                        "must return a gymnasium.Env")
    try:
        obs_space, act_space = probe.observation_space, probe.action_space
        env_spec = getattr(probe, "spec", None)
        declared_fps = float((getattr(probe, "metadata", None) or {}).get("render_fps") or 0.0)
        fps = declared_fps or 30.0
        if render_mode is not None and getattr(probe, "render_mode", None) != render_mode:
            raise ValueError(f"render_mode={render_mode!r}: the factory's env has render_mode="
                             f"{getattr(probe, 'render_mode', None)!r}; make it with "
                             f"render_mode={render_mode!r} (the pool's envs render themselves)")
    finally:
        probe.close()
    name = env if isinstance(env, str) else (
        env_spec.id if env_spec is not None and env_spec.id else _name_of(env))
    # Env i lives in worker i // per; no worker is started without an env (4 envs on 3
    # workers: 2 each, so 2 workers).
    per = -(-num_envs // num_workers)
    plan = Plan(num_envs=num_envs, num_workers=-(-num_envs // per), per_worker=per,
                obs=_obs_fields(obs_space), action=_action_field(act_space),
                info=tuple(Field(k, np.dtype(v).str, ()) for k, v in info_keys.items()),
                same_step=autoreset == "same_step")
    native_spec = {"max_seed": 2**64 - 1, "action_bounds": _action_bounds(act_space),
                   "action_repr": repr(act_space)}
    native = ProcessNative(cloudpickle.dumps(factory), plan, env_id=name, batch_size=batch_size,
                           autoreset=autoreset, spin_us=worker_spin_us, restart=restart,
                           step_timeout=step_timeout, raise_env_errors=on_env_error == "raise",
                           spec=native_spec, render=render_mode is not None)
    limit = env_spec.max_episode_steps if env_spec is not None else None
    spec = EnvSpec(id=name, observation_space=obs_space, action_space=act_space,  # type: ignore[arg-type]
                   max_episode_steps=int(limit or 0),
                   info=tuple(InfoField(f.name, np.dtype(f.dtype), f.shape) for f in plan.info),
                   config={**getattr(env, "keywords", {}), **env_kwargs},
                   renders=render_mode is not None, render_mode=render_mode,
                   render_fps=declared_fps)
    try:
        return ProcessPool(native, spec, seed=seed, autoreset=autoreset,
                           recv_spin_us=recv_spin_us,
                           renderer=None if render_mode is None else _WorkerRenderer(fps))
    except BaseException:
        native.close()
        raise


class _WorkerRenderer:
    """A process-backed pool's frames: each env's own ``render()``, called in its worker
    process (``ProcessNative.render``); ``fps`` is the env's ``metadata["render_fps"]``."""

    def __init__(self, fps: float) -> None:
        self.fps = fps

    def frame(self, native: ProcessNative, env_id: int) -> npt.NDArray[np.uint8]:
        return native.render(np.array([env_id], dtype=np.int32))[0]

    def close(self) -> None:
        """The frames are drawn in the workers, which the pool closes."""


def default_workers(num_envs: int) -> int:
    return max(1, min(num_envs, len(os.sched_getaffinity(0)) or 1))


def _name_of(factory: Callable[..., Any]) -> str:
    inner = factory.func if isinstance(factory, functools.partial) else factory
    return getattr(inner, "__qualname__", type(inner).__name__)


def _obs_fields(space: gym.spaces.Space[Any]) -> tuple[Field, ...]:
    if _is_leaf(space):
        return (_field("obs", space),)
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(
            space.spaces)
        fields = []
        for key, sub in items:
            if not _is_leaf(sub):
                raise ValueError(f"observation space {space} holds {sub} under {key!r}; the "
                                 "process backend takes Dict / Tuple observations of Box, "
                                 "Discrete, MultiDiscrete, MultiBinary and Text spaces, one "
                                 "level deep")
            fields.append(_field(f"obs.{key}", sub))
        return tuple(fields)
    raise ValueError(f"observation space {space} is not supported; the process backend takes "
                     "Box, Discrete, MultiDiscrete, MultiBinary, Text, and Dict / Tuple of "
                     "those")


def _is_leaf(space: gym.spaces.Space[Any]) -> bool:
    """A space one field holds: a simple one, or one of strings (``text_dtype``)."""
    return isinstance(space, _SIMPLE) or text_dtype(space) is not None


def _action_field(space: gym.spaces.Space[Any]) -> Field:
    if not isinstance(space, _SIMPLE):
        raise ValueError(f"action space {space} is not supported; the process backend takes "
                         "Box, Discrete, MultiDiscrete and MultiBinary actions")
    return _field("action", space)


def _field(name: str, space: gym.spaces.Space[Any]) -> Field:
    text = text_dtype(space)
    if text is not None:  # one string per row, the worker checks it fits (worker.py)
        return Field(name, text.str, ())
    dtype = np.dtype(space.dtype) if space.dtype is not None else np.dtype(np.int64)
    return Field(name, dtype.str, tuple(space.shape or ()))


def _action_bounds(space: gym.spaces.Space[Any]) -> tuple[Any, Any] | None:
    """Inclusive (low, high) per action element for the integer spaces; None for Box."""
    if isinstance(space, gym.spaces.Discrete):
        return np.array([space.start]), np.array([space.start + space.n - 1])
    if isinstance(space, gym.spaces.MultiDiscrete):
        low = np.asarray(space.start).reshape(-1)
        return low, low + np.asarray(space.nvec).reshape(-1) - 1
    if isinstance(space, gym.spaces.MultiBinary):
        size = int(np.prod(space.shape))
        return np.zeros(size, dtype=np.int64), np.ones(size, dtype=np.int64)
    return None
