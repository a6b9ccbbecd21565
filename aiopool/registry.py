"""make() and list_envs(), read from the native registry."""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import math
import numbers
import operator
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, cast

import gymnasium as gym
import numpy as np

from ._native import _core  # the engine and the envs that need no simulator (core_module.cc)
from ._native.families import CLASSIC_CONTROL, FAMILIES, NativeFamily
from ._render import (
    DmControlRenderer,
    Renderer,
    check_render_mode,
    draws,
    headless_defaults,
    python_renderer,
)
from .pool import Pool
from .spec import EnvSpec

_AUTORESET_MODES = ("next_step", "same_step", "disabled")
# gymnasium's AutoresetMode values as aiopool's names (make takes both; the gymnasium adapter
# maps its modes with it).
AUTORESET_NAMES = {"NextStep": "next_step", "SameStep": "same_step", "Disabled": "disabled"}
# make()'s max_episode_steps as the native pool takes it: None, the registered time limit (-1
# there); -1, none (0 there).
_NATIVE_TIME_LIMIT = {None: -1, -1: 0}
# recv's default spin (µs), with a core left free for the receiver and without: measured on
# 2 cores, one worker, batches of 16 (docs/performance.md), 200 µs gains 5-15 % for envs whose
# batch takes 50-200 µs (Control Suite cheetah, cartpole, finger; InvertedPendulum, Reacher).
_RECV_SPIN_FREE_CORE_US = 200.0
_RECV_SPIN_US = 20.0

# The modules of the families (_native/families.py), as far as this build can import them.
_loaded: dict[str, ModuleType] = {CLASSIC_CONTROL.module: _core}
_unavailable: dict[str, str] = {}  # module name -> why it cannot be imported


def _modules() -> list[ModuleType]:
    for family in FAMILIES:
        name = family.module
        if name in _loaded or name in _unavailable:
            continue
        try:
            if family.preload is not None:
                family.preload()
            _loaded[name] = importlib.import_module(f"aiopool._native.{name}")
        except ImportError as e:
            missing = isinstance(e, ModuleNotFoundError) and e.name == f"aiopool._native.{name}"
            _unavailable[name] = family.not_built if missing and family.not_built else str(e)
    return [_loaded[f.module] for f in FAMILIES if f.module in _loaded]


def _lookup(env_id: str) -> tuple[NativeFamily | None, ModuleType | None]:
    """The family of ``env_id`` and its module: the loaded module that registers it, else the
    family that declares it (loaded or not) and None."""
    _modules()
    for family in FAMILIES:
        module = _loaded.get(family.module)
        if module is not None and env_id in module.list_envs():
            return family, module
    return _declared(env_id), None


def _declared(env_id: str) -> NativeFamily | None:
    """The family whose listed ids hold ``env_id``, else the first whose pattern matches it."""
    return (next((f for f in FAMILIES if env_id in f.ids), None)
            or next((f for f in FAMILIES if f.matches(env_id)), None))


def family_of(env_id: str) -> NativeFamily | None:
    """The native family ``env_id`` belongs to (registered, or declared by a family this build
    cannot load, or just named like one of its ids), or None.

    A pool's ``spec.family`` and ``spec.rejects_nan_actions`` say the same for a pool already made.
    """
    return _lookup(env_id)[0]


def _renders(family: NativeFamily, env_id: str) -> str | None:
    """How ``env_id`` renders: its family's way, where gymnasium's env can draw it (the
    reference's module imported to register its ids, where it is installed)."""
    if (family.renders == "python" and family.reference_module is not None
            and family.reference_prefix is None and env_id not in gym.registry):
        try:
            gym.register_envs(importlib.import_module(family.reference_module))
        except ImportError:
            return None
    if env_id in family.native_frames:
        return "native"
    return family.renders if family.renders != "python" or draws(env_id) else None


def renders(env_id: str) -> bool:
    """Whether ``make(env_id, render_mode="rgb_array")`` renders (as a pool's ``spec.renders``
    says for a pool already made)."""
    family = family_of(env_id)
    return family is not None and _renders(family, env_id) is not None


def _module_for(env_id: str) -> ModuleType:
    return _native_for(env_id)[1]


def _native_for(env_id: str) -> tuple[NativeFamily, ModuleType]:
    """The family and loaded module that register ``env_id``; else a ValueError saying why its
    family is unavailable here, or that the id is unknown (with the closest ids)."""
    family, module = _lookup(env_id)
    if family is not None and module is not None:
        return family, module
    if family is not None and family.module in _unavailable:
        raise ValueError(f"{env_id} is one of aiopool's {family.title} envs, which are "
                         f"unavailable here: {_unavailable[family.module]}")
    ids = list_envs()
    close = difflib.get_close_matches(env_id, ids, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown env id {env_id!r}{hint} (aiopool.list_envs() lists all)")


def list_envs() -> list[str]:
    """Every env id ``make`` accepts."""
    return [env_id for module in _modules() for env_id in module.list_envs()]


def unavailable_families() -> dict[str, str]:
    """Env families this build cannot make (such as Atari when built without ALE), and why."""
    _modules()
    return {f.title: _unavailable[f.module] for f in FAMILIES if f.module in _unavailable}


def make(env_id: str | Callable[[], Any], num_envs: int = 1, batch_size: int | None = None,
         num_threads: int | None = None, seed: int | None = 0, autoreset: str = "next_step",
         *, max_episode_steps: int | None = None, recv_spin_us: float | None = None,
         worker_spin_us: float | None = None, backend: str | None = None,
         num_workers: int | None = None, restart: bool = False,
         step_timeout: float | None = None, on_env_error: str = "raise",
         info_keys: Mapping[str, Any] | None = None, render_mode: str | None = None,
         **env_kwargs: Any) -> Pool:
    """Make a pool of ``num_envs`` copies of ``env_id``.

    Which backend steps the envs:

    - **threads** (``Pool``): aiopool's native C++ envs (``aiopool.list_envs()``), stepped by
      C++ worker threads. Every id aiopool has natively gets this unless you ask otherwise.
    - **processes** (``ProcessPool``): any other gymnasium env, in ``num_workers`` worker
      processes that each host several envs; rows travel through shared memory. Used for a
      registered gymnasium id aiopool has no native env for (``"Ant-v4"``), for a
      factory (``aiopool.make(lambda: MyEnv(level=3), num_envs=8)``: any picklable callable
      returning a ``gymnasium.Env``; lambdas are pickled with cloudpickle), and for any id with
      ``backend="processes"`` (gymnasium's own implementation of it).

    ``pool.backend`` says which one a pool got. Both keep the same contract: ``send``, ``recv``,
    ``stream``, ``step``, autoreset modes, episode statistics, cancellation, timeouts, close.

    Args:
        env_id: a registered id (``aiopool.list_envs()``, or gymnasium's registry), such as
            ``"CartPole-v1"``, or a factory returning a ``gymnasium.Env``.
        num_envs: envs in the pool (sizes are ints, numpy's integers included; env kwargs
            take numpy's scalars as the Python values they hold).
        batch_size: env steps per received batch (default ``num_envs``). ``batch_size <=
            num_envs // 2`` lets stepping and your policy overlap.
        num_threads: worker threads (default: one less than the cores, at least 1), leaving a
            core for the Python thread; never more than ``num_envs``. For the process backend,
            the default of ``num_workers``.
        seed: env ``i`` is seeded ``seed + i`` exactly as ``gymnasium.make(env_id).reset(
            seed=seed + i)``; None draws fresh entropy.
        autoreset: ``"next_step"`` (gymnasium 1.x and EnvPool default), ``"same_step"``
            (final observation in ``info["final_obs"]``) or ``"disabled"``; or gymnasium's
            ``AutoresetMode``.
        max_episode_steps: override gymnasium's time limit; -1: none (as ``gymnasium.make``).
        recv_spin_us: how long ``recv`` busy-polls before sleeping on the eventfd. Default:
            200 µs when ``num_threads`` leaves a core free (the default threads do), else 20
            µs. The spin adapts: where batches take longer, it stops after a few misses.
        worker_spin_us: how long an idle worker busy-polls before sleeping (default 50 µs).
            At most ``cores - 1`` workers poll at once, so the Python thread keeps a core.
        backend: ``"threads"`` or ``"processes"``; default: threads for native ids, processes
            for everything else.
        num_workers: worker processes (process backend; default: the cores, at most
            ``num_envs``). Env ``i`` lives in worker ``i // ceil(num_envs / num_workers)``, and
            only workers that hold an env start: ``ceil(num_envs / ceil(num_envs /
            num_workers))`` of them (4 envs on 3 workers: 2 workers of 2 envs).
        restart: process backend: replace a worker process that dies with a fresh one (its
            envs start new episodes; those that had an action in flight return a reset row),
            instead of raising ``aiopool.WorkerDied``.
        step_timeout: process backend: seconds an env's ``step`` / ``reset`` may take before
            its worker is killed (and then restarted or reported as dead). Default: no limit.
        on_env_error: process backend, when an env raises: ``"raise"`` (default) raises
            ``aiopool.EnvError`` from the receive, carrying the batch and the traceback;
            ``"truncate"`` only marks the row (``info["env_error"]``, ``truncated``).
            Either way the env's next send resets it and ``pool.env_error(i)`` has the text.
        info_keys: process backend: scalar info keys to carry into ``batch.info``, with their
            dtypes (``{"lives": np.int32}``); a key missing from an env's info reads 0.
        render_mode: ``"rgb_array"``: ``pool.render(env_ids)`` gives the envs' current frames,
            equal to the reference's (gymnasium's ``env.render()``, ale-py's, dm_control's
            ``physics.render``; docs/rendering.md); a native env with no reference to draw it
            says so at ``make``. Process backend: each env's own ``render()``, in its worker
            (an id's env is made with ``render_mode``; a factory's must be made with it).
        **env_kwargs: the env's gymnasium constructor arguments (or the factory's).

    Raises:
        ValueError: unknown env id, bad sizes or autoreset mode.
        TypeError: an unknown or mistyped env kwarg (the message lists the valid ones).
    """
    num_envs = pool_size("num_envs", num_envs)
    batch_size, num_threads, num_workers = (
        None if value is None else pool_size(name, value) for name, value in (
            ("batch_size", batch_size), ("num_threads", num_threads),
            ("num_workers", num_workers)))
    if max_episode_steps is not None:
        # gymnasium.make's: a positive limit, or -1 for none (it refuses 0).
        if not _is_int(max_episode_steps) or not (max_episode_steps == -1
                                                  or max_episode_steps >= 1):
            raise ValueError(f"max_episode_steps is {max_episode_steps!r}, expected an int >= 1, "
                             "or -1 for no time limit (as gymnasium.make)")
        max_episode_steps = operator.index(max_episode_steps)
    check_render_mode(render_mode)
    if isinstance(autoreset, gym.vector.AutoresetMode):  # gymnasium's enum, as make_gymnasium
        autoreset = autoreset.value
    if isinstance(autoreset, str):  # or its value ("NextStep")
        autoreset = AUTORESET_NAMES.get(autoreset, autoreset)
    if not isinstance(env_id, str) and not callable(env_id):
        made = (" (an env already made: pass a factory that makes one per env, such as "
                "lambda: MyEnv(...))" if hasattr(env_id, "step") else "")
        raise TypeError(f"env_id is {env_id!r}{made}; expected a registered id (a str) or a "
                        "factory returning a gymnasium.Env")
    if backend not in (None, "threads", "processes"):
        raise ValueError(f"backend is {backend!r}, expected 'threads', 'processes' or None")
    if backend == "threads" and not isinstance(env_id, str):
        raise ValueError("backend='threads' runs aiopool's native envs only; a factory runs in "
                         "worker processes (backend='processes')")
    if isinstance(env_id, str) and (alias := _reference_alias(env_id)) is not None:
        family, native_id = alias
        if backend != "processes":
            raise ValueError(
                f"{env_id!r} is {family.reference_module}'s own gymnasium env; aiopool's native "
                f"{family.title} env of it is {native_id!r} (its semantics and defaults: "
                f"docs/environments/index.md, {family.title}). backend='processes' runs "
                f"{env_id!r} itself in worker processes")
        gym.register_envs(importlib.import_module(family.reference_module or ""))
    if backend is None:
        backend = "threads" if isinstance(env_id, str) and _is_native(env_id) else "processes"
    if backend == "processes":
        return _make_process(env_id, num_envs, batch_size, num_threads, seed, autoreset,
                             max_episode_steps=max_episode_steps, recv_spin_us=recv_spin_us,
                             worker_spin_us=worker_spin_us, num_workers=num_workers,
                             restart=restart, step_timeout=step_timeout,
                             on_env_error=on_env_error, info_keys=info_keys or {},
                             render_mode=render_mode, env_kwargs=env_kwargs)
    assert isinstance(env_id, str)
    if num_workers is not None or restart or step_timeout is not None or info_keys:
        raise TypeError("num_workers, restart, step_timeout and info_keys apply to the process "
                        f"backend; {env_id} runs on native threads (backend='processes' runs "
                        "gymnasium's implementation in worker processes)")
    family, module = _native_for(env_id)
    # gymnasium's rendering kwargs (MuJoCo's width, camera_id, ...): they go to the renderer.
    render_kwargs = {k: env_kwargs.pop(k) for k in family.render_kwargs if k in env_kwargs}
    for key in family.render_config & env_kwargs.keys():
        raise TypeError(f"{env_id}: {key} is not a kwarg of gymnasium's env; render_mode="
                        "'rgb_array' sets it")
    renders = _renders(family, env_id)
    if render_mode is not None and renders is None:
        elsewhere = ("; render it with gymnasium.make(..., render_mode='rgb_array')"
                     if env_id in gym.registry else " (it has no reference that renders)")
        raise ValueError(f"render_mode={render_mode!r}: aiopool's {env_id} does not render"
                         + elsewhere)
    declared = {name for name, _, _ in module.env_config(env_id)[0]}
    if render_mode is not None:
        env_kwargs.update({key: True for key in family.render_config & declared})
    batch_size = num_envs if batch_size is None else batch_size
    if batch_size > num_envs:
        raise ValueError(f"batch_size ({batch_size}) must not exceed num_envs ({num_envs})")
    cores = len(os.sched_getaffinity(0)) or 1
    if num_threads is None:
        num_threads = max(1, min(num_envs, cores - 1))
    num_threads = min(num_threads, num_envs)  # a thread more than the envs has nothing to step
    if autoreset not in _AUTORESET_MODES:
        raise ValueError(f"autoreset is {autoreset!r}, expected one of {_AUTORESET_MODES}")
    # At most cores - 1 workers busy-poll at once, leaving a core for the Python thread.
    max_spinners = num_threads if num_threads < cores else max(1, cores - 1)
    if recv_spin_us is None:
        # With a core left free for it, the receiver spins long enough to catch batches of
        # cheap steps (a receiver parked in the loop costs the worker that rings it a wake-up:
        # ~10 µs on a VM); with every core stepping, briefly (it would spin on a worker's core).
        recv_spin_us = _RECV_SPIN_FREE_CORE_US if num_threads < cores else _RECV_SPIN_US
    if worker_spin_us is None:
        worker_spin_us = 50.0
    config, kinds = _config(module, env_id, env_kwargs)
    # Only for a pool that draws: the hook reads gymnasium's env class, whose import loads the
    # mujoco Python package, which slows MuJoCo's stepping in the whole process (~9 %, Ant).
    draws_frames = (render_mode is not None or bool(render_kwargs)
                    or config.get("obs_type", "state") != "state")
    if family.render_settings is not None and draws_frames:
        config.update(family.render_settings(env_id, render_kwargs, config))
    # None (an optional_* or lines kwarg) is a key left out; rows of lines travel joined.
    numbers = {k: float(v) for k, v in config.items()
               if kinds[k] in ("bool", "int", "float", "optional_int") and v is not None}
    strings = {k: "\n".join(v) if kinds[k] == "lines" else v for k, v in config.items()
               if kinds[k] in ("str", "optional_str", "lines") and v is not None}
    ranges = {k: [float(x) for x in v] for k, v in config.items()
              if kinds[k] in ("range", "numbers", "optional_pos") and v is not None}
    native = cast(_core.Pool, module.Pool(
        env_id, numbers, strings, ranges, num_envs, batch_size, num_threads, autoreset,
        int(worker_spin_us * 1000), _NATIVE_TIME_LIMIT.get(max_episode_steps, max_episode_steps),
        max_spinners))
    kwargs = {k: v for k, v in config.items() if k not in family.prepared}
    spec = EnvSpec.from_native(env_id, native.spec, kwargs, family=family.name,
                               rejects_nan_actions=family.rejects_nan_actions,
                               renders=renders is not None, render_mode=render_mode)
    renderer: Renderer | None = None
    if render_mode is not None:
        headless_defaults()  # gymnasium's MuJoCo envs beside the pool then render as it does
    if render_mode is not None and renders == "python":
        renderer = python_renderer(env_id, {
            **{k: list(v) if kinds[k] == "lines" and v is not None else v
               for k, v in config.items()
               if k not in family.render_config | family.prepared | family.own_kwargs},
            **render_kwargs})
    elif render_mode is not None and renders == "dm_control":
        renderer = DmControlRenderer(env_id, config["model_file"], int(config["control_steps"]),
                                     render_kwargs)
    return Pool(native, spec, seed=seed, autoreset=autoreset, recv_spin_us=recv_spin_us,
                renderer=renderer)


def _reference_alias(env_id: str) -> tuple[NativeFamily, str] | None:
    """The family and native id of a reference's own id of a native env ("ALE/Pong-v5")."""
    for family in FAMILIES:
        prefix = family.reference_prefix
        if prefix and env_id.startswith(prefix):
            native_id = env_id.removeprefix(prefix)
            declared, module = _lookup(native_id)
            if declared is family and (module is not None or family.module in _unavailable):
                return family, native_id  # an env of the family (or one this build lacks)
    return None


def _is_native(env_id: str) -> bool:
    """Whether a native module registers ``env_id``, or it is not gymnasium's either (so
    ``_native_for`` explains what is wrong: a typo, or a family this build lacks)."""
    family, module = _lookup(env_id)
    if module is not None or (family is not None and family.module in _unavailable):
        return True
    return env_id not in gym.registry


def _make_process(env_id: str | Callable[[], Any], num_envs: int, batch_size: int | None,
                  num_threads: int | None, seed: int | None, autoreset: str, *,
                  num_workers: int | None, recv_spin_us: float | None,
                  worker_spin_us: float | None, **options: Any) -> Pool:
    from ._process import default_workers, make_process

    batch_size = num_envs if batch_size is None else batch_size
    if batch_size > num_envs:
        raise ValueError(f"batch_size ({batch_size}) must not exceed num_envs ({num_envs})")
    if autoreset not in _AUTORESET_MODES:
        raise ValueError(f"autoreset is {autoreset!r}, expected one of {_AUTORESET_MODES}")
    workers = num_workers or num_threads or default_workers(num_envs)
    return make_process(env_id, num_envs, batch_size, min(workers, num_envs), seed, autoreset,
                        recv_spin_us=20.0 if recv_spin_us is None else recv_spin_us,
                        worker_spin_us=50.0 if worker_spin_us is None else worker_spin_us,
                        **options)


# The largest pool: env ids are int32 in every batch.
MAX_ENVS = 2**31 - 1


def pool_size(name: str, value: Any) -> int:
    """A pool size (num_envs, ...): a positive int (numpy's integers too) up to MAX_ENVS."""
    if not _is_int(value) or not 1 <= operator.index(value) <= MAX_ENVS:
        default = "" if name == "num_envs" else "; None for the default, as ale-py's 0"
        raise ValueError(f"{name} is {value!r}, expected a positive int (at most {MAX_ENVS})"
                         f"{default}")
    return operator.index(value)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool | np.bool_)


def _is_flag(value: Any) -> bool:
    """A bool kwarg's value: a bool, or 0 / 1 (gymnasium's envs take an int from a config file
    or ``argparse`` as its truth)."""
    return _is_bool(value) or (_is_int(value) and value in (0, 1))


def _is_int(value: Any) -> bool:
    """An int, numpy's integer scalars included (never a bool)."""
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def _is_number(value: Any) -> bool:
    """An int or a float, numpy's scalars included (never a bool)."""
    return isinstance(value, numbers.Real) and not _is_bool(value)


def _numbers(value: Any) -> bool:
    return (isinstance(value, tuple | list) or (isinstance(value, np.ndarray)
                                                and value.ndim == 1)) and all(
        _is_number(x) for x in value)


_CHECKS: dict[str, Callable[[Any], bool]] = {
    "bool": _is_flag,
    "int": _is_int,
    "float": _is_number,
    # A str key also takes an int: Ant's main_body is a body id or name, as in gymnasium.
    "str": lambda v: isinstance(v, str | os.PathLike) or _is_int(v),
    "range": lambda v: _numbers(v) and len(v) == 2,
    "optional_str": lambda v: v is None or isinstance(v, str),
    "lines": lambda v: v is None or _lines(v) is not None,
    "numbers": _numbers,
    "optional_int": lambda v: v is None or _is_int(v),
    "optional_pos": lambda v: v is None or (_numbers(v) and len(v) == 2
                                            and all(_is_int(x) for x in v)),
}
# A checked kwarg as the Python value make() passes on (numpy's scalars become int / float /
# bool, as gymnasium's envs read them: its arithmetic on them gives the same numbers).
_PLAIN: dict[str, Callable[[Any], Any]] = {
    "bool": bool, "int": operator.index, "float": float,
    "range": lambda v: tuple(float(x) for x in v),
    "numbers": lambda v: tuple(x.item() if isinstance(x, np.generic) else x for x in v),
    "optional_int": lambda v: None if v is None else operator.index(v),
    "optional_pos": lambda v: None if v is None else tuple(operator.index(x) for x in v),
}
_EXPECTED = {"bool": "a bool (or 0 / 1)", "int": "an int", "float": "a number", "str": "a str",
             "range": "a (low, high) pair of numbers", "optional_str": "a str or None",
             "lines": "None or rows of text (a list of str, or of lists of 1-character str)",
             "numbers": "a tuple of numbers", "optional_int": "an int or None",
             "optional_pos": "an (x, y) pair of ints or None"}


def _default(kind: str, default: Any) -> Any:
    """A key's default as the registry reports it, as make() passes a kwarg of its kind."""
    if kind in ("bool", "int", "float"):
        return {"bool": bool, "int": int, "float": float}[kind](default)
    if kind == "lines" and default is not None:
        return tuple(default.split("\n"))
    if kind == "numbers":
        return tuple(default)
    if kind == "optional_pos" and default is not None:
        return tuple(int(x) for x in default)
    return default


def _lines(value: Any) -> tuple[str, ...] | None:
    """Rows of text (FrozenLake's ``desc``: str rows, or rows of 1-character str or bytes, as
    ``np.asarray(desc, dtype="c")`` takes them), or None if ``value`` is not that."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        return None
    rows = []
    for row in value:
        if isinstance(row, bytes | np.bytes_):
            row = bytes(row).decode("ascii", "replace")
        if not isinstance(row, str):
            if isinstance(row, Sequence | np.ndarray) and all(
                    isinstance(c, str | bytes | np.bytes_) and len(c) == 1 for c in row):
                row = "".join(c if isinstance(c, str) else bytes(c).decode("ascii", "replace")
                              for c in row)
            else:
                return None
        if "\n" in row:
            return None
        rows.append(row)
    return tuple(rows)


_RENDER_KWARGS = frozenset({"width", "height", "camera_id", "camera_name",
                            "default_camera_config", "max_geom", "visual_options"})


def _config(module: ModuleType, env_id: str,
            kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The env's kwargs with defaults filled in, and each one's kind."""
    keys, _ = module.env_config(env_id)
    valid = {name: (kind, default) for name, kind, default in keys}
    family = family_of(env_id)
    hidden = family.render_config | family.prepared if family is not None else frozenset()
    rendering = sorted(family.render_kwargs) if family is not None else []
    public = [k for k in valid if k not in hidden]  # what a user may pass (and be told of)
    names = ", ".join(public) or "none"
    if rendering:
        names += "; rendering: " + ", ".join(rendering)
    config: dict[str, Any] = {}
    for name, (kind, default) in valid.items():
        config[name] = _default(kind, default)
    for name, value in kwargs.items():
        if name not in valid or (name in hidden and family and name in family.prepared):
            why = ""
            if name in _RENDER_KWARGS:
                why = (f" (not a rendering kwarg of {env_id}'s reference)" if rendering else
                       f" (a rendering kwarg: {env_id} renders at its reference's size, with "
                       "render_mode='rgb_array' only)" if family is not None and family.renders
                       else " (a rendering kwarg: these envs do not render yet)")
            close = difflib.get_close_matches(name, public + rendering, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            if family is not None and name in family.kwarg_hints:
                hint = f" ({family.kwarg_hints[name]})"
            raise TypeError(f"{env_id} got an unexpected keyword argument {name!r}{why}{hint}; "
                            f"valid: {names}")
        kind = valid[name][0]
        if not _CHECKS[kind](value):
            raise TypeError(f"{env_id} keyword argument {name!r} is {value!r}, expected "
                            f"{_EXPECTED[kind]}")
        if kind in _PLAIN:
            value = _PLAIN[kind](value)
        if kind == "str":
            value = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
        if kind == "range" and any(math.isnan(x) for x in value):
            raise ValueError(f"{env_id} keyword argument {name!r} is {value!r}; NaN bound")
        if kind == "numbers" and len(value) != len(valid[name][1]):
            raise TypeError(f"{env_id} keyword argument {name!r} is {value!r}, expected "
                            f"{len(valid[name][1])} numbers")
        if kind == "lines" and value is not None:
            value = _lines(value)
            if value is not None and not all(row.isascii() for row in value):  # bytes, to gymnasium
                raise ValueError(f"{env_id} keyword argument {name!r} is {value!r}: rows of "
                                 "ASCII characters expected")
        config[name] = value
    if "xml_file" in config:
        config["xml_file"] = _mujoco_model_path(env_id, config["xml_file"])
    if "rom_path" in config:
        config["rom_path"] = _atari_rom_path(env_id, config["rom_path"])
    if family is not None and family.prepare is not None:
        config = family.prepare(env_id, config)
    return config, {name: kind for name, (kind, _) in valid.items()}


def _atari_rom_path(env_id: str, rom_path: str | os.PathLike[str]) -> str:
    """A ROM file: as given when it starts with ".", "/" or "~", else a ROM of the installed
    ale-py wheel by file name (``"pong.bin"``), found as ale-py finds it (``ALE_ROMS_DIR``,
    md5 check)."""
    path = os.fspath(rom_path)
    if path.startswith("~"):
        path = os.path.expanduser(path)
    elif not path.startswith((".", "/")):
        try:
            from ale_py import roms
        except ImportError as e:
            raise ValueError(f"{env_id} needs ale-py installed for its ROM {path!r} "
                             f"(pip install ale-py==0.12.1): {e}") from None
        found = roms.get_rom_path(path.removesuffix(".bin"))
        if found is None:
            raise ValueError(f"{env_id}: ale-py has no ROM {path!r}")
        path = os.fspath(found)
        return os.path.abspath(path)
    if not os.path.isfile(path):
        raise OSError(f"ROM file {path} does not exist")
    path = os.path.abspath(path)
    stat = os.stat(path)
    _check_rom(env_id, path, stat.st_size, stat.st_mtime_ns)
    return path


@functools.cache
def _check_rom(env_id: str, path: str, size: int, mtime_ns: int) -> None:
    """Load a ROM file of the user's with ALE in a child process first: ALE ends the process
    (``exit(1)``) on a file it cannot make a console of, or a ROM it has no settings for. Once
    per file (and its size and time)."""
    code = "import sys, ale_py; ale_py.ALEInterface().loadROM(sys.argv[1])"
    try:
        run = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        raise ValueError(f"{env_id}: ALE did not load the ROM {path} within 120 s") from None
    if run.returncode != 0:
        said = [line.strip() for line in run.stderr.splitlines()
                if line.strip() and not line.startswith(("A.L.E:", "[Powered"))]
        raise ValueError(f"{env_id}: ALE cannot load {path} as a ROM (it would end the "
                         f"process): {' '.join(said[-3:]) or f'exit {run.returncode}'}")


def _mujoco_model_path(env_id: str, xml_file: str | os.PathLike[str]) -> str:
    """Where gymnasium's MujocoEnv looks for ``xml_file``: as given when it starts with "." or
    "/", the home directory for "~", else gymnasium's own assets directory."""
    path = os.fspath(xml_file)
    if path.startswith("~"):
        path = os.path.expanduser(path)
    elif not path.startswith((".", "/")):
        spec = importlib.util.find_spec("gymnasium")
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"{env_id} needs gymnasium installed for its MJCF asset {path!r}")
        path = os.path.join(spec.submodule_search_locations[0], "envs", "mujoco", "assets", path)
    if not os.path.exists(path):
        raise OSError(f"File {path} does not exist")
    return os.path.abspath(path)
