"""Frames of ``render_mode="rgb_array"`` pools.

Three ways, as a family declares (``NativeFamily.renders``, families.py):

- ``"native"``: the env draws its frame in C++ (Atari: the screen ale-py's ``env.render()``
  gives), with the GIL released.
- ``"python"``: the reference draws it. The env hands the state its gymnasium class's
  ``render()`` reads (``render_state()``, env.h: classic control's ``state``, toy text's ``s``;
  ``export_data()``: MuJoCo's whole ``mjData``, copied into the gymnasium env's own); a
  gymnasium env of that class, made once per pool with the pool's kwargs, is given that state
  and renders it with gymnasium's own drawing code (pygame; MuJoCo's renderer through
  gymnasium's ``MujocoRenderer``). The frames are the reference's by construction, for any
  state the C++ env reaches bit for bit.
- ``"dm_control"``: the Control Suite's own ``physics.render`` draws it: each env's mjModel
  (its task moves targets in it) and mjData are copied (``export_model()``, ``export_data()``)
  into one dm_control ``Physics`` of the same compiled model, which renders them with the
  camera names and kwargs of ``physics.render`` (``width``, ``height``, ``camera_id``); a
  heightfield (quadruped-escape's terrain, each env's own) is uploaded to GL with each frame,
  as dm_control uploads it when the task draws a new one.

A frame is only taken of an env with no step in flight (its last received row's state).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

RENDER_MODES = ("rgb_array",)


def check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise ValueError(f"render_mode is {render_mode!r}; aiopool renders 'rgb_array' (frames "
                         "as arrays) or nothing (None)")


def _array(state: Sequence[float], n: int, f32: float) -> npt.NDArray[Any]:
    return np.array(state[:n], dtype=np.float32 if f32 else np.float64)


def _cart_pole(env: Any, s: Sequence[float]) -> None:
    env.state = np.array(s[:4], dtype=np.float64)


def _mountain_car(env: Any, s: Sequence[float]) -> None:
    env.state = np.array(s[:2], dtype=np.float64)


def _mountain_car_continuous(env: Any, s: Sequence[float]) -> None:
    env.state = _array(s, 2, s[2])


def _pendulum(env: Any, s: Sequence[float]) -> None:
    env.state = np.array(s[:2], dtype=np.float64)
    env.last_u = None if math.isnan(s[2]) else np.float32(s[2])


def _acrobot(env: Any, s: Sequence[float]) -> None:
    env.state = _array(s, 4, s[4])


def _frozen_lake(env: Any, s: Sequence[float]) -> None:
    env.s = int(s[0])
    letters = np.array(s[2:], dtype=np.uint8).reshape(int(s[1]), -1)
    env.desc = letters.view("S1")  # as np.asarray(desc, dtype="c") holds it
    env.nrow, env.ncol = env.desc.shape


def _cliff_walking(env: Any, s: Sequence[float]) -> None:
    env.s = int(s[0])


def _taxi(env: Any, s: Sequence[float]) -> None:
    env.s = int(s[0])
    env.taxi_orientation = int(s[1])
    env.lastaction = None  # render() would turn the heading to it otherwise


def _blackjack(env: Any, s: Sequence[float]) -> None:
    # render() reads _get_obs() (the player's sum and usable ace, the dealer's first card) and
    # the face-up card's name: a player's hand with that sum and ace stands in for the cards.
    total, dealer, ace, face, suit = (int(v) for v in s)
    env.player = [1, total - 11] if ace else [total]
    env.dealer = [dealer]
    env.dealer_top_card_value_str = {1: "A", 11: "J", 12: "Q", 13: "K"}.get(face, str(face))
    env.dealer_top_card_suit = "CDHS"[suit]


def _lunar_lander(env: Any, s: Sequence[float]) -> None:
    """The terrain, the lander's and legs' transforms and the particles (render_state() in
    lunar_lander.h), set into gymnasium's env, whose render() then ages the particles as the
    native env has."""
    from Box2D.b2 import circleShape, fixtureDef
    from gymnasium.envs.box2d.lunar_lander import SCALE, VIEWPORT_H

    if env.lander is None:
        env.reset(seed=0)  # its bodies, whose transforms are set below
    env.helipad_x1, env.helipad_x2, env.helipad_y = s[0], s[1], s[2]
    points = [(s[3 + 2 * i], s[4 + 2 * i]) for i in range(11)]
    top = VIEWPORT_H / SCALE
    env.sky_polys = [[p1, p2, (p2[0], top), (p1[0], top)]
                     for p1, p2 in itertools.pairwise(points)]
    at = 25
    for body in (env.lander, *env.legs):
        body.position = (s[at], s[at + 1])
        body.angle = s[at + 2]
        at += 3
    for particle in env.particles:
        env.world.DestroyBody(particle)
    env.particles = []
    for k in range(at, len(s), 4):
        particle = env.world.CreateDynamicBody(
            position=(s[k], s[k + 1]), angle=s[k + 2],
            fixtures=fixtureDef(shape=circleShape(radius=2 / SCALE, pos=(0, 0))))
        particle.ttl = s[k + 3]
        env.particles.append(particle)


def _bipedal_walker(env: Any, s: Sequence[float]) -> None:
    """The view, the lidar, the bodies' transforms, the clouds and the terrain
    (render_state() in bipedal_walker.h), set into gymnasium's env; the terrain's bodies are
    made again, as gymnasium makes them, when they change."""
    from gymnasium.envs.box2d import bipedal_walker as bw

    if env.hull is None:
        env.reset(seed=0)  # its walker's bodies and lidar callbacks
    env.scroll = s[0]
    env.lidar_render = int(s[1]) - 1  # render() counts this frame
    for i, lidar in enumerate(env.lidar):
        lidar.p1 = (s[2], s[3])
        lidar.p2 = (s[4 + 2 * i], s[5 + 2 * i])
    at = 24
    for body in (*env.legs, env.hull):
        body.position = (s[at], s[at + 1])
        body.angle = s[at + 2]
        at += 3
    clouds, at = s[at:at + 110], at + 110
    env.cloud_poly = []
    for c in range(bw.TERRAIN_LENGTH // 20):  # _generate_clouds, from its draws
        x = clouds[11 * c] * bw.TERRAIN_STEP
        y = bw.VIEWPORT_H / bw.SCALE * 3 / 4
        poly = [(x + 15 * bw.TERRAIN_STEP * math.sin(3.14 * 2 * a / 5) + clouds[11 * c + 1 + 2 * a],
                 y + 5 * bw.TERRAIN_STEP * math.cos(3.14 * 2 * a / 5) + clouds[11 * c + 2 + 2 * a])
                for a in range(5)]
        env.cloud_poly.append((poly, min(p[0] for p in poly), max(p[0] for p in poly)))
    terrain = tuple(s[at:])
    if getattr(env, "_aiopool_terrain", None) != terrain:
        _walker_terrain(env, terrain)


def _walker_terrain(env: Any, terrain: tuple[float, ...]) -> None:
    """gymnasium's terrain bodies and polygons, made from their points as _generate_terrain
    makes them."""
    from gymnasium.envs.box2d import bipedal_walker as bw

    for body in env.terrain:
        env.world.DestroyBody(body)
    n = bw.TERRAIN_LENGTH
    env.terrain_x, env.terrain_y = list(terrain[:n]), list(terrain[n:2 * n])
    env.terrain = []
    for k in range(2 * n, len(terrain), 8):
        env.fd_polygon.shape.vertices = [(terrain[k + 2 * j], terrain[k + 2 * j + 1])
                                         for j in range(4)]
        body = env.world.CreateStaticBody(fixtures=env.fd_polygon)
        body.color1, body.color2 = (255, 255, 255), (153, 153, 153)
        env.terrain.append(body)
    env.terrain_poly = []
    for i in range(n - 1):
        poly = [(env.terrain_x[i], env.terrain_y[i]), (env.terrain_x[i + 1], env.terrain_y[i + 1])]
        env.fd_edge.shape.vertices = poly
        body = env.world.CreateStaticBody(fixtures=env.fd_edge)
        body.color1 = body.color2 = (76, 255 if i % 2 == 0 else 204, 76)
        env.terrain.append(body)
        poly += [(poly[1][0], 0), (poly[0][0], 0)]
        env.terrain_poly.append((poly, (102, 153, 76)))
    env.terrain.reverse()
    env.drawlist = env.terrain + env.legs + [env.hull]
    env._aiopool_terrain = terrain


# gymnasium's env classes by name, and how each takes the state its render() reads.
_SETTERS: dict[str, Callable[[Any, Sequence[float]], None]] = {
    "CartPoleEnv": _cart_pole,
    "MountainCarEnv": _mountain_car,
    "Continuous_MountainCarEnv": _mountain_car_continuous,
    "PendulumEnv": _pendulum,
    "AcrobotEnv": _acrobot,
    "FrozenLakeEnv": _frozen_lake,
    "CliffWalkingEnv": _cliff_walking,
    "TaxiEnv": _taxi,
    "BlackjackEnv": _blackjack,
    "LunarLander": _lunar_lander,
    "BipedalWalker": _bipedal_walker,
}


def _minigrid(env: Any, s: Sequence[float]) -> None:
    """minigrid's env from a native env's ``render_state()`` (minigrid_env.h): its grid
    decoded as minigrid decodes an encoding, the agent, what it carries."""
    from minigrid.core.grid import Grid
    from minigrid.core.world_object import WorldObj

    width, height, x, y, direction = (int(v) for v in s[:5])
    held = [int(v) for v in s[5:8]]
    cells = np.array(s[8:8 + width * height * 3], dtype=np.uint8).reshape(width, height, 3)
    env.grid, _ = Grid.decode(cells)
    env.agent_pos, env.agent_dir = (x, y), direction
    env.carrying = WorldObj.decode(*held) if held[0] else None


# minigrid's env classes (the native ones: families.py's MINIGRID).
for _name in ("EmptyEnv", "DoorKeyEnv", "FourRoomsEnv", "LavaGapEnv", "CrossingEnv",
              "DistShiftEnv", "MultiRoomEnv", "GoToDoorEnv", "GoToObjectEnv", "FetchEnv",
              "PutNearEnv", "RedBlueDoorEnv", "MemoryEnv", "DynamicObstaclesEnv",
              "LockedRoomEnv", "PlaygroundEnv", "UnlockEnv", "UnlockPickupEnv",
              "BlockedUnlockPickupEnv", "KeyCorridorEnv", "ObstructedMaze_1Dlhb",
              "ObstructedMaze_Full", "ObstructedMaze_Full_V1"):
    _SETTERS[_name] = _minigrid


def draws(env_id: str) -> bool:
    """Whether gymnasium's env of ``env_id`` can draw a native env's frames here: a class this
    module can hand the state to, or a MuJoCo env (its whole mjData)."""
    import gymnasium as gym

    try:
        entry = str(gym.spec(env_id).entry_point)
    except gym.error.Error:  # not gymnasium's (Counting-v0)
        return False
    module, _, name = entry.partition(":")
    return name in _SETTERS or module.startswith("gymnasium.envs.mujoco.")


def _headless() -> bool:
    return not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class Renderer(Protocol):
    fps: float

    def frame(self, native: Any, env_id: int) -> npt.NDArray[np.uint8]: ...

    def close(self) -> None: ...


def headless_defaults() -> None:
    """Off screen, the drivers that render without a display, where the user chose none:
    pygame.display.init(), which toy text's render() calls, then needs no display (and SDL does
    not complain of one missing); gymnasium's MuJoCo viewer and dm_control try GLFW first,
    which cannot open a context without a display, while EGL renders headless. gymnasium and
    dm_control respect MUJOCO_GL (as this does, where it is set); dm_control reads it once, when
    it is first imported, so the Control Suite's family calls this before importing it."""
    if _headless():
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("MUJOCO_GL", "egl")


def python_renderer(env_id: str, kwargs: dict[str, Any]) -> Renderer:
    """The renderer of a ``renders="python"`` family's env: gymnasium's env of ``env_id``,
    made with ``kwargs`` (its constructor and rendering kwargs) and ``render_mode="rgb_array"``,
    draws each frame."""
    import gymnasium as gym

    headless_defaults()
    try:
        env = _reference(env_id, kwargs)
    except gym.error.DependencyNotInstalled as e:  # Box2D's drawing code without box2d
        from ._deps import install_hint

        raise ImportError(install_hint(f"Rendering {env_id} (gymnasium's drawing code)",
                                       "render", "pygame-ce>=2.1.3", "box2d==2.3.10")
                          + f"; gymnasium says: {e}") from e
    if hasattr(env, "mujoco_renderer"):
        return MujocoRenderer(env)
    return StateRenderer(env_id, env)


class StateRenderer:
    """Draws a native env's frames with its gymnasium class's ``render()``."""

    def __init__(self, env_id: str, env: Any) -> None:
        try:
            import pygame  # noqa: F401
        except ImportError as e:
            raise ImportError(f"{env_id} renders with gymnasium's pygame drawing code: pip "
                              "install pygame-ce (or aiopool's render extra)") from e
        self._env = env
        self._set = _SETTERS[type(self._env).__name__]
        self.fps = float(self._env.metadata.get("render_fps", 30))

    def frame(self, native: Any, env_id: int) -> npt.NDArray[np.uint8]:
        self._set(self._env, native.render_state(env_id))
        return np.asarray(self._env.render(), dtype=np.uint8)

    def close(self) -> None:
        self._env.close()


def _reference(env_id: str, kwargs: dict[str, Any]) -> Any:
    import gymnasium as gym

    env = gym.make(env_id, render_mode="rgb_array", disable_env_checker=True, **kwargs)
    return env.unwrapped


# The fields of an MjvCamera that gymnasium's viewer sets (default_camera_config) or MuJoCo's
# scene update moves.
CAMERA_FIELDS = ("type", "fixedcamid", "trackbodyid", "lookat", "distance", "azimuth",
                  "elevation", "orthographic")


class MujocoRenderer:
    """Draws MuJoCo envs' frames with gymnasium's ``MujocoRenderer``: each env's ``mjData`` is
    copied into one gymnasium env of the same model and kwargs, which renders it.

    gymnasium's viewer aims its free camera when it first renders (at the median of the geoms'
    positions then) and applies ``default_camera_config``; an env's own viewer does that at
    that env's first frame. So each env here gets its camera aimed at its own first frame, and
    the camera is kept per env between frames.
    """

    def __init__(self, env: Any) -> None:
        self._env = env
        self._renderer = self._env.mujoco_renderer
        self._cameras: dict[int, tuple[Any, ...]] = {}
        self.fps = float(self._env.metadata.get("render_fps", 30))

    def frame(self, native: Any, env_id: int) -> npt.NDArray[np.uint8]:
        native.export_data(env_id, self._env.data._address)
        renderer = self._renderer
        viewer = renderer._get_viewer(render_mode="rgb_array")
        saved = self._cameras.get(env_id)
        if saved is None:  # as a viewer made at this env's first frame aims its camera
            viewer._init_camera()
            renderer._set_cam_config()
        else:
            for name, value in zip(CAMERA_FIELDS, saved, strict=True):
                if isinstance(value, np.ndarray):
                    getattr(viewer.cam, name)[:] = value
                else:
                    setattr(viewer.cam, name, value)
        frame = np.asarray(renderer.render("rgb_array"), dtype=np.uint8)
        self._cameras[env_id] = tuple(np.array(v) if isinstance(v := getattr(viewer.cam, n),
                                                                np.ndarray) else v
                                      for n in CAMERA_FIELDS)
        return frame

    def close(self) -> None:
        self._env.close()


# dm_control's physics.render defaults.
DM_CONTROL_RENDER = {"width": 320, "height": 240, "camera_id": -1}


def dm_control_render_kwargs(env_id: str, kwargs: dict[str, Any], model: Any) -> dict[str, Any]:
    """physics.render's kwargs (``width``, ``height``, ``camera_id``: -1 the free camera, an
    index, or a camera's name) with its defaults, checked against the task's compiled model
    (a ``mujoco.MjModel``) as physics.render checks them; clear errors otherwise."""
    import mujoco

    unknown = kwargs.keys() - DM_CONTROL_RENDER.keys()
    if unknown:
        raise TypeError(f"{env_id}: {', '.join(sorted(unknown))} is not a kwarg of "
                        "physics.render (it takes width, height, camera_id)")
    out = {**DM_CONTROL_RENDER, **kwargs}
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
    camera = out["camera_id"]
    if isinstance(camera, str):
        if camera not in names:
            raise ValueError(f"{env_id}: camera_id={camera!r} is not one of its cameras "
                             f"{names} (or an index, -1 the free camera)")
    elif isinstance(camera, bool) or not isinstance(camera, int | np.integer) or not (
            -1 <= camera < model.ncam):
        raise ValueError(f"{env_id}: camera_id={camera!r}, expected -1 (the free camera), "
                         f"an index below {model.ncam} or one of {names}")
    buffer = {"width": model.vis.global_.offwidth, "height": model.vis.global_.offheight}
    for key in ("width", "height"):
        size = out[key]
        if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 1:
            raise ValueError(f"{env_id}: {key}={size!r}, expected a positive int")
        if size > buffer[key]:
            raise ValueError(f"{env_id}: {key}={size} > the model's offscreen framebuffer "
                             f"{key} {buffer[key]} (physics.render's limit)")
    return out


class DmControlRenderer:
    """Draws Control Suite envs' frames with dm_control's ``physics.render``: each env's model
    and data are copied into one ``Physics`` loaded from the task's compiled model (the MJB file
    the C++ envs load), which renders them as the task's own physics would.

    ``camera_id`` is dm_control's: -1 the free camera, a camera's index, or its name
    (``dm_control_render_kwargs``). Frames come at the task's control rate (``fps``). The
    fallback of ``MUJOCO_GL=osmesa`` / ``glfw``: on EGL the C++ envs draw these frames."""

    def __init__(self, env_id: str, model_file: str, control_steps: int,
                 kwargs: dict[str, Any]) -> None:
        headless_defaults()
        from dm_control import _render
        from dm_control import mujoco as dm_mujoco

        if _headless() and _render.BACKEND in (None, "glfw"):
            raise RuntimeError(
                f"{env_id} renders through dm_control, which chose {_render.BACKEND or 'no'} GL "
                "backend when it was first imported, and there is no display here: set "
                "MUJOCO_GL=egl (or osmesa) before dm_control is imported")
        self._physics: Any = dm_mujoco.Physics.from_binary_path(model_file)
        try:
            self._kwargs = dm_control_render_kwargs(env_id, kwargs, self._physics.model.ptr)
        except (TypeError, ValueError):
            self.close()
            raise
        model = self._physics.model
        self.fps = 1.0 / (model.opt.timestep * control_steps)
        self._model = int(model.ptr._address)
        self._data = int(self._physics.data.ptr._address)

    def frame(self, native: Any, env_id: int) -> npt.NDArray[np.uint8]:
        native.export_model(env_id, self._model)
        native.export_data(env_id, self._data)
        physics = self._physics
        if physics.model.nhfield:  # each env's own terrain (quadruped-escape draws one a reset)
            import mujoco

            contexts = physics.contexts
            with contexts.gl.make_current() as ctx:
                for i in range(physics.model.nhfield):
                    ctx.call(mujoco.mjr_uploadHField, physics.model.ptr, contexts.mujoco.ptr, i)
        return np.asarray(physics.render(**self._kwargs), dtype=np.uint8)

    def close(self) -> None:
        if self._physics is not None:
            self._physics.free()
            self._physics = None


def atari_fps() -> float:
    """ale-py's AtariEnv ``metadata["render_fps"]`` (its videos' frame rate)."""
    from ale_py.env import AtariEnv

    return float(AtariEnv.metadata.get("render_fps", 30))


def registered_fps(env_id: str) -> float | None:
    """The ``metadata["render_fps"]`` of the env class gymnasium registers for ``env_id``, read
    from the class (no env made); None where gymnasium has no such id or its module does not
    import (Box2D's without box2d)."""
    import gymnasium as gym

    spec = gym.registry.get(env_id)
    if spec is None or not isinstance(spec.entry_point, str):
        return None
    try:
        cls = gym.envs.registration.load_env_creator(spec.entry_point)
    except Exception:
        return None
    fps = (getattr(cls, "metadata", None) or {}).get("render_fps")
    return None if fps is None else float(fps)
