"""A Stable-Baselines3 ``VecEnv`` over a pool (needs ``stable-baselines3``).

It behaves like SB3's ``DummyVecEnv`` over ``Monitor``-wrapped gymnasium envs: SB3's same-step
autoreset (a finished env resets within the step; its last observation is in
``infos[i]["terminal_observation"]``), ``infos[i]["TimeLimit.truncated"]``, float32 rewards,
seeds applied at the next ``reset()``, and Monitor's ``infos[i]["episode"]`` (``r``, ``l``,
``t``) where an episode ended, so SB3 logs ``rollout/ep_rew_mean`` without a wrapper. For
Atari, ``r`` is the game score (the episode's unclipped rewards, ``info["episode_score"]``), as
SB3's own Atari stack reports it (Monitor below ClipRewardEnv), while the step rewards stay
clipped. The family's info keys (Atari's ``lives``, ``reward_unclipped``, ...; MuJoCo's reward
terms; Taxi's ``action_mask``) are in ``infos[i]``, the terminal step's where an episode ended,
as the env's info holds them: Python scalars, and numpy arrays for keys with a shape. After
``reset()``, ``reset_infos[i]`` holds them for env ``i``'s reset (as DummyVecEnv's).

Example:
    >>> from stable_baselines3 import PPO
    >>> env = aiopool.make_sb3("CartPole-v1", num_envs=8)
    >>> PPO("MlpPolicy", env).learn(50_000)

The ``type: ignore`` on the imports keeps mypy clean where the optional extra is not installed.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from stable_baselines3.common.monitor import Monitor  # type: ignore[import-not-found,unused-ignore]
from stable_baselines3.common.vec_env import VecEnv  # type: ignore[import-not-found,unused-ignore]
from stable_baselines3.common.vec_env.base_vec_env import (  # type: ignore[import-not-found,unused-ignore]
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from . import (
    Lockstep,
    episode_ended,
    obs_map,
    optional_info_keys,
    reference_method,
    refuse_autoreset,
    render_metadata,
)

__all__ = ["Sb3VecEnv", "make_sb3"]

# The pool's own info keys; every other key is the env family's and is passed through.
_POOL_KEYS = frozenset({"elapsed_step", "episode_return", "episode_length", "final_obs",
                        "final_info"})


class Sb3VecEnv(VecEnv):  # type: ignore[misc,unused-ignore]
    """``num_envs`` native envs stepped together; build it with ``make_sb3``.

    ``step_async`` sends the actions to the C++ workers and returns at once; ``step_wait``
    waits for them with the GIL released. The envs live in C++: ``get_attr`` answers
    ``render_mode``, ``observation_space``, ``action_space``, ``spec`` and ``metadata``;
    ``set_attr`` and ``env_method`` raise. With ``render_mode="rgb_array"``, ``get_images()``
    gives each env's frame and ``render()`` SB3's tiled image of them (``VecVideoRecorder``
    records it).
    """

    def __init__(self, env_id: str, num_envs: int = 1, *, seed: int | None = 0,
                 num_threads: int | None = None, **make_kwargs: Any) -> None:
        refuse_autoreset(make_kwargs, "make_sb3", "an SB3 VecEnv resets an env in the step "
                         "that ends its episode (the last observation in its info's "
                         "terminal_observation)")
        self._steps = Lockstep(env_id, num_envs, seed=seed, autoreset="same_step",
                               num_threads=num_threads, **make_kwargs)
        pool = self._steps.pool
        self._env_id = env_id
        self._attrs: dict[str, Any] = {
            "render_mode": pool.render_mode, "observation_space": pool.single_observation_space,
            "action_space": pool.single_action_space, "spec": pool.spec,
            "metadata": render_metadata(pool)}
        self._t_start = time.time()
        # The family's info keys (every key but the pool's own), and each env's info keys.
        # Keys an env sets on some steps only are in an env's info only there.
        self._optional = optional_info_keys(pool.spec.info, self._steps.plan.keys)
        self._family = [k for k in self._steps.plan.keys
                        if k not in _POOL_KEYS and k not in self._optional.values()]
        self._info_keys = ("TimeLimit.truncated", *self._family)
        super().__init__(self._steps.num_envs, pool.single_observation_space,
                         pool.single_action_space)

    def reset(self) -> VecEnvObs:
        """Reset every env, with the seeds of ``seed()`` if it was called since the last reset."""
        options = [o for o in self._options if o]
        if options:
            raise ValueError(f"reset options {options[0]!r} are not supported: aiopool's native "
                             "envs take no reset options")
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        rows = self._steps.reset(seed=seeds)
        self._reset_seeds()
        self._reset_options()
        # DummyVecEnv keeps each env's reset info: here the family's info keys of its reset row.
        self.reset_infos: list[dict[str, Any]] = self._env_infos(rows.info, self._family, [])
        return rows.obs

    def step_async(self, actions: npt.NDArray[Any]) -> None:
        """Send the actions to the workers and return at once."""
        self._steps.send(actions)

    def step_wait(self) -> VecEnvStepReturn:
        """Wait (GIL released) for the step sent by ``step_async``."""
        rows = self._steps.wait()
        info = rows.info
        done = rows.terminated | rows.truncated
        time_limit = rows.truncated & ~rows.terminated
        infos = self._env_infos(info, self._info_keys, [time_limit.tolist()])
        final = info.get("final_info")  # present only if an episode ended
        if final is not None:
            elapsed = round(time.time() - self._t_start, 6)
            returns = final.get("episode_score", info["episode_return"])
            ended = episode_ended(rows.terminated, rows.truncated, final)
            for i in np.flatnonzero(done & ~ended).tolist():
                # A lost Atari life (life_loss_info): done, as SB3's EpisodicLifeEnv says, but
                # the game goes on, so no episode ended: the terminal observation is the row's.
                infos[i]["terminal_observation"] = obs_map(functools.partial(_row, i),
                                                           [rows.obs])
            for i in np.flatnonzero(ended).tolist():
                env_info = infos[i]
                for k in self._family:  # the ended episode's value where the pool keeps one
                    if k in self._optional and k in final and not final[self._optional[k]][i]:
                        env_info.pop(k, None)
                    elif k in final:
                        env_info[k] = _value(final[k][i])
                env_info["terminal_observation"] = obs_map(functools.partial(_row, i),
                                                           [info["final_obs"]])
                env_info["episode"] = {"r": round(float(returns[i]), 6),
                                       "l": int(info["episode_length"][i]), "t": elapsed}
        return rows.obs, rows.reward.astype(np.float32), done, infos

    def _env_infos(self, info: dict[str, Any], keys: Sequence[str],
                   first: list[list[Any]]) -> list[dict[str, Any]]:
        """One dict per env: ``keys``, the columns ``first`` and then the family's keys; a key
        an env sets on some steps only is in its dict only where set."""
        columns = [*first, *(_values(info[k]) for k in self._family)]
        infos: list[dict[str, Any]] = (
            [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
            if columns else [{} for _ in range(self.num_envs)])
        for key, mask_key in self._optional.items():
            for i in np.flatnonzero(~info[mask_key]).tolist():
                del infos[i][key]
        return infos

    def close(self) -> None:
        self._steps.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name not in self._attrs:
            raise AttributeError(
                f"aiopool's {self._env_id} envs run in C++ and have no attribute {attr_name!r};"
                f" get_attr knows {sorted(self._attrs)}")
        return [self._attrs[attr_name] for _ in self._get_indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError(
            f"aiopool's envs run in C++ and their attributes cannot be set ({attr_name!r}); "
            "pass the env's constructor kwargs to make_sb3 instead")

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        """The reference env's methods the family answers (Atari's ``get_action_meanings``)."""
        method = reference_method(self._steps.pool, method_name)
        if method is not None and not (method_args or method_kwargs):
            value = method()
            return [copy.deepcopy(value) for _ in self._get_indices(indices)]  # one per env
        raise NotImplementedError(
            f"aiopool's envs run in C++ and have no Python methods to call ({method_name!r}); "
            "use reset/step on the VecEnv, seed() for seeds")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper[Any, Any, Any, Any]],
                       indices: VecEnvIndices = None) -> list[bool]:
        """True only for SB3's ``Monitor``: the infos carry Monitor's ``episode`` dicts."""
        return [wrapper_class is Monitor for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[npt.NDArray[Any] | None]:
        """Each env's current frame (``render_mode="rgb_array"``), else a None per env."""
        pool = self._steps.pool
        if pool.render_mode is None:
            return [None] * self.num_envs
        return list(pool.render())

    def __repr__(self) -> str:
        return f"Sb3VecEnv({self._env_id!r}, num_envs={self.num_envs})"


def make_sb3(env_id: str, num_envs: int = 1, *, seed: int | None = 0,
             num_threads: int | None = None, **make_kwargs: Any) -> Sb3VecEnv:
    """A Stable-Baselines3 ``VecEnv`` of ``num_envs`` copies of ``env_id``.

    Args:
        env_id: a registered id (``aiopool.list_envs()``).
        num_envs: envs stepped together.
        seed: env ``i`` is seeded ``seed + i`` at the first ``reset()`` (``env.seed(s)``
            re-seeds at the next one, as in SB3).
        num_threads: worker threads (default: one less than the cores).
        **make_kwargs: the env's constructor kwargs and ``aiopool.make`` options such as
            ``max_episode_steps``.
    """
    return Sb3VecEnv(env_id, num_envs, seed=seed, num_threads=num_threads, **make_kwargs)


def _values(column: npt.NDArray[Any]) -> list[Any]:
    """A key's value in each env's info, as the env's own info holds it: a Python scalar, or,
    for a key with a shape (Taxi's ``action_mask``, Humanoid's ``tendon_length``), a numpy array
    of its own (rows of a copy: the pool's buffers are reused)."""
    return column.tolist() if column.ndim == 1 else list(column.copy())


def _value(value: npt.NDArray[Any]) -> Any:
    """One env's value of a key (``_values``)."""
    return value.item() if value.ndim == 0 else value.copy()


def _row(i: int, parts: list[npt.NDArray[Any]]) -> Any:
    """Row ``i`` of an obs array (``obs_map`` applies it per key of Dict observations)."""
    return parts[0][i]
