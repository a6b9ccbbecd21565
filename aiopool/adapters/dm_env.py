"""A ``dm_env.Environment`` over a pool (needs ``dm-env``).

With one env (the default) it is a conformant ``dm_env.Environment``: a scalar
``dm_env.StepType``, ``reward`` and ``discount`` None on FIRST steps, single-env specs, and a
``step`` on a fresh environment starts an episode (FIRST); dm_env's own
``EnvironmentTestMixin`` passes (``tests/test_adapter_dm_env.py``).

With ``num_envs > 1`` (or ``batched=True``) every field of a ``TimeStep`` holds one entry per
env, which departs from dm_env in three ways: ``step_type`` is an int8 array of StepType
values (FIRST on a reset, LAST where the episode ended, MID otherwise), so use
``timestep.first()`` / ``last()``, which return arrays, with ``.all()`` / ``.any()``; on FIRST
rows ``reward`` is 0 and ``discount`` 1 (an array cannot hold dm_env's None); the specs have a
leading ``num_envs`` dimension (``single_observation_spec()`` / ``single_action_spec()``
describe one env). In both forms ``discount`` is 0 where the episode terminated and 1
elsewhere (a truncation keeps 1: the state still has a value), and as in dm_env the ``step``
after a LAST starts a new episode for that env and ignores its action.

Example:
    >>> env = aiopool.make_dm("CartPole-v1")
    >>> timestep = env.reset()
    >>> while not timestep.last():
    ...     timestep = env.step(policy(timestep.observation))
"""

from __future__ import annotations

import collections
import importlib
from typing import Any

import dm_env  # type: ignore[import-untyped,import-not-found,unused-ignore]
import gymnasium as gym
import numpy as np
import numpy.typing as npt
from dm_env import specs

from ..registry import family_of
from . import Lockstep, Rows, refuse_autoreset

__all__ = ["DmEnvironment", "make_dm"]


class DmEnvironment(dm_env.Environment):  # type: ignore[misc,unused-ignore]
    """``num_envs`` native envs stepped together; build it with ``make_dm``.

    ``batched`` (default: ``num_envs > 1``) gives batched TimeSteps and specs (leading
    dimension ``num_envs``, so ``spec.validate`` accepts the arrays of a ``TimeStep``);
    unbatched, it is one conformant ``dm_env.Environment``.
    """

    def __init__(self, env_id: str, num_envs: int = 1, *, seed: int | None = 0,
                 num_threads: int | None = None, batched: bool | None = None,
                 **make_kwargs: Any) -> None:
        refuse_autoreset(make_kwargs, "make_dm", "a dm_env environment starts a new episode at "
                         "the step after a LAST one (dm_env's contract)")
        if make_kwargs.get("life_loss_info"):
            raise ValueError("make_dm: life_loss_info ends no episode (the game goes on after a "
                             "lost life), where dm_env's LAST must be followed by FIRST; "
                             "episodic_life=True ends the episode at a lost life, and the "
                             "EnvPool drop-in's make_dm gives a lost life discount 0 "
                             "(docs/migrating.md)")
        self._steps = Lockstep(env_id, num_envs, seed=seed, autoreset="next_step",
                               num_threads=num_threads, info_keys=("elapsed_step",),
                               **make_kwargs)
        self.num_envs = num_envs = self._steps.num_envs  # an int, whatever int type came
        self.batched = num_envs > 1 if batched is None else bool(batched)
        if not self.batched and num_envs != 1:
            raise ValueError(f"batched=False needs num_envs=1, got {num_envs}: a dm_env "
                             "TimeStep of several envs is batched")
        pool = self._steps.pool
        self._obs_space = pool.single_observation_space
        # A Dict observation's keys in the env's own order (the Control Suite's OrderedDict),
        # where gymnasium's Dict space sorts them.
        self._obs_keys = [key for key, _ in pool.spec.obs_parts] or None
        self._action_space = pool.single_action_space
        self._env_id = env_id
        family = family_of(env_id) if pool.spec.family is not None else None
        # dm_control's flatten_observation: one array, in an OrderedDict under "observations".
        self._flat_key = family.dm_flat_key if (
            family is not None and pool.spec.config.get("flat_observation")
            and isinstance(self._obs_space, gym.spaces.Box)) else None
        # Where the reference's dm_env raises at a failed step (dm_control's PhysicsError),
        # an unbatched env raises it too (the pool ends that env's episode instead).
        self._step_error = family.dm_step_error if family is not None else None

    def reset(self, seed: int | None = None) -> dm_env.TimeStep:
        """Start a new episode in every env (``seed``: env ``i`` gets ``seed + i``; None
        continues each env's random stream)."""
        return self._timestep(self._steps.reset(seed=seed))

    def step(self, action: npt.ArrayLike) -> dm_env.TimeStep:
        """One action per env; envs whose last step was LAST reset instead (FIRST), and so
        does every env of a fresh environment (dm_env: a step starts the first episode)."""
        if not self._steps.ever_reset:
            return self.reset()
        if not self.batched:
            action = np.asarray(action)
            shape = self._action_space.shape or ()
            if action.shape != shape:
                # dm_control copies the action into the spec's shape (np.copyto): leading 1s
                # go (a policy's (1, n) for (n,)), then it broadcasts (a number fills the
                # spec); anything else is refused, as there.
                squeezed = action.reshape(action.shape[next(
                    (k for k, d in enumerate(action.shape) if d != 1), action.ndim):])
                try:
                    action = np.broadcast_to(squeezed, shape)
                except ValueError:
                    raise ValueError(f"action has shape {action.shape}, expected {shape} "
                                     "(action_spec().shape)") from None
            action = action[None]
        return self._timestep(self._steps.step(action))

    def observation_spec(self) -> Any:
        """A ``BoundedArray`` (an ``Array`` where unbounded, as the Control Suite's); for a
        Dict observation an ``OrderedDict`` of them by key (in the env's order, each named by
        its key), for a Tuple one a tuple. A Control Suite env with ``flat_observation=True``
        gives dm_control's ``OrderedDict(observations=Array)``."""
        return self._observation_spec(self._lead)

    def action_spec(self) -> specs.BoundedArray:
        """A ``BoundedArray``, unnamed as dm_control's."""
        return _spec(self._action_space, None, self._lead)

    def reward_spec(self) -> specs.Array:
        return specs.Array((self.num_envs,) if self.batched else (), np.float64, name="reward")

    def discount_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray((self.num_envs,) if self.batched else (), np.float64, 0.0,
                                  1.0, name="discount")

    def single_observation_spec(self) -> Any:
        """The observation spec of one env (a ``DiscreteArray`` for toy text's states)."""
        return self._observation_spec(None)

    def _observation_spec(self, lead: int | None) -> Any:
        if self._flat_key is not None:
            return collections.OrderedDict(
                [(self._flat_key, _spec(self._obs_space, self._flat_key, lead))])
        return _spec(self._obs_space, "observation", lead, self._obs_keys)

    def single_action_spec(self) -> specs.BoundedArray:
        """The action spec of one env (a ``DiscreteArray`` for discrete actions)."""
        return _spec(self._action_space, None, None)

    def render(self) -> npt.NDArray[np.uint8]:
        """The current frame (batched: one per env, batch-first) of an environment made with
        ``render_mode="rgb_array"``: ``pool.render()``, at the pool's render size and camera
        (for the Control Suite dm_control's ``physics.render``; with pixel observations, the
        observations' size and camera)."""
        frames = self._steps.pool.render()
        return frames if self.batched else frames[0]

    def env_error(self, env_id: int = 0) -> str:
        """The last error of env ``env_id``'s simulator, or "" (``Pool.env_error``)."""
        return self._steps.pool.env_error(env_id)

    def close(self) -> None:
        self._steps.close()

    def __getattr__(self, name: str) -> Any:
        if name in ("physics", "task"):  # dm_control's control.Environment has them
            raise AttributeError(
                f"{type(self).__name__} has no attribute {name!r}: aiopool's envs step in C++ "
                "and expose no dm_control Physics or Task (no physics.named.data, "
                "get_state/set_state or physics.render); render() gives frames, "
                "env_error() a failed step's error (docs/environments/index.md)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"DmEnvironment({self._env_id!r}, num_envs={self.num_envs})"

    @property
    def _lead(self) -> int | None:
        return self.num_envs if self.batched else None

    def _timestep(self, rows: Rows) -> dm_env.TimeStep:
        elapsed = rows.info["elapsed_step"]
        if not self.batched:
            obs = rows.obs[0] if type(rows.obs) is np.ndarray else _first(rows.obs)
            if self._flat_key is not None:
                obs = collections.OrderedDict([(self._flat_key, obs)])
            if elapsed[0] == 0:
                return dm_env.TimeStep(dm_env.StepType.FIRST, None, None, obs)
            terminated = bool(rows.terminated[0])
            last = terminated or bool(rows.truncated[0])
            if last and not terminated and self._step_error is not None:
                self._raise_step_error(int(elapsed[0]))
            return dm_env.TimeStep(dm_env.StepType.LAST if last else dm_env.StepType.MID,
                                   float(rows.reward[0]), 0.0 if terminated else 1.0, obs)
        # FIRST (0) on a reset, else MID (1), or LAST (2) where the episode ended. Array
        # operands only: a Python scalar (above all an IntEnum) sends numpy's ufuncs down a
        # slower path.
        stepped = elapsed.astype(np.bool_)
        step_type = (rows.terminated | rows.truncated).view(np.int8) + stepped.view(np.int8)
        step_type *= stepped
        discount = (~rows.terminated).astype(np.float64)  # 0 where the episode terminated
        obs = rows.obs if not isinstance(rows.obs, dict) else collections.OrderedDict(rows.obs)
        if self._flat_key is not None:
            obs = collections.OrderedDict([(self._flat_key, obs)])
        return dm_env.TimeStep(step_type=step_type, reward=rows.reward, discount=discount,
                               observation=obs)

    def _raise_step_error(self, elapsed: int) -> None:
        """Raise the reference's exception where env 0's truncation was a failed step (not
        the step limit; the env has ended its episode and the next step resets it, as a
        dm_control user resets after a PhysicsError)."""
        pool = self._steps.pool
        if elapsed == pool.spec.max_episode_steps:
            return
        message = pool.env_error(0)
        if not message:
            return
        # The message names the reference's exception: dm_control's PhysicsError, or MuJoCo's
        # own error (mju_error; mujoco.FatalError in dm_control too).
        own_module, _, own_name = (self._step_error or "").partition(":")
        for prefix, module, name in ((f"{own_name}: ", own_module, own_name),
                                     ("mujoco.FatalError: ", "mujoco", "FatalError")):
            if message.startswith(prefix):
                error = getattr(importlib.import_module(module), name)
                raise error(message.removeprefix(prefix))
        raise RuntimeError(message)


def _first(obs: Any) -> Any:
    """Env 0's observation of a Dict (an ``OrderedDict``, as the Control Suite's) or Tuple one."""
    if isinstance(obs, dict):
        return collections.OrderedDict((key, value[0]) for key, value in obs.items())
    return tuple(value[0] for value in obs)


def _box_spec(space: gym.spaces.Box, name: str | None, num_envs: int | None) -> specs.Array:
    lead = () if num_envs is None else (num_envs,)
    if (np.isneginf(space.low).all() and np.isposinf(space.high).all()) or (
            name == "pixels" and space.dtype == np.uint8):
        # as dm_control's: its state and pixels.Wrapper's frames are unbounded Arrays
        return specs.Array(lead + space.shape, space.dtype, name=name)
    return specs.BoundedArray(lead + space.shape, space.dtype,
                              np.broadcast_to(space.low, lead + space.shape),
                              np.broadcast_to(space.high, lead + space.shape), name=name)


def _spec(space: gym.spaces.Space[Any], name: str | None, num_envs: int | None,
          keys: list[Any] | None = None) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return collections.OrderedDict((key, _spec(space[key], key, num_envs))
                                       for key in (keys or list(space.keys())))
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_spec(part, name and f"{name}_{i}", num_envs)
                     for i, part in enumerate(space))
    if isinstance(space, gym.spaces.Discrete):
        if num_envs is None:
            return specs.DiscreteArray(int(space.n), dtype=space.dtype, name=name)
        return specs.BoundedArray((num_envs,), space.dtype, int(space.start),
                                  int(space.start + space.n - 1), name=name)
    if isinstance(space, gym.spaces.Box):
        return _box_spec(space, name, num_envs)
    raise TypeError(f"no dm_env spec for the {name} space {space}")


def make_dm(env_id: str, num_envs: int = 1, *, seed: int | None = 0,
            num_threads: int | None = None, batched: bool | None = None,
            **make_kwargs: Any) -> DmEnvironment:
    """A ``dm_env.Environment`` of ``num_envs`` copies of ``env_id``.

    Args:
        env_id: a registered id (``aiopool.list_envs()``).
        num_envs: envs stepped together.
        seed: env ``i`` is seeded ``seed + i`` at the first ``reset()``.
        num_threads: worker threads (default: one less than the cores).
        batched: batched TimeSteps and specs (default: ``num_envs > 1``); unbatched needs
            ``num_envs=1`` and is a conformant ``dm_env.Environment``.
        **make_kwargs: the env's constructor kwargs and ``aiopool.make`` options such as
            ``max_episode_steps``.
    """
    return DmEnvironment(env_id, num_envs, seed=seed, num_threads=num_threads,
                         batched=batched, **make_kwargs)
