"""EnvSpec: what a pool's envs look like, as gymnasium spaces."""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np


@dataclass(frozen=True)
class InfoField:
    """A per-row array an env family adds to ``batch.info`` (such as ``lives``)."""

    name: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]


@dataclass(frozen=True)
class EnvSpec:
    """Spaces, dtypes and time limit of one env of a pool.

    Attributes:
        id: the registered env id, such as ``"CartPole-v1"``.
        observation_space: the single-env observation space (as gymnasium's env has it).
        action_space: the single-env action space.
        max_episode_steps: gymnasium's time limit (0: none).
        info: family extras present in ``batch.info``.
        config: the env's constructor kwargs, defaults overridden by the ones given to make().
        family: the native env family (``"classic_control"``, ``"mujoco"``, ``"dmc"``, ...:
            ``aiopool/_native/families.py``); None for envs that are not aiopool's own (the
            process backend's gymnasium envs and factories).
        rejects_nan_actions: whether ``send`` rejects NaN in continuous actions (classic
            control, Box2D, where a NaN would poison the state of most envs; the process
            backend's envs); ±inf is taken (the native envs clip it as gymnasium's do). False
            for families whose simulator takes NaN as gymnasium passes it (MuJoCo, the Control
            Suite).
        renders: whether the env can render (``make(..., render_mode="rgb_array")``).
        render_mode: ``"rgb_array"`` where the pool renders (``pool.render``), else None.
        render_shape: ``(height, width, 3)`` of its frames where the env draws them in C++;
            () where they come from gymnasium's drawing code (their size is the reference's).
        render_fps: the frame rate of the reference's videos where the C++ env declares it
            (gymnasium's ``metadata["render_fps"]``); 0.0 otherwise.
        obs_parts: for a native env whose observation is a ``Tuple`` or ``Dict``, the key
            (position for a Tuple) and shape of each part, in the order its row holds them
            one after another (a Dict space lists its keys sorted); () otherwise.
    """

    id: str
    observation_space: gym.spaces.Box
    action_space: gym.spaces.Space[Any]
    max_episode_steps: int
    info: tuple[InfoField, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    family: str | None = None
    rejects_nan_actions: bool = True
    renders: bool = False
    render_mode: str | None = None
    render_shape: tuple[int, ...] = ()
    render_fps: float = 0.0
    obs_parts: tuple[tuple[str | int, tuple[int, ...]], ...] = ()

    @classmethod
    def from_native(cls, env_id: str, native: dict[str, Any], config: dict[str, Any], *,
                    family: str, rejects_nan_actions: bool, renders: bool = False,
                    render_mode: str | None = None) -> EnvSpec:
        parts = [(key, _space(d)) for key, d in native.get("obs_parts", ())]
        obs_space = _space(native["observation_space"])
        keys: list[str | int] = [key for key, _ in parts]
        if native.get("obs_structure") == "tuple":
            keys = list(range(len(parts)))
            obs_space = gym.spaces.Tuple([space for _, space in parts])
        elif native.get("obs_structure") == "dict":
            obs_space = gym.spaces.Dict(dict(parts))
        return cls(
            id=env_id,
            observation_space=obs_space,  # type: ignore[arg-type,unused-ignore]
            action_space=_space(native["action_space"]),
            max_episode_steps=int(native["max_episode_steps"]),
            info=tuple(InfoField(n, np.dtype(d), tuple(s)) for n, d, s in native["info"]),
            config=dict(config),
            family=family,
            rejects_nan_actions=rejects_nan_actions,
            renders=renders,
            render_mode=render_mode,
            render_shape=tuple(int(d) for d in native.get("render_shape", ())),
            render_fps=float(native.get("render_fps", 0.0)),
            obs_parts=tuple((key, tuple(space.shape or ())) for key, (_, space)
                            in zip(keys, parts, strict=True)),
        )


TEXT_WIDTH = 512
"""The characters a string observation holds in a batch when its space declares no maximum
(minigrid's ``MissionSpace``): EnvPool's width for BabyAI missions, whose longest in 300 resets
of BossLevel and SynthSeq had 129 characters. A longer string is an env error, not cut."""
MISSION_CHARSET = string.ascii_letters + string.digits + " ,.'"
"""The characters of a native env's text observation space (``Text(max_length=TEXT_WIDTH)``):
minigrid's and BabyAI's missions are lower-case words, commas and spaces."""


def text_dtype(space: gym.spaces.Space[Any]) -> np.dtype[Any] | None:
    """The numpy dtype a batch holds a string observation of ``space`` in, one string per
    row: ``<U{max_length}`` for a ``Text`` space; ``<U{TEXT_WIDTH}`` for another space of
    strings (a numpy ``str`` dtype, as minigrid's ``MissionSpace`` has) unless its dtype gives
    a width; None for a space that is not of strings."""
    if isinstance(space, gym.spaces.Text):
        return np.dtype(f"<U{max(space.max_length, 1)}")
    dtype = getattr(space, "dtype", None)
    if dtype is not None and np.dtype(dtype).kind == "U":
        return np.dtype(dtype) if np.dtype(dtype).itemsize else np.dtype(f"<U{TEXT_WIDTH}")
    return None


def _space(d: dict[str, Any]) -> gym.spaces.Space[Any]:
    dtype = np.dtype(d["dtype"])
    if d["kind"] == "text":  # a row holds it as a `<U{max_length}` string (text_dtype)
        return gym.spaces.Text(max_length=int(d["shape"][0]), min_length=0,
                               charset=MISSION_CHARSET)
    if d["kind"] == "discrete":
        return gym.spaces.Discrete(int(d["n"]))
    shape = tuple(d["shape"])
    low = np.array(d["low"], dtype=np.float64).reshape(shape).astype(dtype)
    high = np.array(d["high"], dtype=np.float64).reshape(shape).astype(dtype)
    return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
