"""A ``gymnasium.vector.VectorEnv`` over a pool, for code that calls ``reset()`` / ``step()``.

It behaves like ``gymnasium.make_vec(env_id, num_envs, vectorization_mode="sync",
vector_kwargs={"autoreset_mode": ...})``: the same observations, rewards, terminations,
truncations and autoreset behaviour step for step, and gymnasium's vector wrappers work on top.

Example:
    >>> envs = aiopool.make_gymnasium("CartPole-v1", num_envs=8)
    >>> obs, info = envs.reset(seed=42)
    >>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, create_empty_array

from ..registry import AUTORESET_NAMES
from ..spec import text_dtype
from . import (
    Lockstep,
    Rows,
    Seeds,
    episode_ended,
    obs_map,
    optional_info_keys,
    reference_method,
    refuse_autoreset,
    render_metadata,
)

__all__ = ["GymnasiumVectorEnv", "make_gymnasium"]

_POOL_MODES = {AutoresetMode(value): name for value, name in AUTORESET_NAMES.items()}

Array = npt.NDArray[Any]


class GymnasiumVectorEnv(gym.vector.VectorEnv[Array, Array, Array]):
    """``num_envs`` native envs stepped together by C++ workers; build it with ``make_gymnasium``.

    Infos are a dict of arrays with gymnasium's ``_key`` masks: the pool's ``elapsed_step``,
    ``episode_return`` and ``episode_length`` (the ended episode's where ``terminated |
    truncated``) and family extras; with ``autoreset_mode="same_step"`` also ``final_obs`` (an
    object array, as gymnasium's) and ``final_info`` where an episode ended. Every array is
    the caller's own copy, except the all-True ``_key`` masks of a step (or of a reset of
    every env): those are read-only, and the same arrays at every step.

    Differences from ``SyncVectorEnv``: ``reset()`` without a seed on a fresh env continues
    from the ``seed`` given to ``make_gymnasium`` (default 0) rather than OS entropy; ``reset``
    takes no options other than ``reset_mask``; an info key's array has the dtype of the
    family's column, where ``SyncVectorEnv`` takes the first value's type (toy text's ``prob``
    is float64 here; gymnasium's int ``prob`` of a reset makes it int64 there, which truncates
    another env's fractional ``prob`` on a step that autoresets one). With
    ``render_mode="rgb_array"``, ``render()`` gives each env's frame, as
    ``SyncVectorEnv.render()`` (``RecordVideo`` records them). The envs live in C++:
    ``get_attr`` / ``call`` answer ``spec``, ``np_random_seed``, ``observation_space``,
    ``action_space``, ``metadata`` and ``render_mode``, and raise AttributeError for other names;
    ``set_attr`` raises (pass constructor kwargs to ``make_gymnasium`` instead). A string part
    of the observation (a process-backed env's ``Text`` or minigrid's mission) is a tuple of
    ``str``, one per env, as ``SyncVectorEnv`` gives it (the pool's batches hold numpy strings).

    ``copy=False`` (as ``SyncVectorEnv(copy=False)``) returns observations without copying
    them: a step's are the pool's read-only view of its batch (a new array each step, never
    overwritten), a reset's are the adapter's own buffer, which later resets write into.
    """

    def __init__(self, env_id: str | Callable[[], Any], num_envs: int = 1, *,
                 seed: int | None = 0,
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 num_threads: int | None = None, copy: bool = True,
                 **make_kwargs: Any) -> None:
        refuse_autoreset(make_kwargs, "make_gymnasium", "pass autoreset_mode= (gymnasium's "
                         "AutoresetMode: 'next_step', 'same_step' or 'disabled')")
        mode = _autoreset_mode(autoreset_mode)
        if make_kwargs.get("render_mode") is None:
            make_kwargs.pop("render_mode", None)
        self._steps = Lockstep(env_id, num_envs, seed=seed, autoreset=_POOL_MODES[mode],
                               num_threads=num_threads, copy_obs=copy, **make_kwargs)
        self.copy = copy
        pool = self._steps.pool
        self.num_envs = num_envs = self._steps.num_envs  # an int, whatever int type came
        self.autoreset_mode = mode
        self._env_metadata = render_metadata(pool)
        self.metadata = {"autoreset_mode": mode, **self._env_metadata}
        self.render_mode = pool.render_mode
        self.single_observation_space = pool.single_observation_space
        self.single_action_space = pool.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        # A factory (the process backend) has no registered id: the spec names its env's id.
        spec_id = env_id if isinstance(env_id, str) else pool.spec.id
        self._env_id = spec_id
        # gymnasium's registration of the id, where it has one: its reward_threshold (which
        # training scripts stop at) and nondeterministic flag hold for aiopool's env too.
        ref = gym.registry.get(spec_id)
        threshold = None if ref is None else ref.reward_threshold
        nondeterministic = False if ref is None else ref.nondeterministic
        steps = pool.spec.max_episode_steps or None
        # A factory's name as an id gymnasium's EnvSpec accepts ("<lambda>" -> "_lambda_").
        spec_id = re.sub(r"[^\w:.-]", "_", spec_id)
        self.spec = EnvSpec(spec_id, entry_point="aiopool.adapters.gymnasium:make_gymnasium",
                            reward_threshold=threshold, nondeterministic=nondeterministic,
                            max_episode_steps=steps,
                            kwargs={**make_kwargs, "num_envs": num_envs, "seed": seed,
                                    "autoreset_mode": mode, "copy": copy})
        # Each env's spec has the registration's kwargs under the caller's, as gymnasium.make
        # gives its env (Blackjack-v1's sab and natural).
        self._single_spec = EnvSpec(spec_id, entry_point="aiopool:make",
                                    reward_threshold=threshold,
                                    nondeterministic=nondeterministic, max_episode_steps=steps,
                                    kwargs={**(ref.kwargs if ref is not None else {}),
                                            **make_kwargs})
        # gymnasium's Env.np_random_seed of each env: the seed of its last seeded reset.
        self._env_seeds: list[int | None] = [
            None if seed is None else seed + i for i in range(num_envs)]
        # The latest obs of every env, for partial resets; after a step, the lockstep's
        # last_obs (read-only: the caller's copy may have been changed) until the next reset.
        # Kept as the pool's arrays; string parts go out as gymnasium's tuples (_to_gym).
        self._text = _text_parts(self.single_observation_space)
        self._obs: Any = _empty_obs(self.single_observation_space, num_envs)
        self._stepped = False
        self._ended = np.zeros(num_envs, dtype=np.bool_)  # for DISABLED: must reset first
        self._disabled = mode is AutoresetMode.DISABLED
        # The infos of a step of every env, less the values: each key's all-True mask, made
        # once and read-only. The lockstep starts the info of every call of all envs with a
        # copy of this dict (its info_base) and sets the values in place.
        # Keys an env sets on some steps only (optional_info_keys) get their masks per call.
        self._optional = optional_info_keys(self._steps.pool.spec.info, self._steps.plan.keys)
        self._keys = tuple(k for k in self._steps.plan.keys
                           if k not in self._optional and k not in self._optional.values())
        self._whole: dict[str, Any] = {}
        for key in self._keys:
            mask = np.ones(num_envs, dtype=np.bool_)
            mask.flags.writeable = False
            self._whole[key], self._whole[f"_{key}"] = None, mask
        self._steps.info_base = self._whole

    def reset(self, *, seed: Seeds = None,
              options: dict[str, Any] | None = None) -> tuple[Array, dict[str, Any]]:
        """Reset every env, or those of ``options["reset_mask"]`` (the full batch is returned).

        Args:
            seed: None, an int (env ``i`` gets ``seed + i``) or one seed (or None) per env.
            options: only ``{"reset_mask": bool array of shape (num_envs,)}``.
        """
        ids = None
        options = dict(options or {})
        if "reset_mask" in options:
            ids = np.flatnonzero(self._check_mask(options.pop("reset_mask"))).astype(np.int32)
            if not self._steps.ever_reset and len(ids) < self.num_envs:
                raise ValueError("options['reset_mask'] before the first reset(): the first "
                                 "reset() resets every env (no reset_mask, or an all-True one)")
        if options:
            raise ValueError(f"reset options {sorted(options)} are not supported: aiopool's "
                             "native envs take no reset options (only reset_mask is understood)")
        if self._stepped:
            obs_map(lambda p: p[0].__setitem__(slice(None), p[1]),
                    [self._obs, self._steps.last_obs])
            self._stepped = False
        rows = self._steps.reset(ids, seed)
        for i in rows.env_id.tolist():
            if isinstance(seed, int | np.integer):
                self._env_seeds[i] = int(seed) + i
            elif seed is not None and (s := seed[i]) is not None:
                self._env_seeds[i] = int(s)
        obs_map(lambda p: p[0].__setitem__(rows.env_id, p[1]), [self._obs, rows.obs])
        self._ended[rows.env_id] = False
        obs = obs_map(lambda p: p[0].copy(), [self._obs]) if self.copy else self._obs
        if self._text:
            obs = _to_gym(obs, self._text)
        return obs, self._infos(rows)

    def step(self, actions: npt.ArrayLike) -> tuple[
            Array, npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.bool_],
            dict[str, Any]]:
        """Step every env once; see the class docstring for the infos."""
        if self._disabled and self._ended.any():
            raise ValueError(
                f"envs {np.flatnonzero(self._ended).tolist()} ended their episodes and "
                "autoreset_mode is DISABLED; reset them first with "
                "reset(options={'reset_mask': terminated | truncated})")
        _, obs, reward, terminated, truncated, info = rows = self._steps.step(actions)
        self._stepped = True
        if self._disabled:
            self._ended = terminated | truncated
        if "final_obs" in info or "final_info" in info or self._optional:
            info = self._infos(rows)  # else already gymnasium's infos
        if self._text:
            obs = _to_gym(obs, self._text)
        return obs, reward, terminated, truncated, info

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """One value of ``name`` per env, as ``SyncVectorEnv.get_attr``."""
        per_env: dict[str, Callable[[int], Any]] = {"np_random_seed": lambda i: self._env_seeds[i],
                   "spec": lambda i: self._single_spec,
                   "observation_space": lambda i: self.single_observation_space,
                   "action_space": lambda i: self.single_action_space,
                   "metadata": lambda i: dict(self._env_metadata),
                   "render_mode": lambda i: self.render_mode}
        if name not in per_env:
            raise AttributeError(
                f"aiopool's {self._env_id} envs run in C++ and have no attribute {name!r}; "
                f"get_attr and call know {sorted(per_env)}")
        return tuple(per_env[name](i) for i in range(self.num_envs))

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """As ``SyncVectorEnv.call``: the attributes ``get_attr`` knows, and the reference env's
        methods the family answers (Atari's ``get_action_meanings``)."""
        method = reference_method(self._steps.pool, name)
        if method is not None and not (args or kwargs):
            value = method()
            return tuple(copy.deepcopy(value) for _ in range(self.num_envs))  # one per env
        if args or kwargs:
            raise AttributeError(f"aiopool's {self._env_id} envs run in C++ and have no Python "
                                 f"method {name!r} to call with arguments")
        return self.get_attr(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        raise NotImplementedError(
            f"aiopool's {self._env_id} envs run in C++ and their attributes cannot be set "
            f"({name!r}); pass the env's constructor kwargs to make_gymnasium instead")

    def render(self) -> tuple[Any, ...] | None:
        """Each env's current frame (``render_mode="rgb_array"``), as ``SyncVectorEnv``; a
        None per env, with gymnasium's warning, without a render_mode."""
        pool = self._steps.pool
        if pool.render_mode is None:
            gym.logger.warn("You are calling render method without specifying any render mode. "
                            "You can specify the render_mode at initialization, e.g. "
                            f"make_gymnasium({self._env_id!r}, render_mode='rgb_array')")
            return (None,) * self.num_envs
        return tuple(pool.render())

    def close_extras(self, **kwargs: Any) -> None:
        self._steps.close()

    def __repr__(self) -> str:
        return (f"GymnasiumVectorEnv({self._env_id!r}, num_envs={self.num_envs}, "
                f"autoreset_mode={self.autoreset_mode})")

    # -- internals ------------------------------------------------------------------------

    def _check_mask(self, mask: Any) -> npt.NDArray[np.bool_]:
        # The same checks, in the same order, as gymnasium's SyncVectorEnv.
        if not isinstance(mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(mask)}")
        if mask.shape != (self.num_envs,):
            raise ValueError(f"`options['reset_mask']` must have shape `({self.num_envs},)`, "
                             f"got {mask.shape}")
        if mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got "
                            f"{mask.dtype}")
        if not mask.any():
            raise ValueError("`options['reset_mask']` must contain a boolean array with at "
                             f"least one True value, got reset_mask={mask}")
        return mask

    def _infos(self, rows: Rows) -> dict[str, Any]:
        """gymnasium's dict of arrays with ``_key`` masks, over all ``num_envs`` envs."""
        n = self.num_envs
        info = rows.info
        final_obs = info.get("final_obs")  # present only if an episode ended
        final_info = info.get("final_info")
        if len(rows.env_id) == n:
            infos = info  # the values set in a copy of self._whole (the lockstep's info_base)
            if final_obs is not None or final_info is not None:  # in gymnasium's form, below
                infos.pop("final_obs", None)
                infos.pop("final_info", None)
        else:
            infos = {}
            masks = np.zeros((len(self._keys), n), dtype=np.bool_)
            masks[:, rows.env_id] = True
            for key, mask in zip(self._keys, masks, strict=True):
                infos[key], infos[f"_{key}"] = _spread(info[key], rows.env_id, n), mask
        for key, mask_key in self._optional.items():  # only where set, if anywhere
            value, mask = info.pop(key), info.pop(mask_key)  # (info is infos on whole calls)
            if mask.any():
                infos[key], infos[mask_key] = (_spread(value, rows.env_id, n),
                                               _spread(mask, rows.env_id, n))
        if final_obs is not None or final_info is not None:
            ended = np.zeros(n, dtype=np.bool_)
            ended[rows.env_id] = episode_ended(rows.terminated, rows.truncated,
                                                 final_info)
            if final_obs is not None and ended.any():
                objects = np.full(n, None, dtype=object)
                for row, i in enumerate(rows.env_id.tolist()):
                    if ended[i]:
                        objects[i] = _row_of(final_obs, row)
                infos["final_obs"], infos["_final_obs"] = objects, ended.copy()
                if final_info is not None:
                    inner: dict[str, Any] = {}
                    for key, value in final_info.items():
                        if key in self._optional.values():
                            continue
                        set_at = ended
                        if key in self._optional:
                            set_at = ended & _spread(final_info[self._optional[key]],
                                                     rows.env_id, n)
                            if not set_at.any():
                                continue
                        inner[key] = _spread(value, rows.env_id, n)
                        inner[f"_{key}"] = set_at.copy()
                    infos["final_info"], infos["_final_info"] = inner, ended.copy()
        return infos


def _autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    """An AutoresetMode from itself, its value (``"NextStep"``) or aiopool's name."""
    for mode, name in _POOL_MODES.items():
        if value in (mode, mode.value, name):
            return mode
    raise ValueError(f"autoreset_mode is {value!r}, expected a gymnasium AutoresetMode or one "
                     f"of {[m.value for m in _POOL_MODES]} or {list(_POOL_MODES.values())}")


def _row_of(obs: Any, row: int) -> Any:
    """One env's observation in a batch's obs: an array row, or for Dict / Tuple spaces (the
    process backend's dict / tuple of arrays) the dict / tuple of that row, as the env gave; a
    Discrete part is a Python int, as toy text's envs give it (numpy's scalar otherwise)."""
    if isinstance(obs, dict):
        return {key: _item(value[row]) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_item(value[row]) for value in obs)
    return _item(obs[row])


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.integer | np.str_) else value


def _text_parts(space: gym.spaces.Space[Any]) -> tuple[Any, ...]:
    """The keys (positions) of the string parts of a Dict (Tuple) observation space, or
    (None,) for a space of strings itself (``spec.text_dtype``; process-backed envs)."""
    if text_dtype(space) is not None:
        return (None,)
    if isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        items = space.spaces.items() if isinstance(space, gym.spaces.Dict) else enumerate(
            space.spaces)
        return tuple(key for key, sub in items if text_dtype(sub) is not None)
    return ()


def _empty_obs(space: gym.spaces.Space[Any], n: int) -> Any:
    """gymnasium's ``create_empty_array``, but a string part is a numpy array of strings, as
    the pool's batches hold it (gymnasium's is a tuple of str, which cannot be written into)."""
    text = text_dtype(space)
    if text is not None:
        return np.zeros(n, dtype=text)
    if _text_parts(space):
        if isinstance(space, gym.spaces.Dict):
            return {key: _empty_obs(sub, n) for key, sub in space.spaces.items()}
        return tuple(_empty_obs(sub, n) for sub in space.spaces)  # type: ignore[attr-defined]
    return create_empty_array(space, n, fn=np.zeros)


def _to_gym(obs: Any, text: tuple[Any, ...]) -> Any:
    """A batch's obs with its string parts (``text``: ``_text_parts``) as tuples of str, as
    gymnasium's ``SyncVectorEnv`` gives them (``batch_space`` makes a ``Tuple`` of a ``Text``)."""
    if text == (None,):
        return tuple(obs.tolist())
    if isinstance(obs, dict):
        return {key: tuple(value.tolist()) if key in text else value
                for key, value in obs.items()}
    return tuple(tuple(value.tolist()) if key in text else value
                 for key, value in enumerate(obs))


def _spread(value: Array, env_id: npt.NDArray[np.int32], n: int) -> Array:
    """``value`` (one row per ``env_id``) as an array over all ``n`` envs, zeros elsewhere."""
    if len(env_id) == n:
        return value
    out = np.zeros((n, *value.shape[1:]), dtype=value.dtype)
    out[env_id] = value
    return out


def make_gymnasium(env_id: str | Callable[[], Any], num_envs: int = 1, *, seed: int | None = 0,
                   autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                   num_threads: int | None = None, copy: bool = True,
                   **make_kwargs: Any) -> GymnasiumVectorEnv:
    """A ``gymnasium.vector.VectorEnv`` of ``num_envs`` copies of ``env_id``.

    Args:
        env_id: a registered id (``aiopool.list_envs()``), such as ``"CartPole-v1"``, or what
            else ``aiopool.make`` takes: any gymnasium id or an env factory (worker processes).
        num_envs: envs stepped together.
        seed: the seed of the first ``reset()`` when it is given none (env ``i`` uses
            ``seed + i``).
        autoreset_mode: a ``gymnasium.vector.AutoresetMode`` (or its value, such as
            ``"NextStep"``, or aiopool's ``"next_step"`` / ``"same_step"`` / ``"disabled"``).
        num_threads: worker threads (default: one less than the cores).
        copy: False returns observations without copying them, as ``SyncVectorEnv(copy=False)``
            (see ``GymnasiumVectorEnv``): saves a copy per call, most for Atari frames.
        **make_kwargs: the env's constructor kwargs and ``aiopool.make`` options such as
            ``max_episode_steps``.

    Example:
        >>> # envs = gymnasium.make_vec("CartPole-v1", 8, vectorization_mode="sync")
        >>> envs = aiopool.make_gymnasium("CartPole-v1", 8)
    """
    for name in ("vectorization_mode", "vector_kwargs", "wrappers"):
        if name in make_kwargs:
            raise TypeError(f"{name} is gymnasium.make_vec's: make_gymnasium makes one vector "
                            "env over aiopool's pool, which takes no vectorization mode; wrap "
                            "it in gymnasium's vector wrappers (gymnasium.wrappers.vector)")
    return GymnasiumVectorEnv(env_id, num_envs, seed=seed, autoreset_mode=autoreset_mode,
                              num_threads=num_threads, copy=copy, **make_kwargs)
