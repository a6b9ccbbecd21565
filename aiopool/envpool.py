"""EnvPool's Python API over aiopool's envs: ``import aiopool.envpool as envpool``.

Code written for EnvPool 1.2.5 runs with its import changed and nothing else:

    >>> import aiopool.envpool as envpool        # was: import envpool
    >>> env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=8, episodic_life=True)
    >>> obs, info = env.reset()                  # (8, 4, 84, 84) uint8
    >>> obs, rew, term, trunc, info = env.step(np.zeros(8, dtype=int))

``make`` / ``make_gym`` / ``make_gymnasium`` / ``make_dm`` / ``make_spec`` / ``list_all_envs``
take EnvPool's task ids (the ones aiopool has: classic control, toy text, Box2D, the MuJoCo v5
envs, the Atari games and the Control Suite's tasks; EnvPool's ``Taxi-v3`` is gymnasium 1.4's
``Taxi-v4``, its ``CliffWalking-v0`` is ``CliffWalking-v1``, its ``CheetahRun-v1`` is
``dmc/cheetah-run``) and EnvPool's keyword arguments with EnvPool's
meanings and defaults: ``seed=42``, ``reward_clip=False``, ``batch_size=num_envs``,
``max_episode_steps=27000`` steps for Atari, ``gray_scale``, ``frame_skip``, ``episodic_life``,
FrozenLake's ``size`` ... The objects they return have EnvPool's surface: single-env
``observation_space`` / ``action_space``, ``send`` / ``recv`` / ``async_reset`` / ``step`` /
``reset``, ``spec`` and ``config``, rows in send order in sync mode (``batch_size ==
num_envs``) and in finish order in async mode, and EnvPool's info keys
(``env_id``, ``players``, ``elapsed_step``; Atari: ``lives``, ``reward`` unclipped,
``terminated`` for game over; MuJoCo: EnvPool's reward-term names beside gymnasium's;
CliffWalking: ``prob``). Toy-text observations are int32 states, as EnvPool's.
``env_type="gym"`` is the gymnasium API, as in EnvPool 1.2.5. ``xla()`` is EnvPool's XLA
interface (``handle, recv, send, step``: env steps inside ``jax.jit``; see ``aiopool.jax``).

Atari ``episodic_life=True`` means what it means in EnvPool: a lost life sets ``terminated``
(the dm ``discount`` is 0), and the next step, whatever its action, starts play again without
resetting the game: the NOOPs and FIRE of a reset run, the reward is 0, ``elapsed_step`` does
not advance, and the frame stack goes on. Only a game over resets the game, so ``lives`` counts
down to 0 and ``info["terminated"]`` marks the game over (aiopool's native ``episodic_life``,
like ale-py's, restarts the game after every life instead).

What differs from EnvPool:

- **Random numbers.** Seeds mean what they mean in EnvPool (env ``i`` gets ``seed + i``; a
  list gives one seed per env), but aiopool's envs draw from their references' generators
  (ale-py's, gymnasium's), so the same seed gives other trajectories than EnvPool's.
  ``reset(seed=...)`` is ignored with a warning, as in EnvPool.
- **Atari resets** follow ale-py: FIRE first, then ``0 ... noop_max - 1`` NOOPs (EnvPool:
  ``1 ... noop_max`` NOOPs, then FIRE); so do the end of a step at game over or at
  ``max_episode_steps`` (it stops before the last repeated frame, its observation reusing the
  frames grabbed before). The frame stack starts filled with the first frame, as EnvPool's.
  Image sizes that divide the 210x160 screen on both axes (105x80) are refused: aiopool
  reproduces OpenCV's general ``INTER_AREA`` path only.
- **Not provided:** Atari's ``info["ram"]`` and Acrobot's ``info["state"]``.
- **Control Suite observations** are the task's own arrays, dm_control's, in a dict of float64
  (EnvPool's: every key of the domain's tasks, zeros where the task has none, as FingerSpin's
  ``target_position``). ``frame_skip`` is dm_control's ``n_sub_steps``, EnvPool's meaning; a
  domain that sets its control timestep (ball_in_cup, ...) takes only its default.
- **Rendering:** ``render_mode="rgb_array"``, ``render_env_id`` and ``render(env_ids)`` as
  EnvPool's, with gymnasium's frames (aiopool's ``Pool.render``); MuJoCo's
  ``render_width`` / ``render_height`` / ``render_camera_id``. ``render_mode="human"``,
  ``from_pixels`` and ``render(camera_id=...)`` other than make's are refused.
- **Refused with a reason:** ``register``, task ids
  aiopool has no env for (the error names those it has), and values aiopool cannot honour
  (``thread_affinity_offset``, ``max_num_players > 1``, Atari ``mode`` / ``difficulty``,
  ``use_inter_area_resize=False``, MuJoCo ``frame_stack > 1`` ...). An unknown keyword
  suggests the closest valid one.
- **Errors instead of hangs and undefined behaviour:** a ``recv`` with too few steps in
  flight raises ``aiopool.NothingInFlight`` (EnvPool waits forever); actions out of range or
  of the wrong count raise ``ValueError`` (EnvPool steps with them); seeds must be
  non-negative.
- Arrays are writeable copies, as EnvPool's. ``num_threads=0`` means EnvPool's default,
  ``min(batch_size, cores)``: the sync calls wait with the GIL released, so every core can
  step envs (``aiopool.make`` leaves one to the Python thread instead).
"""

from __future__ import annotations

import difflib
import functools
import math
import os
import re
import warnings
from collections import namedtuple
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, cast, overload

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from . import registry
from .adapters import optional_info_keys
from .batch import Batch
from .pool import Pool

__all__ = ["DMEnvPool", "EnvSpec", "GymnasiumEnvPool", "list_all_envs", "make", "make_dm",
           "make_gym", "make_gymnasium", "make_spec", "register"]
__version__ = "1.2.5"  # the EnvPool API this module follows (aiopool.__version__ is aiopool's)

Array = npt.NDArray[Any]

# -- task ids ------------------------------------------------------------------------------

_CLASSIC = ("CartPole-v0", "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
            "MountainCarContinuous-v0", "Acrobot-v1")
_ALIASES = {"phys2d/CartPole-v0": "CartPole-v0", "phys2d/CartPole-v1": "CartPole-v1",
            "TicTacToe3d-v5": "TicTacToe3D-v5", "Taxi-v3": "Taxi-v4",
            "CliffWalking-v0": "CliffWalking-v1",
            "tabular/CliffWalking-v0": "CliffWalking-v1",
            # EnvPool's v2 and v3 landers are one env; aiopool's is gymnasium 1.4's v3.
            "LunarLander-v2": "LunarLander-v3",
            "LunarLanderContinuous-v2": "LunarLanderContinuous-v3",
            "CarRacing-v2": "CarRacing-v3"}  # EnvPool's name -> aiopool's
_ENVPOOL_NAME = {"TicTacToe3D-v5": "TicTacToe3d-v5", "Taxi-v4": "Taxi-v3"}
# Aliases list_all_envs() names beside the ids (EnvPool lists them as task ids too).
_LISTED_ALIASES = ("phys2d/CartPole-v0", "phys2d/CartPole-v1", "CliffWalking-v0",
                   "LunarLander-v2", "LunarLanderContinuous-v2", "CarRacing-v2")
# EnvPool's toy-text info keys beside env_id / players / elapsed_step (float32 there).
_TOY_TEXT_INFO = {"CliffWalking-v1": ("prob",), "CliffWalkingSlippery-v1": ("prob",)}

# EnvPool's reward_threshold config key, where it has one.
_REWARD_THRESHOLD = {
    "CartPole-v0": 195.0, "CartPole-v1": 475.0, "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0, "Acrobot-v1": -100.0, "FrozenLake-v1": 0.7,
    "FrozenLake8x8-v1": 0.85, "Taxi-v4": 8.0, "Ant-v5": 6000.0,
    "HalfCheetah-v5": 4800.0, "Hopper-v5": 6000.0, "InvertedDoublePendulum-v5": 9100.0,
    "InvertedPendulum-v5": 950.0, "Pusher-v5": 0.0, "Reacher-v5": -3.75, "Swimmer-v5": 360.0,
    "LunarLander-v3": 200.0, "LunarLanderContinuous-v3": 200.0, "BipedalWalker-v3": 300.0,
    "BipedalWalkerHardcore-v3": 300.0, "CarRacing-v3": 900.0}

# EnvPool's env-specific config keys and defaults, in EnvPool's order.
_ATARI_KEYS: dict[str, Any] = {
    "stack_num": 4, "frame_skip": 4, "noop_max": 30, "zero_discount_on_life_loss": False,
    "episodic_life": False, "reward_clip": False, "use_fire_reset": True, "img_height": 84,
    "img_width": 84, "task": "", "mode": -1, "difficulty": -1, "full_action_space": False,
    "repeat_action_probability": 0.0, "use_inter_area_resize": True, "gray_scale": True}
_ATARI_NATIVE = {"stack_num": "stack_num", "frame_skip": "frameskip", "noop_max": "noop_max",
                 "reward_clip": "reward_clipping", "use_fire_reset": "use_fire_reset",
                 "img_height": "img_height", "img_width": "img_width",
                 "gray_scale": "grayscale", "full_action_space": "full_action_space",
                 "repeat_action_probability": "repeat_action_probability"}
_CLASSIC_KEYS: dict[str, dict[str, Any]] = {
    "Pendulum-v1": {"version": 1},
    # EnvPool's FrozenLake takes size=4 / 8 (gymnasium's map_name "4x4" / "8x8"); its
    # CliffWalking is_slippery is gymnasium's.
    "FrozenLake-v1": {"size": 4}, "FrozenLake8x8-v1": {"size": 8},
    "CliffWalking-v1": {"is_slippery": False}, "CliffWalkingSlippery-v1": {"is_slippery": True},
    "Blackjack-v1": {"natural": False, "sab": True},
    "BipedalWalker-v3": {"hardcore": False}, "BipedalWalkerHardcore-v3": {"hardcore": True},
    "CarRacing-v3": {"lap_complete_percent": float(np.float32(0.95))}}
# Config keys EnvPool holds as float32 (its config shows 0.949999988 for 0.95): the config
# holds them so, and gymnasium's env gets the shortest decimal of that float32 (0.95).
_FLOAT32_KEYS = frozenset({"lap_complete_percent"})
_V5 = {"frame_stack": 1, "post_constraint": True}
_MUJOCO_KEYS: dict[str, dict[str, Any]] = {
    "Ant-v5": {"frame_skip": 5, **_V5, "use_contact_force": True,
               "legacy_healthy_reward": False, "exclude_worldbody_contact_forces": True,
               "terminate_when_unhealthy": True,
               "exclude_current_positions_from_observation": True, "xml_file": "ant.xml",
               "gymnasium_v5_render_camera": True, "forward_reward_weight": 1.0,
               "ctrl_cost_weight": 0.5, "contact_cost_weight": 0.0005, "healthy_reward": 1.0,
               "healthy_z_min": 0.2, "healthy_z_max": 1.0, "contact_force_min": -1.0,
               "contact_force_max": 1.0, "reset_noise_scale": 0.1},
    "HalfCheetah-v5": {"frame_skip": 5, **_V5,
                       "exclude_current_positions_from_observation": True,
                       "xml_file": "half_cheetah.xml", "gymnasium_v5_render_camera": True,
                       "ctrl_cost_weight": 0.1, "forward_reward_weight": 1.0,
                       "reset_noise_scale": 0.1},
    "Hopper-v5": {"frame_skip": 4, **_V5, "terminate_when_unhealthy": True,
                  "legacy_healthy_reward": False,
                  "exclude_current_positions_from_observation": True, "xml_file": "hopper.xml",
                  "gymnasium_v5_render_camera": True, "ctrl_cost_weight": 0.001,
                  "forward_reward_weight": 1.0, "healthy_reward": 1.0, "velocity_min": -10.0,
                  "velocity_max": 10.0, "healthy_state_min": -100.0, "healthy_state_max": 100.0,
                  "healthy_angle_min": -0.2, "healthy_angle_max": 0.2, "healthy_z_min": 0.7,
                  "reset_noise_scale": 0.005},
    "Humanoid-v5": {"frame_skip": 5, **_V5, "legacy_healthy_reward": False,
                    "exclude_worldbody_observations": True, "exclude_root_actuator_forces": True,
                    "use_contact_force": True, "forward_reward_weight": 1.25,
                    "terminate_when_unhealthy": True,
                    "exclude_current_positions_from_observation": True,
                    "xml_file": "humanoid.xml", "gymnasium_v5_render_camera": True,
                    "ctrl_cost_weight": 0.1, "healthy_reward": 5.0, "healthy_z_min": 1.0,
                    "healthy_z_max": 2.0, "contact_cost_weight": 5e-07, "contact_cost_max": 10.0,
                    "reset_noise_scale": 0.01},
    "HumanoidStandup-v5": {"frame_skip": 5, **_V5, "forward_reward_weight": 1.0,
                           "exclude_current_positions_from_observation": True,
                           "exclude_worldbody_observations": True,
                           "exclude_root_actuator_forces": True,
                           "xml_file": "humanoidstandup.xml",
                           "gymnasium_v5_render_camera": True, "ctrl_cost_weight": 0.1,
                           "contact_cost_weight": 5e-07, "contact_cost_max": 10.0,
                           "healthy_reward": 1.0, "reset_noise_scale": 0.01},
    "InvertedDoublePendulum-v5": {"frame_skip": 5, **_V5, "healthy_reward": 10.0,
                                  "reward_if_not_terminated": True, "constraint_obs_dim": 1,
                                  "xml_file": "inverted_double_pendulum.xml",
                                  "gymnasium_v5_render_camera": True, "healthy_z_max": 1.0,
                                  "observation_min": -10.0, "observation_max": 10.0,
                                  "reset_noise_scale": 0.1},
    "InvertedPendulum-v5": {"frame_skip": 2, **_V5, "healthy_reward": 1.0,
                            "reward_if_not_terminated": True,
                            "xml_file": "inverted_pendulum.xml",
                            "gymnasium_v5_render_camera": True, "healthy_z_min": -0.2,
                            "healthy_z_max": 0.2, "reset_noise_scale": 0.01},
    "Pusher-v5": {"frame_skip": 5, **_V5, "ctrl_cost_weight": 0.1, "dist_cost_weight": 1.0,
                  "near_cost_weight": 0.5, "xml_file": "pusher_v5.xml",
                  "gymnasium_v5_render_camera": True, "reward_after_step": True,
                  "weighted_reward_info": True, "reset_qvel_scale": 0.005,
                  "cylinder_x_min": -0.3, "cylinder_x_max": 0.0, "cylinder_y_min": -0.2,
                  "cylinder_y_max": 0.2, "cylinder_dist_min": 0.17},
    "Reacher-v5": {"frame_skip": 2, **_V5, "ctrl_cost_weight": 1.0, "reward_after_step": True,
                   "obs_include_z_distance": False, "dist_cost_weight": 1.0,
                   "xml_file": "reacher.xml", "gymnasium_v5_render_camera": True,
                   "reset_qpos_scale": 0.1, "reset_qvel_scale": 0.005, "reset_goal_scale": 0.2},
    "Swimmer-v5": {"frame_skip": 4, **_V5, "exclude_current_positions_from_observation": True,
                   "xml_file": "swimmer.xml", "gymnasium_v5_render_camera": True,
                   "forward_reward_weight": 1.0, "ctrl_cost_weight": 0.0001,
                   "reset_noise_scale": 0.1},
    "Walker2d-v5": {"frame_skip": 4, **_V5, "ctrl_cost_weight": 0.001,
                    "terminate_when_unhealthy": True,
                    "exclude_current_positions_from_observation": True,
                    "legacy_healthy_reward": False, "xml_file": "walker2d_v5.xml",
                    "gymnasium_v5_render_camera": True, "forward_reward_weight": 1.0,
                    "healthy_reward": 1.0, "healthy_z_min": 0.8, "healthy_z_max": 2.0,
                    "healthy_angle_min": -1.0, "healthy_angle_max": 1.0, "velocity_min": -10.0,
                    "velocity_max": 10.0, "reset_noise_scale": 0.005},
}
# EnvPool's MuJoCo keyword -> gymnasium's (aiopool's); X_min / X_max map onto X_range.
_MUJOCO_RENAMES: dict[str, dict[str, str]] = {
    "HumanoidStandup-v5": {"forward_reward_weight": "uph_cost_weight",
                           "contact_cost_weight": "impact_cost_weight",
                           "contact_cost_max": "impact_cost_max"},
    "Pusher-v5": {"ctrl_cost_weight": "reward_control_weight",
                  "dist_cost_weight": "reward_dist_weight",
                  "near_cost_weight": "reward_near_weight"},
    "Reacher-v5": {"ctrl_cost_weight": "reward_control_weight",
                   "dist_cost_weight": "reward_dist_weight"},
}
# EnvPool's MuJoCo info key -> the gymnasium key with the same value.
_MUJOCO_INFO_ALIASES: dict[str, dict[str, str]] = {
    "HalfCheetah-v5": {"reward_run": "reward_forward"},
    "Swimmer-v5": {"reward_fwd": "reward_forward"},
    "Humanoid-v5": {"reward_linvel": "reward_forward", "reward_quadctrl": "reward_ctrl",
                    "reward_alive": "reward_survive", "reward_impact": "reward_contact"},
}

_COMMON: dict[str, Any] = {"num_envs": 1, "batch_size": 0, "num_threads": 0,
                           "max_num_players": 1, "thread_affinity_offset": -1, "seed": 42,
                           "env_seed": [], "gym_reset_return_info": True}
_RENDER_KEYS = ("render_mode", "render_env_id", "render_width", "render_height",
                "render_camera_id", "from_pixels")
_NOT_PROVIDED = {"ram": "Atari's RAM", "state": "Acrobot's internal state"}
_INT32_MAX = 2**31 - 1


_Family = Literal["classic", "toy_text", "mujoco", "atari", "box2d", "dmc"]


class _Task(NamedTuple):
    envpool_id: str
    native_id: str  # aiopool's id
    family: _Family


def list_all_envs() -> list[str]:
    """Every EnvPool task id this module can make (those aiopool has an env for)."""
    native = [i for i in registry.list_envs() if _family(i) is not None]
    return [_envpool_name(i) for i in native] + [
        alias for alias in _LISTED_ALIASES if _ALIASES[alias] in native]


def _envpool_name(native_id: str) -> str:
    """EnvPool's id of one of aiopool's envs: the Control Suite's ``dmc/humanoid_CMU-run`` is
    ``HumanoidCMURun-v1`` (each word of the domain and task capitalised, as EnvPool names them)."""
    if not native_id.startswith("dmc/"):
        return _ENVPOOL_NAME.get(native_id, native_id)
    words = native_id.removeprefix("dmc/").replace("-", "_").split("_")
    return "".join(w[:1].upper() + w[1:] for w in words) + "-v1"


@functools.cache
def _dmc_names() -> dict[str, str]:
    """EnvPool's Control Suite ids -> aiopool's."""
    return {_envpool_name(i): i for i in registry.list_envs() if i.startswith("dmc/")}


def _native_name(task_id: str) -> str:
    """aiopool's id of an EnvPool task id (the id itself where they agree)."""
    return _ALIASES.get(task_id) or _dmc_names().get(task_id, task_id)


def _family(native_id: str) -> _Family | None:
    """Which of EnvPool's families ``native_id`` is in, by aiopool's family of it (registered
    or only declared: a family this build cannot load); None for envs EnvPool lacks."""
    if native_id in _CLASSIC:
        return "classic"
    family = registry.family_of(native_id)
    if family is not None and family.name in ("toy_text", "mujoco", "atari", "box2d", "dmc"):
        return cast(_Family, family.name)
    return None


def _task(task_id: str) -> _Task:
    if not isinstance(task_id, str):
        raise TypeError(f"task_id is {task_id!r}, expected an EnvPool task id such as 'Pong-v5'")
    native = _native_name(task_id)
    family = _family(native)
    if family is not None and native in registry.list_envs():
        return _Task(task_id, native, family)
    raise ValueError(_unknown_task(task_id, family))


def _unknown_task(task_id: str, family: str | None) -> str:
    declared = registry.family_of(_native_name(task_id)) if family else None
    why = registry.unavailable_families().get(declared.title) if declared else None
    if declared is not None and why is not None:
        return (f"{task_id} is one of aiopool's {declared.title} envs, which are unavailable "
                f"here: {why}")
    available = list_all_envs()
    versioned = re.fullmatch(r"(\w+)-v\d+", task_id)
    if versioned and _family(f"{versioned[1]}-v5") == "mujoco":
        hint = (f"; aiopool has only gymnasium's v5 MuJoCo envs: use '{versioned[1]}-v5' (its "
                "observations, rewards and defaults are v5's, not those of older versions)")
    else:
        hint = _did_you_mean(task_id, available, n=3)
    families: dict[str | None, list[str]] = {}
    for i in available:
        families.setdefault(_family(_native_name(i)), []).append(i)
    atari, dmc = families.get("atari", []), families.get("dmc", [])
    return (f"aiopool has no env for EnvPool's {task_id!r}{hint}. It has {', '.join(_CLASSIC)}, "
            f"the toy-text envs {', '.join(families.get('toy_text', []))}, the Box2D envs "
            f"{', '.join(families.get('box2d', []))}, the MuJoCo envs "
            f"{', '.join(sorted(families.get('mujoco', [])))}, "
            f"{len(dmc)} Control Suite tasks ({', '.join(dmc[:3])}, ...) and "
            f"{len(atari)} Atari games "
            f"({', '.join(atari[:3])}, ...); envpool.list_all_envs() lists them all")


def _did_you_mean(name: str, valid: Sequence[str], n: int = 1) -> str:
    """The "did you mean" hint of ``aiopool.make``'s errors (registry.py), for EnvPool's names."""
    close = difflib.get_close_matches(name, list(valid), n=n, cutoff=0.6)
    return f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""


# -- keyword arguments ---------------------------------------------------------------------

class _Plan(NamedTuple):
    """What make() builds: EnvPool's config, and the aiopool pool that honours it."""

    task: _Task
    config: dict[str, Any]
    num_envs: int
    batch_size: int
    num_threads: int
    seed: int | list[int]
    max_episode_steps: int  # for aiopool.make (-1: none; Atari limits frames instead)
    env_kwargs: dict[str, Any]
    render: dict[str, Any]  # render_mode and the renderer's kwargs, for aiopool.make
    render_env_id: int  # the env render() shows by default


def _defaults(task: _Task) -> dict[str, Any]:
    """EnvPool's config for ``task`` with its defaults, in EnvPool's order."""
    config = dict(_COMMON)
    module = registry._module_for(task.native_id)
    keys, max_steps = module.env_config(task.native_id)
    if task.family == "atari":
        config["max_episode_steps"] = 27000
        rom = next(default for name, _, default in keys if name == "rom_path")
        config.update(_ATARI_KEYS, task=str(rom).removesuffix(".bin"))
        return config
    if task.family == "dmc":  # dm_control's 1,000 control steps, as EnvPool's
        config["max_episode_steps"] = 1000
        config.update(frame_skip=_dmc_sub_steps(task.native_id), frame_stack=1,
                      task_name=task.native_id.split("-", 1)[1])
        return config
    # EnvPool's "no time limit" (CliffWalking) is INT32_MAX steps.
    config["max_episode_steps"] = int(max_steps) or _INT32_MAX
    if task.native_id in _REWARD_THRESHOLD:
        config["reward_threshold"] = _REWARD_THRESHOLD[task.native_id]
    config.update(_CLASSIC_KEYS.get(task.native_id, {}))
    config.update(_MUJOCO_KEYS.get(task.native_id, {}))
    return config


def _plan(task_id: str, kwargs: dict[str, Any]) -> _Plan:
    task = _task(task_id)
    config = _defaults(task)
    rendering = {k: kwargs.pop(k) for k in _RENDER_KEYS if k in kwargs}
    for name, value in kwargs.items():
        if name not in config:
            hint = _did_you_mean(name, list(config))
            raise TypeError(f"{task_id} got an unexpected keyword argument {name!r}{hint}; "
                            f"EnvPool's keywords for it: {', '.join(config)}")
        config[name] = _checked(task_id, name, value, config[name])
        if name in _FLOAT32_KEYS:
            config[name] = float(np.float32(config[name]))
    num_envs = config["num_envs"]
    if num_envs < 1:
        raise ValueError(f"num_envs is {num_envs}, expected >= 1")
    batch_size = config["batch_size"] or num_envs
    if not 1 <= batch_size <= num_envs:
        raise ValueError(f"batch_size is {config['batch_size']}, expected 0 (num_envs) up to "
                         f"num_envs ({num_envs})")
    config["batch_size"] = batch_size
    if config["num_threads"] < 0:
        raise ValueError(f"num_threads is {config['num_threads']}, expected >= 0 (0: "
                         "min(batch_size, cores), as EnvPool)")
    threads = config["num_threads"] or min(batch_size, len(os.sched_getaffinity(0)) or 1)
    for name, why in (("max_num_players", "its envs are single-player"),
                      ("thread_affinity_offset", "it does not pin worker threads to cores")):
        if config[name] != _COMMON[name]:
            raise ValueError(f"{name}={config[name]!r} cannot be honoured by aiopool: {why} "
                             f"(only {name}={_COMMON[name]!r})")
    if not config["gym_reset_return_info"]:
        raise ValueError("gym_reset_return_info=False: EnvPool 1.2.5's gym API, like aiopool's, "
                         "always returns (obs, info) from reset()")
    if config["max_episode_steps"] < 1:
        raise ValueError(f"max_episode_steps is {config['max_episode_steps']}, expected >= 1")
    seed = _seeds(config, num_envs)
    kwargs_of = {"atari": _atari_kwargs, "dmc": _dmc_kwargs}.get(task.family, _gym_kwargs)
    env_kwargs, max_steps = kwargs_of(task, config)
    render, render_env_id = _render_plan(task, rendering, num_envs)
    return _Plan(task, config, num_envs, batch_size, threads, seed, max_steps, env_kwargs,
                 render, render_env_id)


def _render_plan(task: _Task, given: dict[str, Any], num_envs: int) -> tuple[dict[str, Any],
                                                                            int]:
    """EnvPool's rendering kwargs as aiopool.make takes them: ``render_mode="rgb_array"``; for
    MuJoCo, ``render_width`` / ``render_height`` / ``render_camera_id`` as gymnasium's
    ``width`` / ``height`` / ``camera_id``, for the Control Suite as ``physics.render``'s. What
    aiopool cannot honour is refused."""
    mode = given.get("render_mode")
    if given.get("from_pixels"):
        raise ValueError("from_pixels=True: the drop-in does not make EnvPool's pixel "
                         "observations; aiopool.make(..., obs_type='pixels') gives gymnasium's "
                         "(MuJoCo) and dm_control's (dmc/...) pixel observations "
                         "(docs/rendering.md), render_mode='rgb_array' with env.render() "
                         "frames")
    if mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode={mode!r}: aiopool renders 'rgb_array' (frames as "
                         "arrays), not windows")
    env_id = given.get("render_env_id", 0)
    if isinstance(env_id, bool) or not isinstance(env_id, int | np.integer) or not (
            0 <= env_id < num_envs):
        raise ValueError(f"render_env_id is {env_id!r}, expected 0 <= render_env_id < "
                         f"num_envs ({num_envs})")
    sizes = {"render_width": "width", "render_height": "height", "render_camera_id": "camera_id"}
    render = {ours: given[theirs] for theirs, ours in sizes.items() if theirs in given}
    if render and task.family not in ("mujoco", "dmc"):
        raise ValueError(f"{', '.join(k for k in sizes if k in given)}: {task.envpool_id}'s "
                         "frames are gymnasium's (Atari: the screen's size); only MuJoCo and "
                         "Control Suite envs take a frame size and camera")
    if mode is None:
        return {}, int(env_id)
    return {"render_mode": mode, **render}, int(env_id)


def _checked(task_id: str, name: str, value: Any, default: Any) -> Any:
    """``value`` as the type of EnvPool's ``default`` (EnvPool's C++ config casts so)."""
    if isinstance(default, bool):
        if isinstance(value, bool | np.bool_) or (isinstance(value, int | np.integer)
                                                 and value in (0, 1)):
            return bool(value)
    elif isinstance(default, int) and name != "seed":
        if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
            return int(value)
    elif isinstance(default, float):
        if isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool | np.bool_) and not math.isnan(value):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str | os.PathLike):
            return os.fspath(value)
    else:  # seed, env_seed: checked by _seeds
        return value
    raise TypeError(f"{task_id} keyword argument {name!r} is {value!r}, expected "
                    f"{type(default).__name__} (EnvPool's default: {default!r})")


def _seeds(config: dict[str, Any], num_envs: int) -> int | list[int]:
    """env i's seed: ``seed + i``, or ``seed[i]`` / ``env_seed[i]`` for a sequence."""
    seed, env_seed = config["seed"], config["env_seed"]
    if isinstance(seed, Sequence | np.ndarray) and not isinstance(seed, str | bytes):
        if len(env_seed):
            raise ValueError("pass either seed as an int or a list of seeds, or env_seed, "
                             "not both")
        env_seed, seed = list(seed), 0
        config["seed"], config["env_seed"] = 0, env_seed
    if len(env_seed):
        seeds = list(env_seed)
        if len(seeds) != num_envs:
            raise ValueError(f"a list of seeds needs one per env: got {len(seeds)} for "
                             f"num_envs={num_envs}")
        for s in seeds:
            _check_seed(s)
        per_env = [int(s) for s in seeds]
        config["env_seed"] = per_env
        return per_env
    _check_seed(seed)
    return int(seed)


def _check_seed(seed: Any) -> None:
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool | np.bool_):
        raise TypeError(f"seed is {seed!r}, expected an int or a list of ints")
    if not 0 <= seed <= _INT32_MAX:
        raise ValueError(f"seed is {seed}: aiopool takes seeds 0 <= seed < 2**31 (EnvPool also "
                         "takes negative int32 seeds; its generator differs from aiopool's "
                         "anyway, so pick any non-negative seed)")


def _atari_kwargs(task: _Task, config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    kwargs = {native: config[name] for name, native in _ATARI_NATIVE.items()}
    if config["episodic_life"]:  # EnvPool's: terminated on a lost life, reset on game over
        kwargs.update(life_loss_info=True, soft_reset_on_life_loss=True)
    for name, why in (("task", "the game is the task id"),
                      ("mode", "ALE game modes are not supported"),
                      ("difficulty", "ALE difficulties are not supported"),
                      ("use_inter_area_resize", "aiopool reproduces OpenCV's INTER_AREA resize "
                                                "only")):
        default = _ATARI_KEYS[name] if name != "task" else _defaults(task)["task"]
        if config[name] != default:
            raise ValueError(f"{task.envpool_id}: {name}={config[name]!r} cannot be honoured "
                             f"({why}); only the default {default!r}")
    # EnvPool counts agent steps; aiopool's Atari env counts frames, which here are steps x
    # frame_skip exactly (the frames of a restart after a lost life count for neither).
    frames = min(config["max_episode_steps"] * config["frame_skip"], _INT32_MAX)
    kwargs["max_num_frames_per_episode"] = frames
    return kwargs, -1


@functools.cache
def _dmc_sub_steps(native_id: str) -> int:
    """The task's physics steps per control step (dm_control's n_sub_steps, EnvPool's default
    frame_skip), from the model dm_control builds."""
    keys, _ = registry._module_for(native_id).env_config(native_id)
    family = registry.family_of(native_id)
    assert family is not None and family.prepare is not None
    config = family.prepare(native_id, {name: registry._default(kind, default)
                                        for name, kind, default in keys})
    return int(config["control_steps"])


def _dmc_kwargs(task: _Task, config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """EnvPool's Control Suite keywords: ``frame_skip`` is dm_control's ``n_sub_steps`` (physics
    steps per control step); ``max_episode_steps`` becomes the pool's step limit (dm_control's
    own time limit off: an episode that reaches it ends as dm_control's does at its limit,
    truncated, discount 1)."""
    if config["frame_skip"] < 1:
        raise ValueError(f"{task.envpool_id}: frame_skip is {config['frame_skip']}, expected "
                         ">= 1 physics steps per step")
    if config["frame_stack"] != 1:
        raise ValueError(f"{task.envpool_id}: frame_stack={config['frame_stack']!r} cannot be "
                         "honoured: aiopool's Control Suite observations are one step's "
                         "(only frame_stack=1)")
    task_name = task.native_id.split("-", 1)[1]
    if config["task_name"] != task_name:
        raise ValueError(f"{task.envpool_id}: task_name={config['task_name']!r}; the task is "
                         f"the id's ({task_name!r}): name another id for another task")
    kwargs: dict[str, Any] = {"time_limit": float("inf")}
    if config["frame_skip"] != _dmc_sub_steps(task.native_id):  # (some tasks set dm_control's
        kwargs["n_sub_steps"] = config["frame_skip"]  # control_timestep, which refuses it)
    return kwargs, config["max_episode_steps"]


def _gym_kwargs(task: _Task, config: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """EnvPool's classic-control / MuJoCo keywords as gymnasium's (aiopool's) kwargs."""
    keys, _ = registry._module_for(task.native_id).env_config(task.native_id)
    native = {name: (kind, default) for name, kind, default in keys}
    defaults = _defaults(task)
    renames = _MUJOCO_RENAMES.get(task.native_id, {})
    kwargs: dict[str, Any] = {}
    for name, default in defaults.items():
        if name in _COMMON or name in ("max_episode_steps", "reward_threshold",
                                       "use_contact_force"):
            continue
        value = config[name]
        target = renames.get(name, name)
        if name == "size" and "map_name" in native:  # FrozenLake
            if value not in (4, 8):
                raise ValueError(f"{task.envpool_id}: size={value!r}, expected 4 or 8 (EnvPool's "
                                 "maps; aiopool.make takes any map as gymnasium's desc)")
            kwargs["map_name"] = f"{value}x{value}"
            continue
        if name in _FLOAT32_KEYS:
            value = float(str(np.float32(value)))
        if target in native and name != "frame_stack":  # EnvPool's stacks state observations,
            kwargs[target] = value                         # aiopool's MuJoCo pixel ones
            continue
        bound = re.fullmatch(r"(\w+)_(min|max)", target)
        if bound and f"{bound[1]}_range" in native:
            key = f"{bound[1]}_range"
            low, high = kwargs.get(key, tuple(native[key][1]))
            kwargs[key] = (value, high) if bound[2] == "min" else (low, value)
            continue
        if value != default:  # an EnvPool option whose default is gymnasium v5's behaviour
            raise ValueError(f"{task.envpool_id}: {name}={value!r} cannot be honoured: aiopool "
                             f"implements gymnasium's {task.native_id}, which is EnvPool's "
                             f"default {name}={default!r}")
    if "use_contact_force" in defaults and not config["use_contact_force"]:
        # EnvPool's Ant and Humanoid without contact forces: no contact cost in the reward
        # (its info term 0), and Ant (only) observes no cfrc_ext, as gymnasium's v4 envs did.
        kwargs["contact_cost_weight"] = 0.0
        if task.native_id == "Ant-v5":
            kwargs["include_cfrc_ext_in_observation"] = False
    return kwargs, config["max_episode_steps"]


# -- the spec ------------------------------------------------------------------------------

class EnvSpec:
    """EnvPool's ``EnvSpec``: the config and the single-env spaces (gymnasium) and specs (dm_env).

    Attributes:
        config: a namedtuple of EnvPool's config keys (``spec.config.num_envs``).
        observation_space, action_space: one env's gymnasium spaces.
        reward_threshold: EnvPool's, or None.
    """

    def __init__(self, task_id: str, config: dict[str, Any], observation_space: gym.Space[Any],
                 action_space: gym.Space[Any], info: dict[str, tuple[np.dtype[Any], int]]):
        self.task_id = self.id = task_id
        self._config = dict(config)
        self.config = namedtuple("Config", list(config))(**config)
        self.observation_space = observation_space
        self.action_space = action_space
        self.gymnasium_observation_space = observation_space
        self.gymnasium_action_space = action_space
        self.reward_threshold: float | None = config.get("reward_threshold")
        self._info = info  # extra info key -> (dtype, int bounds: 1 for a 0/1 flag)

    def observation_spec(self) -> Any:
        """dm_env's spec of a ``TimeStep.observation``: env_id, players, obs and the info keys."""
        from dm_env import specs  # type: ignore[import-untyped,import-not-found,unused-ignore]

        i32 = np.iinfo(np.int32)
        env_id = specs.BoundedArray((), np.int32, i32.min, i32.max, name="env_id")
        space = self.observation_space
        fields: dict[str, Any] = {"env_id": env_id, "players": _Players(env_id=env_id)}
        if isinstance(space, gym.spaces.Dict):  # the Control Suite's named arrays
            parts = cast(dict[str, gym.spaces.Box], dict(space.spaces))
            fields.update({name: _bounded(part.shape, part.dtype, part.low, part.high, name)
                           for name, part in parts.items()})
        elif isinstance(space, gym.spaces.Discrete):  # toy text
            fields["obs"] = specs.DiscreteArray(int(space.n), dtype=np.int32, name="obs")
        else:
            fields["obs"] = _bounded(space.shape, space.dtype, getattr(space, "low", 0),
                                     getattr(space, "high", 0), "obs")
        for name, (dtype, flag) in self._info.items():
            if flag:
                fields[name] = specs.DiscreteArray(2, dtype=dtype, name=name)
            elif dtype == np.bool_:
                fields[name] = specs.Array((), dtype, name=name)
            elif np.issubdtype(dtype, np.integer):
                fields[name] = specs.BoundedArray((), dtype, np.iinfo(dtype).min,
                                                  np.iinfo(dtype).max, name=name)
            else:
                fields[name] = specs.BoundedArray((), dtype, np.finfo(dtype).min,
                                                  np.finfo(dtype).max, name=name)
        return _state_type(tuple(fields))(**fields)

    def action_spec(self) -> Any:
        """dm_env's spec of one env's action (``DiscreteArray`` of int32 for discrete ones)."""
        from dm_env import specs

        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return specs.DiscreteArray(int(space.n), dtype=np.int32, name="action")
        assert isinstance(space, gym.spaces.Box)
        return _bounded(space.shape, space.dtype, space.low, space.high, "action")

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"EnvSpec({self.task_id!r}, {items})"


def _bounded(shape: tuple[int, ...] | None, dtype: Any, low: Any, high: Any, name: str) -> Any:
    """dm_env's ``BoundedArray``, its bounds scalars where every element's lower bound is the
    same and every upper one too, as EnvPool's (``spec.minimum == -1.0`` is then a bool, as
    code written for EnvPool may use it)."""
    from dm_env import specs

    bounds = [np.asarray(low), np.asarray(high)]
    if all(b.size and (b == b.flat[0]).all() for b in bounds):
        bounds = [b.flat[0] for b in bounds]
    return specs.BoundedArray(shape, dtype, *bounds, name=name)


_Players = namedtuple("players", ["env_id"])  # type: ignore[name-match]  # EnvPool's name
_STATE_TYPES: dict[tuple[str, ...], type] = {}


def _state_type(fields: tuple[str, ...]) -> type:
    """dm ``TimeStep.observation``: a namedtuple ``State`` of obs and info, as EnvPool's."""
    if fields not in _STATE_TYPES:
        _STATE_TYPES[fields] = namedtuple("State", fields)
    return _STATE_TYPES[fields]


def _spaces(task: _Task, config: dict[str, Any],
            pool: Pool) -> tuple[gym.Space[Any], gym.Space[Any], gym.Space[Any]]:
    """EnvPool's observation and action spaces, and aiopool's action space."""
    obs = pool.single_observation_space
    act = pool.single_action_space
    if task.family == "atari" and not config["gray_scale"]:  # EnvPool: channels first
        stack, h, w, c = obs.shape
        obs = gym.spaces.Box(0, 255, (stack * c, h, w), np.uint8)
    if isinstance(obs, gym.spaces.Tuple):  # Blackjack: EnvPool's one int32 row of the parts
        highs = [int(part.n) - 1 for part in obs.spaces]
        obs = gym.spaces.Box(0, max(highs), (len(highs),), np.int32)
    if isinstance(obs, gym.spaces.Dict):  # the Control Suite's, in dm_control's order as
        obs = gym.spaces.Dict([(key, obs[key]) for key, _ in pool.spec.obs_parts])  # EnvPool's
    ours = act
    if task.family == "mujoco":  # EnvPool's MuJoCo actions are float64: the model's ctrlrange,
        assert isinstance(act, gym.spaces.Box)  # which gymnasium's float32 bounds round
        low, high = (np.array([float(str(np.float32(v))) for v in b.flat]).reshape(b.shape)
                     for b in (act.low, act.high))
        act = gym.spaces.Box(low, high, act.shape, np.float64)
    return obs, act, ours


def _info_fields(task: _Task, pool: Pool) -> dict[str, tuple[np.dtype[Any], int]]:
    if task.family == "atari":
        return {"lives": (np.dtype(np.int32), 0), "reward": (np.dtype(np.float32), 0),
                "terminated": (np.dtype(np.int32), 1)}
    if task.family == "toy_text":
        return {name: (np.dtype(np.float32), 0) for name in _TOY_TEXT_INFO.get(task.native_id, ())}
    if task.family == "dmc":  # EnvPool's env_id, players and elapsed_step only
        return {}
    # Keys an env sets on some steps only (CarRacing's lap_finished) are not EnvPool's.
    optional = optional_info_keys(pool.spec.info)
    fields = {f.name: (_envpool_dtype(f.dtype), 0) for f in pool.spec.info
              if f.name not in optional and f.name not in optional.values()}
    for alias, name in _MUJOCO_INFO_ALIASES.get(task.native_id, {}).items():
        fields[alias] = fields[name]
    if task.native_id == "HumanoidStandup-v5":
        fields["reward_alive"] = (np.dtype(np.float64), 0)
    return fields


def _envpool_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """EnvPool's info arrays of MuJoCo envs are float64 (gymnasium's reward_ctrl is float32)."""
    return np.dtype(np.float64) if np.issubdtype(dtype, np.floating) else dtype


def make_spec(task_id: str, **kwargs: Any) -> EnvSpec:
    """EnvPool's ``make_spec``: the config and spaces ``make`` would give, without the envs."""
    plan = _plan(task_id, kwargs)
    with _pool(plan, num_envs=1) as pool:
        obs, act, _ = _spaces(plan.task, plan.config, pool)
        return EnvSpec(task_id, plan.config, obs, act, _info_fields(plan.task, pool))


def _pool(plan: _Plan, num_envs: int | None = None) -> Pool:
    n = plan.num_envs if num_envs is None else num_envs
    first = plan.seed if isinstance(plan.seed, int) else 0
    return registry.make(plan.task.native_id, n, batch_size=min(plan.batch_size, n),
                         num_threads=min(plan.num_threads, n), seed=first, autoreset="next_step",
                         max_episode_steps=plan.max_episode_steps, **plan.env_kwargs,
                         **plan.render)


# -- the envs ------------------------------------------------------------------------------

class _Rows(NamedTuple):
    """One recv's rows in EnvPool's form (writeable copies)."""

    obs: Any  # an array; the Control Suite's: a dict of arrays
    reward: npt.NDArray[np.float32]
    terminated: npt.NDArray[np.bool_]
    truncated: npt.NDArray[np.bool_]
    env_id: npt.NDArray[np.int32]
    elapsed_step: npt.NDArray[np.int32]
    first: npt.NDArray[np.bool_]  # dm StepType.FIRST: a reset, or play restarting after a life
    discount: npt.NDArray[np.float32]
    extras: dict[str, Array]  # the family's info keys


class _Info(dict[str, Any]):
    """EnvPool's info dict; a key EnvPool has and aiopool does not says so."""

    def __missing__(self, key: str) -> Any:
        if key in _NOT_PROVIDED:
            raise KeyError(f"{key!r} ({_NOT_PROVIDED[key]}) is an EnvPool info key that "
                           "aiopool's envs do not provide")
        raise KeyError(key)


class _EnvPool:
    """What the gymnasium and dm_env forms share: the pool, sends and receives, the config.

    Per-env state follows EnvPool's Atari semantics: each env's rows arrive in order, so the
    previous row of an env tells whether this one restarts play after a lost life.
    """

    def __init__(self, plan: _Plan) -> None:
        self._task = plan.task
        self._config = plan.config
        self._pool = _pool(plan)
        self._render_env_id = plan.render_env_id
        self._render_camera = plan.render.get("camera_id")
        obs, act, ours = _spaces(plan.task, plan.config, self._pool)
        self._spec = EnvSpec(plan.task.envpool_id, plan.config, obs, act,
                             _info_fields(plan.task, self._pool))
        self._native_action = ours
        self._first_seed = None if isinstance(plan.seed, int) else plan.seed
        n = plan.num_envs
        self._num_envs = n
        self._async = plan.batch_size != n
        self._ids = np.arange(n, dtype=np.int32)
        self._ids.flags.writeable = False
        self._fresh = np.ones(n, dtype=np.bool_)  # never reset: a send resets it (EnvPool)
        self._pending: list[npt.NDArray[np.int32]] = []  # sync mode: rows owed, in send order
        atari = plan.task.family == "atari"
        self._atari = atari
        self._episodic = atari and plan.config["episodic_life"]
        self._zero_discount_on_life_loss = atari and plan.config["zero_discount_on_life_loss"]
        self._stack = plan.config.get("stack_num", 0)
        self._rgb = atari and not plan.config["gray_scale"]
        # Atari's per-life bookkeeping lives in bytes the pool keeps for xla() (xla_ffi.h), so
        # that jitted receives (_xla_lives) and Python ones (_rows) share it.
        raw = (self._pool._native.xla_state(9 * n) if atari else np.zeros(9 * n, np.uint8))
        self._lives = raw[:4 * n].view(np.int32)
        self._restarts = raw[4 * n:8 * n].view(np.int32)  # restarts after a life, this game
        self._life_lost = raw[8 * n:].view(np.bool_)  # the env's last row lost a life
        self._aliases = _MUJOCO_INFO_ALIASES.get(plan.task.native_id, {})
        optional = optional_info_keys(self._pool.spec.info)
        self._not_envpool = {"elapsed_step", "episode_return", "episode_length",
                             *optional, *optional.values()}

    # -- EnvPool's surface -----------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        """EnvPool's config dict (``num_envs``, ``batch_size``, ``seed``, env options ...)."""
        return dict(self._config)

    @property
    def all_env_ids(self) -> npt.NDArray[np.int32]:
        return self._ids

    @property
    def is_async(self) -> bool:
        """Whether ``batch_size < num_envs`` (recv returns the first envs to finish)."""
        return self._async

    @property
    def pool(self) -> Pool:
        """The aiopool ``Pool`` underneath (for ``await pool.recv()`` and friends)."""
        return self._pool

    def __len__(self) -> int:
        return self._num_envs

    def send(self, action: Any, env_id: npt.ArrayLike | None = None) -> None:
        """Send one action per env of ``env_id`` (default: all); returns at once. ``action``
        may be a dict ``{"action": ..., "env_id": ...}`` as in EnvPool."""
        if isinstance(action, dict):
            action, env_id = self._unpack(action, env_id)
        ids = self._as_ids(env_id)
        actions = self._actions(action)
        if len(actions) != len(ids):
            raise ValueError(f"action has shape {actions.shape}, expected ({len(ids)}, ...) — "
                             "one action per env in env_id")
        in_range = ids.size > 0 and ids.min() >= 0 and ids.max() < self._num_envs
        fresh = self._fresh[ids] if in_range else np.zeros(len(ids), dtype=np.bool_)
        sent = ids[fresh]
        if sent.size:  # EnvPool: an env's first step resets it (its action is ignored)
            self._reset_native(sent)
        try:
            if not fresh.all():
                self._pool.send(actions[~fresh], ids[~fresh])
            sent = ids
        finally:
            if not self._async and sent.size:
                self._pending.append(sent)  # sync mode: rows come back in the order sent

    def _as_ids(self, env_id: npt.ArrayLike | None) -> npt.NDArray[np.int32]:
        """``env_id`` as int32 ids (an int is one id), refused unless integers in range: a
        bool mask or float ids cast to int32 would step other envs (EnvPool casts them)."""
        if env_id is None:
            return self._ids
        return self._pool._as_ids(np.asarray(env_id).reshape(-1))

    def recv(self, reset: bool = False, return_info: bool = True) -> Any:
        """The next rows: in sync mode those of every env sent to since the last ``recv``, in
        the order sent; in async mode the first ``batch_size`` to finish.

        Raises:
            aiopool.NothingInFlight: too few steps are in flight to fill a batch (EnvPool
                waits forever there).
        """
        return self._to(self._recv_rows(), reset, return_info)

    def async_reset(self) -> None:
        """Reset every env; the first observations arrive through ``recv``."""
        self._reset_native(self._ids)
        if not self._async:
            self._pending.append(self._ids)

    def step(self, action: Any, env_id: npt.ArrayLike | None = None) -> Any:
        """``send(action, env_id)`` then ``recv()``."""
        self.send(action, env_id)
        return self.recv(reset=False, return_info=True)

    def _reset_and_recv(self, env_id: npt.ArrayLike | None) -> Any:
        ids = self._as_ids(env_id)
        self._reset_native(ids)
        if not self._async:
            self._pending.append(ids)
        return self.recv(reset=True, return_info=True)

    def seed(self, seed: int | list[int] | None = None) -> None:
        warnings.warn("The `seed` function in envpool is abandoned. You can set seed by "
                      "envpool.make(..., seed=seed) instead.", stacklevel=2)

    def xla(self) -> Any:
        """EnvPool's XLA interface: ``handle, recv, send, step = env.xla()`` (needs jax).

        ``send(handle, action, env_id=None) -> handle``, ``recv(handle) -> (handle, state)``
        and ``step(handle, action, env_id=None) -> (handle, state)`` work eagerly and inside
        ``jax.jit``, ``lax.scan``, ``fori_loop``, ``while_loop`` and ``cond``; the state is
        what ``step`` returns (gymnasium's 5-tuple with a dict info, or dm_env's
        ``TimeStep``), ``batch_size`` rows. Thread the handle through every call: XLA orders
        the calls by it alone. Python and jitted calls may alternate on one env. Errors are
        ``jax.errors.JaxRuntimeError`` with the Python API's message; ``vmap`` and ``grad``
        raise. See ``aiopool.jax``.
        """
        import jax

        from . import jax as _jax

        if self._pool.closed:
            self._pool._check_open()
        native = self._pool._native
        if _jax.native_handlers(native):
            names = tuple(native.field_names)
            per_life = self._episodic or self._zero_discount_on_life_loss
            native_port = _jax.NativePort(native, _jax.layout_leaves(native),
                                          by_env_id=not self._async,
                                          spin_ns=self._pool._spin_ns,
                                          state_bytes=9 * self._num_envs if per_life else 0)

            def native_state(handle: Any, out: list[Any]) -> Any:
                fields = dict(zip(names, out, strict=True))
                if per_life:  # Atari's per-life bookkeeping, shared with Python's receives
                    handle, raw = native_port.state_get(handle)
                    raw, lives = self._xla_lives(raw, fields)
                    handle = native_port.state_set(handle, raw)
                else:
                    lives = None
                return handle, self._xla_state(self._xla_rows(fields, lives))

            return _jax.functions(native_port, handle_state=native_state)
        _jax.fallback_warning("xla()")
        b = int(self._config["batch_size"])
        space = self._spec.observation_space
        if isinstance(space, gym.spaces.Dict):
            keys = list(space.spaces)
            obs_leaves, obs_tree = _jax._space_leaves(space, b)
        else:
            keys = []
            dtype = np.int32 if isinstance(space, gym.spaces.Discrete) else space.dtype
            obs_leaves = [_jax.Leaf((b, *(space.shape or ())), dtype)]
            obs_tree = jax.tree.structure(0)
        extras = list(self._spec._info.items())
        row = [(np.float32, "reward"), (np.bool_, "terminated"), (np.bool_, "truncated"),
               (np.int32, "env_id"), (np.int32, "elapsed_step"), (np.bool_, "first"),
               (np.float32, "discount")]
        leaves = [*obs_leaves, *(_jax.Leaf((b,), d) for d, _ in row),
                  *(_jax.Leaf((b,), d) for _, (d, _) in extras)]
        n = len(obs_leaves)

        def py_recv() -> list[Any]:
            rows = self._recv_rows()
            return [*jax.tree.leaves(rows.obs), rows.reward, rows.terminated,
                    rows.truncated, rows.env_id, rows.elapsed_step, rows.first, rows.discount,
                    *(rows.extras[name] for name, _ in extras)]

        def state(out: list[Any]) -> Any:
            obs = jax.tree.unflatten(obs_tree, out[:n])
            if keys:  # the space's order (dm_control's), not the flattening's sorted one
                obs = {k: obs[k] for k in keys}
            fields = dict(zip((name for _, name in row), out[n:n + len(row)], strict=True))
            rows = _Rows(obs=obs, extras={name: v for (name, _), v in
                                          zip(extras, out[n + len(row):], strict=True)},
                         **fields)
            return self._xla_state(rows)

        def py_send(action: Array, env_id: Array | None) -> None:
            self.send(action, env_id)

        act = self._spec.action_space
        dtype = np.dtype(np.int32 if isinstance(act, gym.spaces.Discrete) else act.dtype)
        port = _jax.Port(leaves, (tuple(act.shape or ()), dtype), self._num_envs, py_send,
                         py_recv)
        return _jax.functions(port, state)

    def render(self, env_ids: Any = None, camera_id: int | None = None) -> Any:
        """EnvPool's ``render``: frames ``[k, H, W, 3]`` of ``env_ids`` (default: the
        ``render_env_id`` given to make), each gymnasium's frame of that env's state. Only the
        camera given to make (``render_camera_id``); the envs must not have a step in flight."""
        pool = self._pool
        if pool.render_mode is None:
            raise RuntimeError("render_mode must be set to 'rgb_array' or 'human' when "
                               "creating this env")
        if camera_id is not None and camera_id != self._render_camera:
            raise NotImplementedError("render(camera_id=...): aiopool renders the camera given "
                                      "to make (render_camera_id) only")
        if env_ids is None:
            env_ids = [self._render_env_id]
        elif isinstance(env_ids, int | np.integer):
            env_ids = [int(env_ids)]
        return np.array(pool.render(env_ids))  # EnvPool's frames are the caller's to change

    def _close_pool(self) -> None:
        pool = getattr(self, "_pool", None)  # None: __init__ failed before making it
        if pool is not None:
            pool.close()

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={v!r}" for k, v in self._config.items())
        return f"{type(self).__name__}({self._task.envpool_id!r}, {items})"

    __str__ = __repr__

    # -- internals -------------------------------------------------------------------------

    def _to(self, rows: _Rows, reset: bool, return_info: bool) -> Any:
        raise NotImplementedError

    def _xla_state(self, rows: _Rows) -> Any:
        """``_to``'s step state for ``xla()``'s receive, of jax arrays."""
        raise NotImplementedError

    def _xla_lives(self, raw: Any, fields: dict[str, Any]) -> tuple[Any, tuple[Any, ...]]:
        """``_rows``' Atari per-life bookkeeping in the graph: the bookkeeping's bytes
        (``_lives``, ``_restarts``, ``_life_lost``) updated by a receive's rows, and the rows'
        ``(elapsed, first, lost, game_over)``."""
        import jax
        import jax.numpy as jnp

        n = self._num_envs
        as_i32 = jax.lax.bitcast_convert_type(raw[:8 * n].reshape(2 * n, 4), jnp.int32)
        all_lives, restarts = as_i32[:n], as_i32[n:]
        life_lost = raw[8 * n:] != 0
        ids = fields["env_id"]
        native_elapsed, terminated = fields["elapsed_step"], fields["terminated"]
        reset = native_elapsed == 0
        lives = fields["lives"]
        lost = ~reset & (lives < all_lives[ids]) & (lives > 0)
        restart = life_lost[ids] & ~reset
        row_restarts = jnp.where(reset, 0, restarts[ids] + restart)
        restarts = restarts.at[ids].set(row_restarts)
        elapsed = native_elapsed - row_restarts
        lost &= ~restart
        game_over = terminated & ~(lost & self._episodic)
        life_lost = life_lost.at[ids].set(terminated & lost & self._episodic)
        all_lives = all_lives.at[ids].set(lives)
        ints = jax.lax.bitcast_convert_type(jnp.concatenate([all_lives, restarts]), jnp.uint8)
        raw = jnp.concatenate([ints.reshape(-1), life_lost.astype(jnp.uint8)])
        return raw, (elapsed, reset | restart, lost, game_over)

    def _xla_rows(self, fields: dict[str, Any], lives: tuple[Any, ...] | None = None) -> _Rows:
        """``_rows`` in the graph, from a native receive's fields (``by_env_id`` in sync mode:
        rows in env id order, as the Python receive gives a step of every env), and, for
        Atari's per-life bookkeeping, ``_xla_lives``' rows."""
        import jax.numpy as jnp

        from . import jax as _jax

        native_elapsed = fields["elapsed_step"]
        terminated, truncated = fields["terminated"], fields["truncated"]
        reset = native_elapsed == 0
        done = terminated | truncated
        obs = _jax.split_obs(fields["obs"], self._pool.spec.obs_parts)
        extras: dict[str, Any] = {}
        discount: Any
        elapsed, first = native_elapsed, reset
        if self._atari:
            game_over = terminated
            discount = ~done
            if lives is not None:
                elapsed, first, lost, game_over = lives
                discount = ~done & ~(lost & self._zero_discount_on_life_loss)
            extras = {"lives": fields["lives"],
                      "reward": fields["reward_unclipped"].astype(jnp.float32),
                      "terminated": game_over.astype(jnp.int32)}
            obs = self._xla_frames(obs, native_elapsed)
        elif self._task.family == "dmc":
            space = cast(gym.spaces.Dict, self._spec.observation_space)
            obs = {key: obs[key] for key in space.spaces}
            discount = ~terminated
        elif self._task.family == "toy_text":  # Blackjack's parts: its flat row
            obs = fields["obs"].astype(jnp.int32)
            discount = ~done
            extras = {name: fields[name].astype(jnp.float32)
                      for name in _TOY_TEXT_INFO.get(self._task.native_id, ())}
        else:
            discount = ~done
            for name, (dtype, _) in self._spec._info.items():
                if name == "reward_alive" and self._task.native_id == "HumanoidStandup-v5":
                    extras[name] = jnp.where(reset, 0.0, 1.0).astype(dtype)
                else:
                    extras[name] = fields[self._aliases.get(name, name)].astype(dtype)
        discount = jnp.where(first, 1.0, discount.astype(jnp.float32)).astype(jnp.float32)
        return _Rows(obs, fields["reward"].astype(jnp.float32), terminated, truncated,
                     fields["env_id"], elapsed.astype(jnp.int32), first, discount, extras)

    def _xla_frames(self, obs: Any, native_elapsed: Any) -> Any:
        """``_envpool_frames`` in the graph."""
        import jax.numpy as jnp

        stack = self._stack
        unpushed = jnp.clip(stack - 1 - native_elapsed, 0, stack - 1)
        index = jnp.maximum(jnp.arange(stack)[None, :], unpushed[:, None])
        obs = jnp.take_along_axis(obs, index.reshape(index.shape + (1,) * (obs.ndim - 2)),
                                  axis=1)
        if self._rgb:
            b, stack, h, w, c = obs.shape
            obs = obs.transpose(0, 1, 4, 2, 3).reshape(b, stack * c, h, w)
        return obs

    def _unpack(self, action: dict[str, Any],
                env_id: npt.ArrayLike | None) -> tuple[Any, npt.ArrayLike | None]:
        known = {"action", "env_id", "players.env_id", "players"}
        if set(action) - known or "action" not in action:
            raise ValueError(f"a dict action has the keys {sorted(action)}; expected 'action' "
                             "and optionally 'env_id' (and 'players.env_id' equal to it)")
        return action["action"], action.get("env_id", env_id)

    def _actions(self, action: Any) -> Array:
        a = np.asarray(action)
        space = self._native_action
        if isinstance(space, gym.spaces.Discrete):
            if not np.issubdtype(a.dtype, np.integer):
                a = a.astype(np.int64)  # as EnvPool's astype(int32)
            return a.reshape(-1) if a.ndim == 0 else a
        return a.astype(space.dtype, copy=False)

    def _reset_native(self, ids: npt.NDArray[np.int32]) -> None:
        seed: list[int | None] | None = None
        if self._first_seed is not None and self._fresh[ids].any():  # make()'s list of seeds
            seed = [self._first_seed[i] if fresh else None
                    for i, fresh in zip(ids.tolist(), self._fresh[ids].tolist(), strict=True)]
        self._pool.async_reset(seed=seed, env_ids=ids)
        self._fresh[ids] = False

    def _recv_rows(self) -> _Rows:
        pool = self._pool
        if self._async or not self._pending:  # async, or nothing owed: the pool explains
            return self._rows(pool.recv_blocking(), None)
        order = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        if len(order) < self._num_envs:
            pool.flush()  # fewer rows than a batch: hand them out as a short batch
        batch = pool.recv_blocking()
        self._pending.clear()
        return self._rows(batch, order)

    def _rows(self, batch: Batch, order: npt.NDArray[np.int32] | None) -> _Rows:
        """EnvPool's rows from a batch (ordered as ``order``, else as received)."""
        if order is None or (len(order) == len(batch) and np.array_equal(batch.env_id, order)):
            take: Any = slice(None)
        else:
            by_id = np.argsort(batch.env_id, kind="stable")
            take = by_id[np.searchsorted(batch.env_id[by_id], order)]
        ids = np.array(batch.env_id[take])
        info = batch.info
        native_elapsed = np.array(info["elapsed_step"][take])
        terminated = np.array(batch.terminated[take])
        truncated = np.array(batch.truncated[take])
        obs: Any
        if isinstance(batch.obs, tuple):  # Blackjack's: one row
            obs = np.stack([part[take] for part in batch.obs], axis=1)
        elif isinstance(batch.obs, dict):  # the Control Suite's: a dict of arrays
            obs = {name: np.array(part[take]) for name, part in batch.obs.items()}
        else:
            obs = np.array(batch.obs[take])
        reset = native_elapsed == 0
        done = terminated | truncated
        extras: dict[str, Array] = {}
        if self._atari:
            lives = np.array(info["lives"][take])
            lost = ~reset & (lives < self._lives[ids]) & (lives > 0)
            restart = self._life_lost[ids] & ~reset  # EnvPool's step after a lost life
            self._restarts[ids] = np.where(reset, 0, self._restarts[ids] + restart)
            elapsed = native_elapsed - self._restarts[ids]
            lost &= ~restart
            game_over = terminated & ~(lost & self._episodic)
            self._life_lost[ids] = terminated & lost & self._episodic
            self._lives[ids] = lives
            first = reset | restart
            discount = (~done & ~(lost & self._zero_discount_on_life_loss)).astype(np.float32)
            extras = {"lives": lives,
                      "reward": info["reward_unclipped"][take].astype(np.float32),
                      "terminated": game_over.astype(np.int32)}
            obs = self._envpool_frames(obs, native_elapsed)
        elif self._task.family == "dmc":  # dm_control's discount: 0 only where terminated
            elapsed, first = native_elapsed, reset
            discount = (~terminated).astype(np.float32)
        elif self._task.family == "toy_text":  # EnvPool's int32 states and float32 prob
            elapsed, first = native_elapsed, reset
            discount = (~done).astype(np.float32)
            obs = obs.astype(np.int32)
            for name in _TOY_TEXT_INFO.get(self._task.native_id, ()):
                extras[name] = info[name][take].astype(np.float32)
        else:
            elapsed, first = native_elapsed, reset
            discount = (~done).astype(np.float32)
            for name, value in info.items():
                if name not in self._not_envpool:
                    extras[name] = value[take].astype(_envpool_dtype(value.dtype))
            for alias, name in self._aliases.items():
                extras[alias] = extras[name].copy()
            if self._task.native_id == "HumanoidStandup-v5":  # gymnasium adds 1 per step
                extras["reward_alive"] = np.where(reset, 0.0, 1.0)
        discount[first] = 1.0
        return _Rows(obs, batch.reward[take].astype(np.float32), terminated, truncated, ids,
                     elapsed.astype(np.int32), first, discount, extras)

    def _envpool_frames(self, obs: Array, native_elapsed: npt.NDArray[np.int32]) -> Array:
        """EnvPool's Atari frame stack: filled with the first frame after a reset (aiopool's,
        as ale-py's, starts with zeros), channels first for RGB."""
        for row in np.flatnonzero(native_elapsed < self._stack - 1).tolist():
            k = self._stack - 1 - int(native_elapsed[row])  # frames not yet pushed
            obs[row, :k] = obs[row, k]
        if self._rgb:
            b, stack, h, w, c = obs.shape
            obs = np.ascontiguousarray(obs.transpose(0, 1, 4, 2, 3)).reshape(b, stack * c, h, w)
        return obs

    def _info(self, rows: _Rows) -> _Info:
        info = _Info(env_id=rows.env_id, players={"env_id": rows.env_id.copy()})
        info.update(rows.extras)
        info["elapsed_step"] = rows.elapsed_step
        return info


class GymnasiumEnvPool(_EnvPool, gym.vector.VectorEnv, gym.Env):  # type: ignore[misc]
    """EnvPool's gymnasium form: ``reset() -> (obs, info)``, ``step() -> (obs, reward,
    terminated, truncated, info)``; ``observation_space`` / ``action_space`` are one env's
    (as EnvPool's, also as ``single_observation_space`` / ``single_action_space``)."""

    is_vector_env = True

    def __init__(self, plan: _Plan) -> None:
        _EnvPool.__init__(self, plan)
        self.render_mode = self._pool.render_mode
        self.metadata = {"render_modes": ["rgb_array"] if self._pool.spec.renders else [],
                         "autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}
        self.num_envs = plan.num_envs
        self.observation_space = self.single_observation_space = self._spec.observation_space
        self.action_space = self.single_action_space = self._spec.action_space
        self.spec = self._spec  # type: ignore[assignment]  # EnvPool's spec, not gymnasium's
        self.closed = False

    def reset(
            self, env_id: npt.ArrayLike | None = None, *, seed: int | list[int] | None = None,
            options: dict[str, Any] | None = None) -> tuple[Array, dict[str, Any]]:
        """Reset the envs of ``env_id`` (or ``options["reset_mask"]``; default all) and
        return their first rows. ``seed`` is ignored, as in EnvPool: seeds are set by make."""
        if seed is not None:
            warnings.warn("EnvPool seeds are fixed when the environment is created. "
                          "reset(seed=...) is ignored; pass seed to envpool.make instead.",
                          stacklevel=2)
        if options:
            unknown = set(options) - {"reset_mask"}
            if unknown:
                raise ValueError(f"Unsupported Gymnasium reset options for EnvPool: "
                                 f"{sorted(unknown)}")
            mask = np.asarray(options["reset_mask"], dtype=np.bool_)
            if mask.shape != (self._num_envs,) or not mask.any():
                raise ValueError(f"reset_mask must have shape ({self._num_envs},) and select "
                                 f"at least one env, got {mask!r}")
            if env_id is not None:
                raise ValueError("Pass either env_id or options['reset_mask'], not both.")
            env_id = np.flatnonzero(mask)
        out: tuple[Array, dict[str, Any]] = self._reset_and_recv(env_id)
        return out

    def step(self, action: Any, env_id: npt.ArrayLike | None = None) -> Any:
        return _EnvPool.step(self, action, env_id)

    def render(self, *args: Any, **kwargs: Any) -> Any:
        return _EnvPool.render(self, *args, **kwargs)

    def close_extras(self, **kwargs: Any) -> None:
        self._close_pool()

    def _to(self, rows: _Rows, reset: bool, return_info: bool) -> Any:
        info = self._info(rows)
        if reset:
            return rows.obs, info
        return rows.obs, rows.reward, rows.terminated, rows.truncated, info

    def _xla_state(self, rows: _Rows) -> Any:
        info = dict(self._info(rows))  # a plain dict: jax's pytrees know no subclass
        return rows.obs, rows.reward, rows.terminated, rows.truncated, info

    def __repr__(self) -> str:
        return _EnvPool.__repr__(self)

    __str__ = __repr__


try:
    from dm_env import Environment as _DmEnvironment  # type: ignore[import-untyped,import-not-found,unused-ignore]
    from dm_env import TimeStep as _TimeStep
except ImportError:  # dm-env is optional; make_dm says how to install it
    _DmEnvironment = object
    _TimeStep = None


class DMEnvPool(_EnvPool, _DmEnvironment):  # type: ignore[misc]
    """EnvPool's dm_env form: batched ``TimeStep``s whose ``observation`` is a namedtuple
    ``State(env_id, players, obs, <info keys>)``; ``step_type`` FIRST on resets (and, with
    ``episodic_life``, on the step that restarts play after a lost life), ``discount`` 0 where
    an episode ended (``zero_discount_on_life_loss``: also where a life was lost)."""

    def __init__(self, plan: _Plan) -> None:
        _EnvPool.__init__(self, plan)
        self.spec = self._spec
        self.num_envs = plan.num_envs

    def reset(self, env_id: npt.ArrayLike | None = None) -> Any:
        return self._reset_and_recv(env_id)

    def step(self, action: Any, env_id: npt.ArrayLike | None = None) -> Any:
        return _EnvPool.step(self, action, env_id)

    def observation_spec(self) -> Any:
        return self._spec.observation_spec()

    def action_spec(self) -> Any:
        return self._spec.action_spec()

    def close(self) -> None:
        self._close_pool()

    def _to(self, rows: _Rows, reset: bool, return_info: bool) -> Any:
        info = self._info(rows)
        del info["elapsed_step"]  # not in EnvPool's dm State
        obs = rows.obs if isinstance(rows.obs, dict) else {"obs": rows.obs}
        fields = {"env_id": info.pop("env_id"), "players": _Players(**info.pop("players")),
                  **obs, **info}
        step_type = np.where(rows.first, 0, np.where(rows.terminated | rows.truncated, 2, 1))
        return _TimeStep(step_type=step_type.astype(np.int32), reward=rows.reward,
                         discount=rows.discount, observation=_state_type(tuple(fields))(**fields))

    def _xla_state(self, rows: _Rows) -> Any:
        import jax.numpy as jnp

        info = self._info(rows)
        del info["elapsed_step"]
        obs = rows.obs if isinstance(rows.obs, dict) else {"obs": rows.obs}
        fields = {"env_id": info.pop("env_id"), "players": _Players(**info.pop("players")),
                  **obs, **info}
        step_type = jnp.where(rows.first, 0, jnp.where(rows.terminated | rows.truncated, 2, 1))
        return _TimeStep(step_type=step_type.astype(jnp.int32), reward=rows.reward,
                         discount=rows.discount, observation=_state_type(tuple(fields))(**fields))


# -- make ------------------------------------------------------------------------------------

@overload
def make(task_id: str, env_type: Literal["dm"], **kwargs: Any) -> DMEnvPool: ...
@overload
def make(task_id: str, env_type: Literal["gym", "gymnasium"], **kwargs: Any) -> GymnasiumEnvPool:
    ...
@overload
def make(task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool: ...


def make(task_id: str, env_type: str, **kwargs: Any) -> DMEnvPool | GymnasiumEnvPool:
    """EnvPool's ``make``: ``num_envs`` envs of ``task_id`` in the ``env_type`` form.

    Args:
        task_id: an EnvPool task id aiopool has (``list_all_envs()``), such as ``"Pong-v5"``.
        env_type: ``"gymnasium"`` (or ``"gym"``, the same in EnvPool 1.2.5) or ``"dm"``.
        **kwargs: EnvPool's, with EnvPool's defaults: ``num_envs=1``, ``batch_size=num_envs``,
            ``num_threads``, ``seed=42`` (int or one per env), ``max_episode_steps`` and the
            env's options (Atari: ``episodic_life``, ``reward_clip=False``, ``stack_num``,
            ``frame_skip``, ``gray_scale``, ``img_height`` ...; MuJoCo: EnvPool's v5 names).

    Raises:
        ValueError: a task id aiopool has no env for (the message lists those it has), an
            option aiopool cannot honour, an unknown env_type.
        TypeError: an unknown keyword (with the closest valid one) or a mistyped value.
    """
    if env_type in ("gym", "gymnasium"):
        return GymnasiumEnvPool(_plan(task_id, kwargs))
    if env_type == "dm":
        if _TimeStep is None:
            raise ImportError("env_type='dm' needs dm-env: pip install dm-env")
        return DMEnvPool(_plan(task_id, kwargs))
    raise ValueError(f"env_type is {env_type!r}, expected one of 'dm', 'gym' or 'gymnasium'")


def make_gym(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """``make(task_id, "gym", ...)``: the gymnasium API, as EnvPool 1.2.5's ``make_gym``."""
    return make(task_id, "gym", **kwargs)


def make_gymnasium(task_id: str, **kwargs: Any) -> GymnasiumEnvPool:
    """``make(task_id, "gymnasium", ...)``."""
    return make(task_id, "gymnasium", **kwargs)


def make_dm(task_id: str, **kwargs: Any) -> DMEnvPool:
    """``make(task_id, "dm", ...)``: batched dm_env ``TimeStep``s (needs ``dm-env``)."""
    return make(task_id, "dm", **kwargs)


def register(*args: Any, **kwargs: Any) -> None:
    """EnvPool's ``register`` has no counterpart: aiopool's envs are C++ headers registered
    when aiopool is built (``aiopool/_native/env.h``)."""
    raise NotImplementedError(
        "aiopool.envpool cannot register new envs: aiopool's envs are C++ headers registered "
        "at build time (see aiopool/_native/env.h)")
