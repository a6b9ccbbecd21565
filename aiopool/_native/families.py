"""The native env families: each one's extension module, its ids and what the rest asks of it.

A family is one extension module in ``aiopool._native`` (``_core``, ``_toy_text``, ``_mujoco``,
``_atari``, ``_box2d``, ``_dmc``, ``_minigrid``, ``_procgen``, ``_metaworld``) and its env
headers in ``envs/<name>/``. registry.py loads the modules of ``FAMILIES`` in order and lists
what each registers; the rest of aiopool asks a pool's ``EnvSpec`` (``spec.family``,
``spec.rejects_nan_actions``) or ``registry.family_of(env_id)``, never an id list.

Adding a family: its headers, its ``<name>_module.cc`` and CMake target, a ``NativeFamily``
here with its line in ``FAMILIES``, and its tests. Nothing else names families.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.metadata
import importlib.util
import math
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class NativeFamily:
    """One native env family, as the registry and the specs of its pools see it.

    Attributes:
        name: its short name, as pools' ``spec.family`` gives it; its headers are in
            ``envs/<name>/`` (``_core`` also holds ``envs/testing/``: Counting-v0).
        title: how messages and ``registry.unavailable_families()`` name it ("MuJoCo").
        module: its extension module in ``aiopool._native``.
        ids: the ids it registers, known without importing the module, so that an id of a
            family this build cannot load gets "unavailable here: why", not "unknown env id".
        pattern: or a pattern (``re.fullmatch``) its ids match, for a family too large to list.
            Listed ids win over patterns: ``Ant-v5`` is MuJoCo's though it looks like a game.
        rejects_nan_actions: whether ``send`` rejects NaN in continuous actions, which would
            poison the state of most of the family's envs (±inf is taken: the envs clip it as
            gymnasium's do). False: NaN goes to the simulator, as gymnasium passes it (MuJoCo
            zeroes it and warns). The C++ env spec enforces it (``EnvSpec::rejects_nan_actions``,
            env.h); tests/test_registry.py checks that the two agree for every env.
        renders: how its pools render with ``render_mode="rgb_array"`` (aiopool/_render.py):
            ``"native"``, frames drawn in C++ (``render(uint8_t*)``, env.h); ``"python"``, the
            env's state drawn by its gymnasium class's own ``render()``; ``"dm_control"``, the
            env's model and data drawn by dm_control's ``physics.render``; None, it cannot
            render (``make`` says so).
        native_frames: ids of a ``"python"`` family whose C++ env draws its own frames
            (``"native"``): CarRacing, whose observation is its frame.
        render_kwargs: the reference's rendering kwargs of its envs (MuJoCo's ``width``, ...),
            which ``make`` takes and hands to the renderer.
        render_config: native config keys ``make`` sets when it renders, for the envs that
            declare them, and keeps from the user and the reference (LunarLander's
            ``particles``: it simulates the decoration gymnasium's env adds when it renders).
        preload: run before the import; raises ImportError saying what is missing.
        not_built: why the module is missing when the build left it out on purpose.
        prepared: native config keys that ``prepare`` fills and users never set.
        prepare: ``prepare(env_id, config)`` turns the kwargs of ``make`` (defaults filled in)
            into the config the C++ env takes, setting the ``prepared`` keys (the Control
            Suite: the task's model, compiled by dm_control itself).
        render_settings: ``render_settings(env_id, render_kwargs, config)`` turns the rendering
            kwargs of ``make`` into ``prepared`` keys of the C++ env, which draws its frames (and
            its pixel observations) with them: MuJoCo's camera, size and visual options. Called
            only for pools that draw (the prepared keys' defaults stand otherwise).
        own_kwargs: kwargs of aiopool's envs that the reference's env does not take (MuJoCo's
            ``obs_type``, ``frame_stack``): a Python renderer's reference env is made without
            them.
        kwarg_hints: for kwargs of the reference's own API that aiopool takes otherwise (or
            not), what to pass instead; ``make``'s unknown-kwarg error adds it.
        dm_flat_key: the key under which the reference's dm_env gives a ``flat_observation``
            (dm_control's ``OrderedDict(observations=...)``); ``make_dm`` wraps the pool's one
            array in it.
        reference_prefix: the prefix of the reference's own ids for the same envs (ale-py's
            ``"ALE/"``): ``make("ALE/Breakout-v5")`` names the native ``Breakout-v5`` instead of
            running the reference's env in worker processes unasked (``backend="processes"``
            runs it, registered by importing ``reference_module``).
        reference_module: the module whose import registers the reference's ids (imported
            where a ``"python"`` family without ``reference_prefix`` draws frames: minigrid).
        env_methods: methods of the reference's env, without arguments, that the adapters'
            ``call`` / ``env_method`` answer for a pool's envs (all alike): ``name(env_id,
            config)`` gives the value (Atari's ``get_action_meanings``).
        dm_step_error: ``"module:Class"`` of the exception the reference's dm_env raises where
            a step fails (dm_control's ``PhysicsError``); the pool ends that env's episode
            instead (``pool.env_error``), and an unbatched ``make_dm`` raises it after the step.
    """

    name: str
    title: str
    module: str
    ids: frozenset[str] = frozenset()
    pattern: str | None = None
    rejects_nan_actions: bool = True
    renders: str | None = None
    native_frames: frozenset[str] = frozenset()
    render_kwargs: frozenset[str] = frozenset()
    render_config: frozenset[str] = frozenset()
    preload: Callable[[], None] | None = None
    not_built: str | None = None
    prepared: frozenset[str] = frozenset()
    prepare: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    render_settings: Callable[[str, dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None
    own_kwargs: frozenset[str] = frozenset()
    kwarg_hints: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    dm_flat_key: str | None = None
    dm_step_error: str | None = None
    reference_prefix: str | None = None
    reference_module: str | None = None
    env_methods: dict[str, Callable[[str, dict[str, Any]], Any]] = field(
        default_factory=dict, hash=False, compare=False)

    def matches(self, env_id: str) -> bool:
        """Whether ``env_id`` matches this family's pattern (its listed ids aside)."""
        return self.pattern is not None and re.fullmatch(self.pattern, env_id) is not None


# The envs that need no simulator (core_module.cc); the engine lives in the same module and is
# imported by the registry directly, so nothing needs declaring for "unavailable here".
CLASSIC_CONTROL = NativeFamily(name="classic_control", title="classic control", module="_core",
                               renders="python")


# gymnasium's toy-text envs (toy_text_module.cc): plain C++, built with the core.
TOY_TEXT = NativeFamily(
    name="toy_text", title="toy text", module="_toy_text",
    ids=frozenset({"FrozenLake-v1", "FrozenLake8x8-v1", "CliffWalking-v1",
                   "CliffWalkingSlippery-v1", "Taxi-v4", "Blackjack-v1"}),
    renders="python")


MUJOCO_VERSION = "3.17.0"  # the libmujoco the _mujoco module is linked against, exactly


def _preload_mujoco() -> None:
    """Check the installed MuJoCo is the exact build _mujoco links, and load its library."""
    try:
        found = importlib.metadata.version("mujoco")
    except importlib.metadata.PackageNotFoundError:
        found = None
    if found != MUJOCO_VERSION:
        raise ImportError(f"aiopool's MuJoCo envs are built against mujoco=={MUJOCO_VERSION}, "
                          f"found {found or 'none'}; pip install mujoco=={MUJOCO_VERSION}")
    spec = importlib.util.find_spec("mujoco")
    if spec is not None and spec.submodule_search_locations:
        # The module's RUNPATH finds it in an installed tree; this covers other layouts.
        lib = os.path.join(spec.submodule_search_locations[0], f"libmujoco.so.{MUJOCO_VERSION}")
        if os.path.exists(lib):
            ctypes.CDLL(lib)


def _mujoco_render_settings(env_id: str, kwargs: dict[str, Any],
                            config: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's rendering kwargs of a MuJoCo v5 env as the C++ env's ``render_*`` keys
    (mujoco_env.h; ``config`` holds their defaults). ``default_camera_config`` not given is the
    env class's own default, read from gymnasium's signature as gymnasium.make would pass it."""
    import inspect

    import gymnasium as gym

    from .._render import CAMERA_FIELDS

    def count(key: str, low: int) -> int:
        value = kwargs[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{env_id}: {key}={value!r}, expected an int >= {low}")
        return value

    out: dict[str, Any] = {}
    for key, native, low in (("width", "render_width", 1), ("height", "render_height", 1),
                             ("max_geom", "render_max_geom", 1)):
        if key in kwargs:
            out[native] = count(key, low)
    if kwargs.get("camera_id") is not None:
        out["render_camera_id"] = count("camera_id", -1)
    if kwargs.get("camera_name") is not None:
        if not isinstance(kwargs["camera_name"], str):
            raise TypeError(f"{env_id}: camera_name={kwargs['camera_name']!r}, expected a str")
        out["render_camera_name"] = kwargs["camera_name"]
    if "default_camera_config" in kwargs:
        camera = kwargs["default_camera_config"]
    else:
        entry = gym.spec(env_id).entry_point
        module, _, name = str(entry).partition(":")
        cls = getattr(importlib.import_module(module), name)
        camera = inspect.signature(cls).parameters["default_camera_config"].default
    # render_camera_config holds the fields in CAMERA_FIELDS' order, lookat as three numbers
    # (NaN: not set; offscreen.h's Camera::aim reads them in this order).
    slots: dict[str, int] = {}
    for camera_field in CAMERA_FIELDS:
        slots[camera_field] = len(slots) + (2 if "lookat" in slots else 0)
    numbers = [math.nan] * len(config["render_camera_config"])
    for key, value in (camera or {}).items():
        if key not in slots:
            raise ValueError(f"{env_id}: default_camera_config has {key!r}; an MjvCamera's "
                             f"fields are {', '.join(CAMERA_FIELDS)}")
        if key == "lookat":
            if len(value) != 3:
                raise ValueError(f"{env_id}: default_camera_config's lookat takes 3 numbers")
            numbers[3:6] = [float(v) for v in value]
        else:
            numbers[slots[key]] = float(value)
    out["render_camera_config"] = tuple(numbers)
    flags = [-1.0] * len(config["render_visual_flags"])  # MuJoCo's mjNVISFLAG
    for flag, value in (kwargs.get("visual_options") or {}).items():
        if not 0 <= int(flag) < len(flags):
            raise ValueError(f"{env_id}: visual_options has flag {flag!r}; MuJoCo's visual "
                             f"flags are 0 to {len(flags) - 1} (mujoco.mjtVisFlag)")
        flags[int(flag)] = float(int(value))
    out["render_visual_flags"] = tuple(flags)
    return out


def _mujoco_renders() -> str:
    """MuJoCo frames are drawn in C++ through EGL (offscreen.h). Where the user chose another
    GL backend (MUJOCO_GL=osmesa or glfw), gymnasium's own renderer draws them with it."""
    return "native" if os.environ.get("MUJOCO_GL", "egl").lower() == "egl" else "python"


MUJOCO = NativeFamily(
    name="mujoco", title="MuJoCo", module="_mujoco",
    ids=frozenset(f"{name}-v5" for name in (
        "Ant", "HalfCheetah", "Hopper", "Walker2d", "Humanoid", "HumanoidStandup",
        "InvertedPendulum", "InvertedDoublePendulum", "Reacher", "Swimmer", "Pusher")),
    rejects_nan_actions=False, preload=_preload_mujoco, renders=_mujoco_renders(),
    render_kwargs=frozenset({"width", "height", "camera_id", "camera_name",
                             "default_camera_config", "max_geom", "visual_options"}),
    prepared=frozenset({"render_width", "render_height", "render_camera_id",
                        "render_camera_name", "render_max_geom", "render_camera_config",
                        "render_visual_flags"}),
    render_settings=_mujoco_render_settings, own_kwargs=frozenset({"obs_type", "frame_stack"}))


def _atari_action_meanings(env_id: str, config: dict[str, Any]) -> list[str]:
    """ale-py's ``AtariEnv.get_action_meanings()``: the names of the env's action set (the
    game's minimal set, or all 18 with ``full_action_space``), from ALE's own ROM settings."""
    import ale_py

    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(config["rom_path"])
    actions = (ale.getLegalActionSet() if config["full_action_space"]
               else ale.getMinimalActionSet())
    return [action.name for action in actions]


ATARI = NativeFamily(
    name="atari", title="Atari", module="_atari",
    pattern=r"[A-Z][A-Za-z0-9]*-v5",  # gymnasium's ALE/<Game>-v5 without "ALE/"
    renders="native", reference_prefix="ALE/", reference_module="ale_py",
    env_methods={"get_action_meanings": _atari_action_meanings},
    kwarg_hints={
        "thread_affinity_offset": "drop it: aiopool does not pin its worker threads",
        "continuous": "drop it: aiopool has no continuous action mode, only ale-py's "
                      "discrete one (continuous=False)",
        "continuous_action_threshold": "drop it: aiopool has no continuous action mode",
        "obs_type": "observations are ale-py's AtariVectorEnv's: grayscale=False for RGB; "
                    "no RAM observations"},
    not_built="this aiopool was built without ALE (-DAIOPOOL_WITH_ALE=OFF, or the build could "
              "not fetch the ale-py 0.12.1 sdist; its log says why). Reinstall with access to "
              "PyPI, or pass an unpacked sdist: pip install -e . "
              "-Ccmake.define.ALE_SOURCE_DIR=/path/to/ale_py-0.12.1")


# LunarLander's advice on its wind (gymnasium warns at construction; the values stand).
_WIND_ADVICE = (("wind_power", 20.0), ("turbulence_power", 2.0))


def _prepare_box2d(env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """gymnasium's warnings on LunarLander's wind; CarRacing's glyph table for its score
    (pygame_font.py), as hex text."""
    for key, high in _WIND_ADVICE:
        value = config.get(key)
        if value is not None and not 0.0 <= value <= high:  # NaN too: it makes every obs NaN
            import gymnasium as gym

            gym.logger.warn(f"{key} value is recommended to be between 0.0 and {high}, "
                            f"(current value: {value})")
    if "score_glyphs" not in config:
        return config
    from .pygame_font import glyph_table

    return {**config, "score_glyphs": glyph_table().hex()}


BOX2D = NativeFamily(
    name="box2d", title="Box2D", module="_box2d",
    ids=frozenset({"LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3",
                   "BipedalWalkerHardcore-v3", "CarRacing-v3"}),
    renders="python", native_frames=frozenset({"CarRacing-v3"}),
    render_config=frozenset({"particles"}),
    prepared=frozenset({"score_glyphs"}), prepare=_prepare_box2d,
    not_built="this aiopool was built without Box2D (-DAIOPOOL_WITH_BOX2D=OFF, or the build "
              "could not fetch the box2d-py 2.3.8 sdist; its log says why). Reinstall with access "
              "to PyPI, or pass an unpacked sdist: pip install -e . "
              "-Ccmake.define.BOX2D_SOURCE_DIR=/path/to/box2d-py-2.3.8")


# minigrid 3.2.0's envs (minigrid_module.cc), seed for seed. The ids not listed here run on the
# process backend (minigrid's own envs in worker processes).
MINIGRID = NativeFamily(
    name="minigrid", title="MiniGrid", module="_minigrid",
    ids=frozenset({
        *(f"MiniGrid-Empty-{s}-v0" for s in ("5x5", "Random-5x5", "6x6", "Random-6x6", "8x8",
                                            "16x16")),
        *(f"MiniGrid-DoorKey-{n}x{n}-v0" for n in (5, 6, 8, 16)),
        "MiniGrid-FourRooms-v0", "MiniGrid-LockedRoom-v0", "MiniGrid-Playground-v0",
        *(f"MiniGrid-LavaGapS{n}-v0" for n in (5, 6, 7)),
        *(f"MiniGrid-{kind}CrossingS{s}-v0" for kind in ("Lava", "Simple")
          for s in ("9N1", "9N2", "9N3", "11N5")),
        "MiniGrid-DistShift1-v0", "MiniGrid-DistShift2-v0",
        *(f"MiniGrid-MultiRoom-{s}" for s in ("N2-S4-v0", "N4-S5-v0", "N4-S5-v1", "N6-v0")),
        *(f"MiniGrid-GoToDoor-{n}x{n}-v0" for n in (5, 6, 8)),
        "MiniGrid-GoToObject-6x6-N2-v0", "MiniGrid-GoToObject-8x8-N2-v0",
        "MiniGrid-Fetch-5x5-N2-v0", "MiniGrid-Fetch-6x6-N2-v0", "MiniGrid-Fetch-8x8-N3-v0",
        "MiniGrid-PutNear-6x6-N2-v0", "MiniGrid-PutNear-8x8-N3-v0",
        "MiniGrid-RedBlueDoors-6x6-v0", "MiniGrid-RedBlueDoors-8x8-v0",
        *(f"MiniGrid-Memory{s}-v0" for s in ("S17Random", "S13Random", "S13", "S11", "S9",
                                             "S7")),
        *(f"MiniGrid-Dynamic-Obstacles-{s}-v0" for s in ("5x5", "Random-5x5", "6x6",
                                                         "Random-6x6", "8x8", "16x16")),
        "MiniGrid-Unlock-v0", "MiniGrid-UnlockPickup-v0", "MiniGrid-BlockedUnlockPickup-v0",
        *(f"MiniGrid-KeyCorridor{s}-v0" for s in ("S3R1", "S3R2", "S3R3", "S4R3", "S5R3",
                                                  "S6R3")),
        *(f"MiniGrid-ObstructedMaze-{s}" for s in (
            "1Dl-v0", "1Dlh-v0", "1Dlhb-v0", "2Dl-v0", "2Dlh-v0", "2Dlhb-v0", "1Q-v0", "2Q-v0",
            "Full-v0", "2Dlhb-v1", "1Q-v1", "2Q-v1", "Full-v1"))}),
    renders="python", reference_module="minigrid",
    render_kwargs=frozenset({"tile_size", "highlight", "agent_pov", "screen_size"}))


# The order in which the registry searches the modules and aiopool.list_envs() lists their ids.
DMC_VERSION = "1.0.50"  # dm_control, the reference: its models, tasks and MuJoCo (3.17.0)
# (id, time_limit, n_sub_steps, task kwargs) -> the MJB file, n_sub_steps and step limit.
_DMC_MODELS: dict[tuple[Any, ...], tuple[str, int, float]] = {}
_DMC_PREPARED = frozenset({"model_file", "control_steps", "step_limit", "render_width",
                           "render_height", "render_camera_id"})
_DMC_ENVIRONMENT = frozenset({"time_limit", "n_sub_steps", "flat_observation"})
_DMC_OWN = frozenset({"obs_type", "frame_stack"})  # pixel observations: aiopool's own kwargs
_DMC_DIR: list[tempfile.TemporaryDirectory[str]] = []


def _prepare_dmc(env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """dm_control builds the task (``suite.load(domain, task, task_kwargs, environment_kwargs)``)
    once per id and kwargs: its compiled model is saved as a binary MJB file for the C++ envs,
    with its control.Environment's n_sub_steps and step limit. The files live in a temporary
    directory removed at exit."""
    from .._render import headless_defaults

    headless_defaults()  # before dm_control's first import, which picks its GL backend
    try:
        from dm_control import suite
    except ImportError as e:
        raise ImportError(f"{env_id} builds its model with dm_control: pip install "
                          f"dm-control=={DMC_VERSION} (or aiopool's dmc extra)") from e
    import mujoco

    domain, task = env_id.removeprefix("dmc/").split("-", 1)
    time_limit, n_sub_steps = float(config["time_limit"]), int(config["n_sub_steps"])
    if not time_limit > 0:
        raise ValueError(f"{env_id}: time_limit is {time_limit!r}, expected seconds > 0 (inf: "
                         "no limit)")
    if n_sub_steps < 0:
        raise ValueError(f"{env_id}: n_sub_steps is {n_sub_steps}, expected >= 1 (0: the task's)")
    task_kwargs = {k: v for k, v in config.items()
                   if k not in _DMC_PREPARED | _DMC_ENVIRONMENT | _DMC_OWN}
    key = (env_id, time_limit, n_sub_steps, *sorted(task_kwargs.items()))
    if key not in _DMC_MODELS:
        try:
            env = suite.load(domain, task,
                             task_kwargs={"random": 0, "time_limit": time_limit, **task_kwargs},
                             environment_kwargs={"n_sub_steps": n_sub_steps} if n_sub_steps else {})
        except ValueError as e:
            if "control_timestep" not in str(e):
                raise
            raise ValueError(f"{env_id}: n_sub_steps={n_sub_steps} cannot be honoured: "
                             f"dm_control's {domain} sets its control timestep, and with it the "
                             "physics steps per control step (only n_sub_steps=0, the task's)"
                             ) from None
        if not _DMC_DIR:
            _DMC_DIR.append(tempfile.TemporaryDirectory(prefix="aiopool-dmc-"))
        path = os.path.join(_DMC_DIR[0].name, f"{len(_DMC_MODELS)}.mjb")
        mujoco.mj_saveModel(env.physics.model.ptr, path, None)
        _DMC_MODELS[key] = (path, int(env._n_sub_steps), float(env._step_limit))
    path, steps, limit = _DMC_MODELS[key]
    return {**config, "model_file": path, "control_steps": steps,
            "step_limit": limit if limit != float("inf") else 0.0}


def _dmc_render_settings(env_id: str, render_kwargs: dict[str, Any],
                         config: dict[str, Any]) -> dict[str, Any]:
    """physics.render's kwargs, checked against the task's compiled model as dm_control checks
    them (a camera's name becomes its index), as the C++ env's render_* keys: its frames and
    pixel observations are drawn in C++ (../mujoco/offscreen.h's draw_dm_control)."""
    import mujoco

    from .._render import dm_control_render_kwargs

    model = mujoco.MjModel.from_binary_path(config["model_file"])
    kwargs = dm_control_render_kwargs(env_id, render_kwargs, model)
    camera = kwargs["camera_id"]
    if isinstance(camera, str):
        camera = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    return {"render_width": int(kwargs["width"]), "render_height": int(kwargs["height"]),
            "render_camera_id": int(camera)}


# The DeepMind Control Suite (dmc_module.cc): dm_control's tasks on the same libmujoco, ids
# "dmc/<domain>-<task>".
DMC = NativeFamily(
    name="dmc", title="DeepMind Control Suite", module="_dmc",
    ids=frozenset({"dmc/cheetah-run", "dmc/pendulum-swingup", "dmc/cartpole-balance",
                   "dmc/cartpole-balance_sparse", "dmc/cartpole-swingup",
                   "dmc/cartpole-swingup_sparse", "dmc/cartpole-two_poles",
                   "dmc/cartpole-three_poles", "dmc/walker-stand", "dmc/walker-walk",
                   "dmc/walker-run", "dmc/reacher-easy", "dmc/reacher-hard",
                   "dmc/acrobot-swingup", "dmc/acrobot-swingup_sparse", "dmc/ball_in_cup-catch",
                   "dmc/point_mass-easy", "dmc/point_mass-hard", "dmc/hopper-stand",
                   "dmc/hopper-hop", "dmc/finger-spin", "dmc/finger-turn_easy",
                   "dmc/finger-turn_hard", "dmc/swimmer-swimmer6", "dmc/swimmer-swimmer15",
                   "dmc/fish-upright", "dmc/fish-swim", "dmc/quadruped-walk",
                   "dmc/quadruped-run", "dmc/quadruped-escape", "dmc/quadruped-fetch",
                   "dmc/humanoid-stand", "dmc/humanoid-walk",
                   "dmc/humanoid-run", "dmc/humanoid-run_pure_state", "dmc/humanoid_CMU-stand",
                   "dmc/humanoid_CMU-walk", "dmc/humanoid_CMU-run", "dmc/lqr-lqr_2_1",
                   "dmc/lqr-lqr_6_2", "dmc/stacker-stack_2", "dmc/stacker-stack_4",
                   "dmc/manipulator-bring_ball", "dmc/manipulator-bring_peg",
                   "dmc/manipulator-insert_ball", "dmc/manipulator-insert_peg", "dmc/dog-stand",
                   "dmc/dog-walk", "dmc/dog-trot", "dmc/dog-run", "dmc/dog-fetch"}),
    rejects_nan_actions=False, preload=_preload_mujoco,
    prepared=_DMC_PREPARED, prepare=_prepare_dmc,
    renders="native" if _mujoco_renders() == "native" else "dm_control",
    render_kwargs=frozenset({"width", "height", "camera_id"}),
    render_settings=_dmc_render_settings, own_kwargs=_DMC_OWN,
    kwarg_hints={
        "task_kwargs": "suite.load's task_kwargs are make()'s own kwargs (time_limit=..., "
                       "the task's options); its random is seed=",
        "environment_kwargs": "suite.load's environment_kwargs are make()'s own kwargs "
                              "(n_sub_steps=..., flat_observation=...)",
        "random": "dm_control's task random is make()'s seed= (env i: seed + i)",
        "control_timestep": "the control timestep is the task's; n_sub_steps= sets the "
                            "physics steps per control step where the domain allows",
        "visualize_reward": "not supported: frames are drawn without the reward colouring",
        "from_pixels": "pixel observations are obs_type='pixels' (or 'state+pixels')"},
    dm_flat_key="observations", dm_step_error="dm_control.rl.control:PhysicsError")


def _prepare_procgen(env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """Where procgen's library and assets are (aiopool/procgen.py: fetched on first use)."""
    from .. import procgen

    library, assets = procgen.ensure(env_id)
    return {**config, "library": library, "resource_root": assets}


# Procgen (procgen_module.cc): procgen 0.10.7's games through its own library, loaded at run
# time. EnvPool's ids (CoinrunEasy-v0) and procgen's gym ids (procgen-coinrun-v0).
PROCGEN = NativeFamily(
    name="procgen", title="Procgen", module="_procgen",
    pattern=r"[A-Z][a-z]+(Easy|Hard|Extreme|Memory|Exploration)-v0|procgen-[a-z]+-v0",
    renders="native", render_config=frozenset({"render_human"}),
    prepared=frozenset({"env_name", "library", "resource_root"}), prepare=_prepare_procgen,
    kwarg_hints={
        "num": "make()'s num_envs",
        "rand_seed": "make()'s seed= (env i is ProcgenGym3Env(num=1, rand_seed=seed + i))",
        "env_name": "the id names the game (CoinrunEasy-v0, procgen-coinrun-v0)",
        "debug_mode": "not supported (procgen's debugging aid)",
        "resource_root": "aiopool uses the assets of the wheel it fetched"})


METAWORLD_VERSION = "3.1.1"  # metaworld, the reference: its models and tasks


def _metaworld_assets() -> str:
    """The installed metaworld's model directory, found without importing metaworld."""
    found = None
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        found = importlib.metadata.version("metaworld")
    spec = importlib.util.find_spec("metaworld")
    if found != METAWORLD_VERSION or spec is None or not spec.submodule_search_locations:
        raise ImportError(
            f"aiopool's Meta-World envs read their models from metaworld=={METAWORLD_VERSION}, "
            f"found {found or 'none'}: pip install --no-deps metaworld=={METAWORLD_VERSION} "
            "(it pins mujoco==3.3.0; aiopool runs its tasks on mujoco==3.17.0)")
    return os.path.join(spec.submodule_search_locations[0], "assets")


def _preload_metaworld() -> None:
    """MuJoCo as the _mujoco module needs it, and metaworld's models."""
    _preload_mujoco()
    _metaworld_assets()


def _prepare_metaworld(env_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """The installed metaworld's model directory, from which each task loads its MJCF."""
    return {**config, "assets_dir": _metaworld_assets()}


# Meta-World's v3 tasks (metaworld_module.cc), ids "Meta-World/<task>-v3": env i equals
# gym.make("Meta-World/MT1", env_name="<task>-v3", seed=seed + i).
METAWORLD = NativeFamily(
    name="metaworld", title="Meta-World", module="_metaworld",
    ids=frozenset({"Meta-World/reach-v3", "Meta-World/push-v3"}),
    rejects_nan_actions=False, preload=_preload_metaworld,
    prepared=frozenset({"assets_dir"}), prepare=_prepare_metaworld)


FAMILIES: tuple[NativeFamily, ...] = (CLASSIC_CONTROL, TOY_TEXT, MUJOCO, ATARI, BOX2D, DMC,
                                      MINIGRID, PROCGEN, METAWORLD)
