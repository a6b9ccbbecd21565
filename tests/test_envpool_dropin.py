"""``import aiopool.envpool as envpool``: EnvPool's own usage patterns (its README and docs),
EnvPool's Atari ``episodic_life``, and, where EnvPool 1.2.5 is installed, the same calls made on
EnvPool side by side (shapes, dtypes, info keys, spaces, configs; not numbers copied from it)."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aiopool
import aiopool.envpool as ours
from aiopool._native.families import ATARI, BOX2D, DMC

HAVE_ENVPOOL = importlib.util.find_spec("envpool") is not None
needs_envpool = pytest.mark.skipif(not HAVE_ENVPOOL, reason="EnvPool is not installed "
                                   "(pip install envpool==1.2.5 opencv-python-headless)")


def real() -> ModuleType:
    import envpool

    assert envpool.__version__ == "1.2.5"
    return envpool


def both() -> list[ModuleType]:
    """aiopool's drop-in, and EnvPool itself when it is installed."""
    return [ours, real()] if HAVE_ENVPOOL else [ours]


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*(precision lowered|settotalmass).*")
        yield


# -- EnvPool's README and docs -------------------------------------------------------------

@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_readme_synchronous_api(envpool: ModuleType) -> None:
    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=4)
    obs, info = env.reset()
    assert obs.shape == (4, 4, 84, 84) and obs.dtype == np.uint8
    act = np.zeros(4, dtype=int)
    obs, rew, term, trunc, info = env.step(act)
    assert obs.shape == (4, 4, 84, 84)
    assert rew.shape == term.shape == trunc.shape == (4,)
    assert (rew.dtype, term.dtype, trunc.dtype) == (np.float32, np.bool_, np.bool_)
    assert info["env_id"].tolist() == [0, 1, 2, 3]
    assert info["elapsed_step"].tolist() == [1, 1, 1, 1]
    env.close()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_readme_asynchronous_api(envpool: ModuleType) -> None:
    num_envs, batch_size = 8, 4
    env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=num_envs,
                       batch_size=batch_size)
    assert env.is_async
    action_num = env.action_space.n
    env.async_reset()  # send the initial reset signal to all envs
    expected = np.zeros(num_envs, dtype=np.int64)  # each env's next elapsed_step
    ended = np.zeros(num_envs, dtype=np.bool_)
    rows = episodes = 0
    for _ in range(300):
        obs, _, term, trunc, info = env.recv()
        env_id = info["env_id"]
        assert obs.shape == (batch_size, 4) and len(set(env_id.tolist())) == batch_size
        expected[env_id[ended[env_id]]] = 0  # next-step autoreset: the row after an end
        assert info["elapsed_step"].tolist() == expected[env_id].tolist()
        expected[env_id] += 1
        ended[env_id] = term | trunc
        rows += len(env_id)
        episodes += int(ended[env_id].sum())
        action = np.random.randint(action_num, size=batch_size)
        env.send(action, env_id)
    assert rows == 300 * batch_size
    assert episodes > 20  # a random CartPole policy lasts ~22 steps
    env.close()


Leaf = tuple[str, tuple[int, ...], np.dtype[Any]]


def _leaf(value: Any) -> Leaf:
    """An array's or a dm_env spec's kind, shape and dtype (never its values)."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return type(value).__name__, tuple(value.shape), np.dtype(value.dtype)
    return "scalar", np.shape(value), np.asarray(value).dtype


def _shapes(result: Any, prefix: str = "") -> dict[str, Leaf]:
    """A reset / step result (or a dm spec) as its structure: path -> leaf. EnvPool's info keys
    that aiopool does not provide (Atari's ram, Acrobot's state) are left out."""
    if isinstance(result, tuple) and not hasattr(result, "_asdict"):
        result = {str(i): part for i, part in enumerate(result)}
    if not (isinstance(result, dict) or hasattr(result, "_asdict")):
        return {prefix: _leaf(result)}
    items = result._asdict().items() if hasattr(result, "_asdict") else result.items()
    out: dict[str, Leaf] = {}
    for key, value in items:
        if key not in ("ram", "state"):
            out.update(_shapes(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


# gymnasium's MuJoCo info keys, which aiopool returns beside EnvPool's names for them
GYMNASIUM_EXTRAS = {"reward_forward", "reward_ctrl", "reward_survive", "reward_contact",
                    "x_position", "y_position", "z_distance_from_origin", "distance_from_origin",
                    "x_velocity", "y_velocity", "tendon_length", "tendon_velocity",
                    "distance_penalty", "velocity_penalty", "mujoco_warning", "mujoco_error"}


def _same_structure(mine: Any, theirs: Any, envpool_only: frozenset[str] = frozenset()) -> None:
    """Equal structures, but for gymnasium's extra info keys in aiopool's and the keys only
    EnvPool's have (``envpool_only``)."""
    got, want = _shapes(mine), _shapes(theirs)
    want = {path: leaf for path, leaf in want.items() if path.split(".")[-1] not in envpool_only}
    extra = {path for path in got.keys() - want.keys()
             if path.split(".")[-1] in GYMNASIUM_EXTRAS}
    assert {path: got[path] for path in got.keys() - extra} == want


def _same_order_and_bounds(mine: Any, theirs: Any, leading: list[str]) -> None:
    """A dm spec (or observation) whose ``leading`` fields (env_id, players and the obs
    parts) come in EnvPool's order, and whose bounds are scalars where EnvPool's are and ours
    are the same for every element (``spec.minimum == -1.0`` is a bool in code written for
    EnvPool; Box2D's observations are bounded in gymnasium's, not in EnvPool's)."""
    if hasattr(theirs, "_fields"):
        assert [f for f in mine._fields if f in leading] == [
            f for f in theirs._fields if f in leading]
        for field in leading:
            _same_order_and_bounds(getattr(mine, field), getattr(theirs, field), [])
    elif (hasattr(theirs, "minimum") and not hasattr(theirs, "num_values")
          and all(np.unique(b).size == 1 for b in (mine.minimum, mine.maximum))):
        assert (np.ndim(mine.minimum), np.ndim(mine.maximum)) == (
            np.ndim(theirs.minimum), np.ndim(theirs.maximum)), theirs.name


SIDE_BY_SIDE = ["Pong-v5", "Breakout-v5", "CartPole-v1", "Pendulum-v1", "HalfCheetah-v5",
                "Hopper-v5", "Acrobot-v1", "FrozenLake8x8-v1", "Taxi-v3", "CliffWalking-v0",
                "LunarLander-v2", "BipedalWalkerHardcore-v3", "CarRacing-v2", "Blackjack-v1",
                "CheetahRun-v1", "HumanoidCMUWalk-v1", "CartpoleThreePoles-v1", "StackerStack4-v1",
                "ManipulatorInsertPeg-v1",  # these two: matrix observation parts
                "QuadrupedEscape-v1"]  # a heightfield drawn at each reset


# EnvPool's Control Suite observations have every key of the domain's tasks (zeros where the
# task has none); aiopool's are the task's own, dm_control's (docs/migrating.md).
ENVPOOL_ONLY_KEYS = {
    "FingerSpin-v1": {"dist_to_target", "target_position"}, "FishUpright-v1": {"target"},
    "HumanoidRun-v1": {"position"}, "HumanoidStand-v1": {"position"},
    "HumanoidWalk-v1": {"position"},
    "HumanoidRunPureState-v1": {"com_velocity", "extremities", "head_height", "joint_angles",
                                "torso_vertical"},
    "QuadrupedRun-v1": {"ball_state", "origin", "rangefinder", "target_position"},
    "QuadrupedWalk-v1": {"ball_state", "origin", "rangefinder", "target_position"},
    "QuadrupedFetch-v1": {"origin", "rangefinder"},
    "QuadrupedEscape-v1": {"ball_state", "target_position"},
    **{f"Dog{task}-v1": {"ball_state", "target_position"} for task in ("Stand", "Walk", "Trot",
                                                                       "Run")}}


def _same_space(mine: gym.Space[Any], theirs: gym.Space[Any], task_id: str) -> None:
    """Equal spaces; EnvPool's Box2D and Control Suite observation spaces have no bounds (the
    dtype's smallest positive value up to its largest), aiopool's are gymnasium's (Box2D) and
    unbounded (the Control Suite's): those compare shape and dtype, key by key."""
    family = aiopool.registry.family_of(ours._task(task_id).native_id)
    if isinstance(theirs, gym.spaces.Dict) and family is DMC:
        assert isinstance(mine, gym.spaces.Dict), task_id
        assert set(theirs.keys()) - set(mine.keys()) == ENVPOOL_ONLY_KEYS.get(task_id, set())
        for key, part in mine.spaces.items():
            assert isinstance(theirs[key], gym.spaces.Box) and theirs[key].low.min() > 0
            assert (part.shape, part.dtype) == (theirs[key].shape, theirs[key].dtype), task_id
        return
    if family is BOX2D and isinstance(theirs, gym.spaces.Box) and theirs.low.min() > 0:
        assert (mine.shape, mine.dtype) == (theirs.shape, theirs.dtype), task_id
        return
    assert mine == theirs, task_id


@needs_envpool
@pytest.mark.parametrize(("task_id", "env_type"), [
    # each task in one env type in the default tier (the types in turn), in all with the slow
    pytest.param(task_id, env_type, marks=[] if k % 3 == t else [pytest.mark.slow])
    for k, task_id in enumerate(SIDE_BY_SIDE)
    for t, env_type in enumerate(["gym", "gymnasium", "dm"])])
def test_return_shapes_and_spaces_match_envpool(task_id: str, env_type: str) -> None:
    made = [m.make(task_id, env_type=env_type, num_envs=3) for m in (ours, real())]
    envpool_only = frozenset(ENVPOOL_ONLY_KEYS.get(task_id, ()))
    for attr in ("observation_space", "action_space") if env_type != "dm" else ():
        _same_space(getattr(made[0], attr), getattr(made[1], attr), task_id)
        _same_space(getattr(made[0], f"single_{attr}"), getattr(made[1], f"single_{attr}"),
                    task_id)
    if env_type == "dm":
        _same_structure(made[0].observation_spec(), made[1].observation_spec(), envpool_only)
        _same_structure(made[0].action_spec(), made[1].action_spec())
        space = made[1].spec.observation_space
        parts = list(space.keys()) if isinstance(space, gym.spaces.Dict) else ["obs"]
        leading = ["env_id", "players", *(p for p in parts if p not in envpool_only)]
        _same_order_and_bounds(made[0].observation_spec(), made[1].observation_spec(), leading)
        _same_order_and_bounds(made[0].action_spec(), made[1].action_spec(), [])
        _same_order_and_bounds(made[0].reset().observation, made[1].reset().observation,
                               leading)
        mine = made[0].observation_spec()  # EnvPool's spec and observation agree: ours too
        assert mine._fields == made[0].reset().observation._fields
    elif isinstance(made[1].observation_space, gym.spaces.Dict):
        assert list(made[0].observation_space.keys()) == [
            key for key in made[1].observation_space if key not in envpool_only]
    space = made[1].spec.action_space
    action = np.stack([space.sample() for _ in range(3)])
    for call in (lambda e: e.reset(), lambda e: e.step(action), lambda e: e.step(action)):
        _same_structure(*(call(e) for e in made), envpool_only)
    assert made[0].config.keys() == made[1].config.keys() - {"base_path"}
    for env in made:
        env.close()


@pytest.mark.slow  # every id beside EnvPool (15 s): the exhaustive tier
@needs_envpool
def test_list_all_envs_and_make_spec_match_envpool() -> None:
    envpool = real()
    listed = ours.list_all_envs()
    assert set(listed) <= set(envpool.list_all_envs())
    atari = [i for i in listed if aiopool.registry.family_of(i) is ATARI]
    assert len(atari) == 104 and "TicTacToe3d-v5" in atari  # every EnvPool Atari game
    assert {"CartPole-v1", "phys2d/CartPole-v1", "Acrobot-v1", "Ant-v5", "Pusher-v5",
            "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v3", "CliffWalking-v0", "CliffWalking-v1",
            "CliffWalkingSlippery-v1"} <= set(listed)
    checked = [i for i in listed if i not in atari] + ["Pong-v5", "MontezumaRevenge-v5",
                                                        "TicTacToe3d-v5"]
    for task_id in checked:
        mine, theirs = ours.make_spec(task_id), envpool.make_spec(task_id)
        expected = {k: v for k, v in theirs.config._asdict().items() if k != "base_path"}
        assert mine.config._asdict() == expected, task_id
        _same_space(mine.observation_space, theirs.observation_space, task_id)
        _same_space(mine.action_space, theirs.action_space, task_id)
        assert mine.reward_threshold == theirs.reward_threshold, task_id
        _same_structure(mine.action_spec(), theirs.action_spec())
        _same_structure(mine.observation_spec(), theirs.observation_spec(),
                        frozenset(ENVPOOL_ONLY_KEYS.get(task_id, ())))
    options = {"num_envs": 4, "batch_size": 2, "seed": 3, "episodic_life": True,
               "reward_clip": True, "gray_scale": False, "stack_num": 2, "img_height": 100,
               "img_width": 80, "max_episode_steps": 1000, "noop_max": 1}
    mine, theirs = ours.make_spec("Breakout-v5", **options), envpool.make_spec(
        "Breakout-v5", **options)
    assert mine.config._asdict() == {
        k: v for k, v in theirs.config._asdict().items() if k != "base_path"}
    assert mine.observation_space == theirs.observation_space == gym.spaces.Box(
        0, 255, (6, 100, 80), np.uint8)


def test_float32_config_keys_reach_gymnasium_s_env_as_their_decimals() -> None:
    """EnvPool's config holds CarRacing's lap_complete_percent as float32 (0.949999988), as
    the drop-in's does; gymnasium's env gets 0.95, the default it would have."""
    for given, want in (({}, 0.95), ({"lap_complete_percent": 0.5}, 0.5)):
        env = ours.make("CarRacing-v2", env_type="gymnasium", num_envs=1, **given)
        assert env.config["lap_complete_percent"] == float(np.float32(want))
        assert env._pool.spec.config["lap_complete_percent"] == want  # type: ignore[attr-defined]
        env.close()


def test_list_all_envs_names_envpool_ids() -> None:
    listed = ours.list_all_envs()
    assert "Pong-v5" in listed and "HalfCheetah-v5" in listed and "CartPole-v0" in listed
    assert "TicTacToe3d-v5" in listed and "TicTacToe3D-v5" not in listed  # EnvPool's spelling
    assert "HalfCheetah-v4" not in listed and "Counting-v0" not in listed
    assert "Taxi-v3" in listed and "Taxi-v4" not in listed  # gymnasium 1.4's Taxi-v4
    assert ours._task("Taxi-v3").native_id == "Taxi-v4"
    for task_id in listed:
        assert ours._task(task_id).native_id in aiopool.list_envs()


# -- the autoreset table and sync / async semantics ----------------------------------------

@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_docs_autoreset_table(envpool: ModuleType) -> None:
    # EnvPool's docs, "Auto Reset": max_episode_steps=3, five env.step calls, no reset first.
    env = envpool.make_gymnasium("CartPole-v1", num_envs=2, max_episode_steps=3)
    table = []
    for t in range(5):
        _, rew, term, trunc, info = env.step(np.full(2, t % 2))
        assert not term.any()
        table.append((info["elapsed_step"].tolist(), rew.tolist(), trunc.tolist()))
    assert table == [([0, 0], [0, 0], [False, False]),  # 1: env.reset(), action discarded
                     ([1, 1], [1, 1], [False, False]),
                     ([2, 2], [1, 1], [False, False]),
                     ([3, 3], [1, 1], [True, True]),    # 4: hit max_episode_steps
                     ([0, 0], [0, 0], [False, False])]  # 5: env.reset()
    env.close()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_sync_mode_returns_the_rows_sent_in_send_order(envpool: ModuleType) -> None:
    env = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4)
    obs, info = env.reset()
    assert info["env_id"].tolist() == [0, 1, 2, 3]
    obs, _, _, _, info = env.step(np.zeros(2, dtype=np.int32), np.array([2, 0]))
    assert obs.shape == (2, 4)
    assert info["env_id"].tolist() == [2, 0] and info["elapsed_step"].tolist() == [1, 1]
    obs, info = env.reset(np.array([3, 1]))
    assert info["env_id"].tolist() == [3, 1] and info["elapsed_step"].tolist() == [0, 0]
    _, _, _, _, info = env.step({"action": np.ones(4, dtype=np.int32),
                                 "env_id": np.arange(4, dtype=np.int32)})
    assert info["elapsed_step"].tolist() == [2, 1, 2, 1]
    assert info["players"]["env_id"].tolist() == [0, 1, 2, 3]
    env.close()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_dm_timesteps(envpool: ModuleType) -> None:
    env = envpool.make_dm("CartPole-v1", num_envs=2, max_episode_steps=2)
    ts = env.reset()
    assert ts.step_type.tolist() == [0, 0] and ts.discount.tolist() == [1, 1]
    assert ts.observation.env_id.tolist() == [0, 1]
    assert ts.observation.players.env_id.tolist() == [0, 1]
    assert ts.observation.obs.shape == (2, 4)
    steps = [env.step(np.zeros(2, dtype=np.int32)) for _ in range(3)]
    assert [s.step_type.tolist() for s in steps] == [[1, 1], [2, 2], [0, 0]]
    assert [s.discount.tolist() for s in steps] == [[1, 1], [0, 0], [1, 1]]  # EnvPool: 1 - done
    assert [s.reward.tolist() for s in steps] == [[1, 1], [1, 1], [0, 0]]
    env.close()


def test_the_first_seed_is_envpools_42_and_means_seed_plus_i() -> None:
    env = ours.make_gymnasium("CartPole-v1", num_envs=3)
    assert env.config["seed"] == 42
    obs, _ = env.reset()
    with aiopool.make("CartPole-v1", num_envs=3, seed=42) as pool:
        pool.async_reset()
        assert np.array_equal(obs, pool.recv_blocking().obs)
    listed = ours.make_gymnasium("CartPole-v1", num_envs=2, seed=[7, 42])
    assert np.array_equal(listed.reset()[0], np.stack([
        ours.make_gymnasium("CartPole-v1", seed=7).reset()[0][0], obs[0]]))
    assert listed.config["env_seed"] == [7, 42]
    with pytest.warns(UserWarning, match="reset\\(seed=...\\) is ignored"):
        env.reset(seed=1)
    for e in (env, listed):
        e.close()


def test_num_threads_zero_is_envpools_default() -> None:
    env = ours.make_gymnasium("CartPole-v1", num_envs=8, batch_size=4)
    assert env.config["num_threads"] == 0
    assert env.pool.num_threads == min(4, len(os.sched_getaffinity(0)))  # min(batch, cores)
    env.close()
    env = ours.make_gymnasium("CartPole-v1", num_envs=8, num_threads=1)
    assert env.pool.num_threads == 1
    env.close()


def test_rgb_observations_are_channels_first_and_the_stack_starts_full() -> None:
    env = ours.make_gymnasium("Pong-v5", num_envs=1, gray_scale=False, seed=5)
    obs, _ = env.reset()
    assert obs.shape == (1, 12, 84, 84) and env.observation_space.shape == (12, 84, 84)
    with aiopool.make("Pong-v5", seed=5, grayscale=False) as pool:
        pool.async_reset()
        native = pool.recv_blocking().obs  # (1, 4, 84, 84, 3), ale-py's zeros before frame 0
        assert not native[0, :3].any()
        for k in range(4):  # EnvPool's stack starts as four copies of the first frame
            assert np.array_equal(obs[0, 3 * k:3 * k + 3].transpose(1, 2, 0), native[0, 3])
        obs, *_ = env.step(np.zeros(1, dtype=int))
        pool.send(np.zeros(1, dtype=np.int64))
        native = pool.recv_blocking().obs
        assert np.array_equal(obs[0, 9:].transpose(1, 2, 0), native[0, 3])
        assert np.array_equal(obs[0, :3], obs[0, 6:9])  # frames 0, 0, 0, 1
    env.close()


# -- Atari: episodic_life, rewards, info keys ----------------------------------------------

def _life_trace(envpool: ModuleType, env_type: str = "gymnasium") -> list[dict[str, Any]]:
    """One Breakout game under EnvPool's episodic_life, row by row."""
    env = envpool.make("Breakout-v5", env_type=env_type, num_envs=1, episodic_life=True,
                       reward_clip=True, seed=11)
    rng = np.random.default_rng(0)
    out = env.reset()
    rows = []
    for _ in range(3000):
        if env_type == "dm":
            ts = env.step(rng.integers(0, 4, size=1).astype(np.int32))
            o = ts.observation
            rows.append({"obs": o.obs[0], "lives": int(o.lives[0]), "over": int(o.terminated[0]),
                         "step_type": int(ts.step_type[0]), "discount": float(ts.discount[0]),
                         "reward": float(ts.reward[0]), "game_reward": float(o.reward[0])})
        else:
            out = env.step(rng.integers(0, 4, size=1))
            obs, rew, term, trunc, info = out
            rows.append({"obs": obs[0], "lives": int(info["lives"][0]),
                         "over": int(info["terminated"][0]), "terminated": bool(term[0]),
                         "truncated": bool(trunc[0]), "elapsed": int(info["elapsed_step"][0]),
                         "reward": float(rew[0]), "game_reward": float(info["reward"][0])})
        if rows[-1]["over"] and len(rows) > 3:
            break
    for _ in range(2):  # the rows after the game over
        if env_type == "dm":
            ts = env.step(np.zeros(1, dtype=np.int32))
            rows.append({"obs": ts.observation.obs[0], "lives": int(ts.observation.lives[0]),
                         "over": 0, "step_type": int(ts.step_type[0])})
        else:
            obs, rew, term, trunc, info = env.step(np.zeros(1, dtype=int))
            rows.append({"obs": obs[0], "lives": int(info["lives"][0]), "over": 0,
                         "terminated": bool(term[0]), "elapsed": int(info["elapsed_step"][0]),
                         "reward": float(rew[0])})
    env.close()
    return rows


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_episodic_life_terminates_on_each_life_and_resets_on_game_over(
        envpool: ModuleType) -> None:
    rows = _life_trace(envpool)
    over = next(i for i, r in enumerate(rows) if r["over"])
    game, after = rows[:over + 1], rows[over + 1:]
    losses = [i for i, r in enumerate(game) if r["terminated"]]
    assert [game[i]["lives"] for i in losses] == [4, 3, 2, 1, 0]  # every life, down to 0
    assert losses[-1] == over and [game[i]["over"] for i in losses] == [0, 0, 0, 0, 1]
    for i in losses[:-1]:  # the next step restarts play: no reset, no reward, same lives
        restart, before = game[i + 1], game[i]
        assert not restart["terminated"] and restart["reward"] == 0
        assert restart["lives"] == before["lives"]
        assert restart["elapsed"] == before["elapsed"]  # EnvPool's step counter stands still
        assert np.array_equal(restart["obs"][:-1], before["obs"][1:])  # the stack goes on
    elapsed = [r["elapsed"] for r in game]
    assert elapsed == sorted(elapsed) and elapsed[-1] == len(game) - 4
    assert after[0]["elapsed"] == 0 and after[0]["lives"] == 5 and after[1]["elapsed"] == 1
    assert all(np.array_equal(after[0]["obs"][k], after[0]["obs"][3]) for k in range(3))
    for r in game:  # reward_clip=True clips the reward; info["reward"] keeps the game's
        assert r["reward"] == np.sign(r["game_reward"])


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_episodic_life_in_dm_timesteps(envpool: ModuleType) -> None:
    rows = _life_trace(envpool, "dm")
    over = next(i for i, r in enumerate(rows) if r["over"])
    lost = [i for i, r in enumerate(rows[:over + 1]) if r["step_type"] == 2]
    assert [rows[i]["lives"] for i in lost] == [4, 3, 2, 1, 0]
    assert all(rows[i]["discount"] == 0 for i in lost)
    assert all(rows[i + 1]["step_type"] == 0 for i in lost)  # play restarts: FIRST
    assert sum(r["step_type"] == 0 for r in rows) == 5


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_zero_discount_on_life_loss_keeps_the_episode_going(envpool: ModuleType) -> None:
    env = envpool.make_dm("Breakout-v5", num_envs=1, zero_discount_on_life_loss=True, seed=2)
    env.reset()
    rng = np.random.default_rng(1)
    lives, seen = 5, []
    while lives > 1:
        ts = env.step(rng.integers(0, 4, size=1).astype(np.int32))
        now = int(ts.observation.lives[0])
        seen.append((now < lives, int(ts.step_type[0]), float(ts.discount[0])))
        lives = now
    assert {(lost, step_type, discount) for lost, step_type, discount in seen} == {
        (False, 1, 1.0), (True, 1, 0.0)}  # a lost life: discount 0, the episode goes on
    env.close()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_rewards_are_unclipped_by_default(envpool: ModuleType) -> None:
    def rewards(**kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
        env = envpool.make_gymnasium("SpaceInvaders-v5", num_envs=2, seed=0, **kwargs)
        env.reset()
        got, game = [], []
        for _ in range(150):
            _, rew, _, _, info = env.step(np.ones(2, dtype=int))  # FIRE
            got.append(rew)
            game.append(info["reward"])
        env.close()
        return np.concatenate(got), np.concatenate(game)

    rew, game = rewards()
    assert ours.make_spec("SpaceInvaders-v5").config.reward_clip is False
    assert rew.max() > 1 and np.array_equal(rew, game)  # EnvPool's default: game points
    rew, game = rewards(reward_clip=True)
    assert set(np.unique(rew)) <= {0.0, 1.0} and game.max() > 1


# -- MuJoCo keywords -----------------------------------------------------------------------

@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_mujoco_keywords_mean_envpools(envpool: ModuleType) -> None:
    env = envpool.make_gymnasium("HalfCheetah-v5", num_envs=2, ctrl_cost_weight=0.5,
                                 forward_reward_weight=2.0)
    env.reset()
    action = np.full((2, 6), 0.25)
    _, rew, _, _, info = env.step(action)
    np.testing.assert_allclose(info["reward_ctrl"], -0.5 * 6 * 0.25**2, rtol=1e-6)
    np.testing.assert_allclose(info["reward_run"], 2.0 * info["x_velocity"], rtol=1e-6)
    np.testing.assert_allclose(rew, info["reward_run"] + info["reward_ctrl"], rtol=1e-5)
    env.close()
    spec = envpool.make_spec("Ant-v5", healthy_z_max=5.0, contact_force_min=-2.0)
    assert (spec.config.healthy_z_min, spec.config.healthy_z_max) == (0.2, 5.0)
    assert spec.config.contact_force_min == -2.0


def test_mujoco_keywords_reach_gymnasiums_names() -> None:
    cases = [("Ant-v5", {"healthy_z_max": 5.0, "use_contact_force": False},
              {"healthy_z_range": (0.2, 5.0), "include_cfrc_ext_in_observation": False,
               "contact_cost_weight": 0.0}),
             ("Humanoid-v5", {"use_contact_force": False},
              {"include_cfrc_ext_in_observation": True, "contact_cost_weight": 0.0}),
             ("Hopper-v5", {"healthy_z_min": 0.5}, {"healthy_z_range": (0.5, float("inf"))}),
             ("Pusher-v5", {"dist_cost_weight": 2.0, "ctrl_cost_weight": 0.2},
              {"reward_dist_weight": 2.0, "reward_control_weight": 0.2}),
             ("HumanoidStandup-v5", {"forward_reward_weight": 2.0, "contact_cost_max": 3.0},
              {"uph_cost_weight": 2.0, "impact_cost_range": (float("-inf"), 3.0)})]
    for task_id, given, native in cases:
        env = ours.make_gymnasium(task_id, **given)
        assert {k: env.pool.spec.config[k] for k in native} == native, task_id
        assert all(env.config[k] == v for k, v in given.items())
        env.close()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
def test_mujoco_action_bounds_are_the_models_ctrlrange(envpool: ModuleType) -> None:
    """float64, as the model's ctrlrange: 0.4, not gymnasium's float32 0.4000000059604645."""
    space = envpool.make_spec("Humanoid-v5").action_space
    assert space.dtype == np.float64 and (space.high == 0.4).all() and (space.low == -0.4).all()


@pytest.mark.parametrize("envpool", both(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("task_id, shape, term", [("Ant-v5", (27,), "reward_contact"),
                                                  ("Humanoid-v5", (348,), "reward_impact")])
def test_use_contact_force_false_drops_the_contact_cost(envpool: ModuleType, task_id: str,
                                                        shape: tuple[int], term: str) -> None:
    """EnvPool's ``use_contact_force=False``: the reward has no contact cost (its info term is
    0); Ant observes no contact forces, Humanoid observes them either way. (The drop-in mapped
    it onto gymnasium's include_cfrc_ext_in_observation: the cost stayed, Humanoid's obs
    lost its contact forces.)"""
    env = envpool.make_gymnasium(task_id, num_envs=2, seed=0, use_contact_force=False)
    env.reset()
    assert env.observation_space.shape == shape
    rng = np.random.default_rng(0)
    for _ in range(20):
        action = rng.uniform(-0.4, 0.4, (2, *env.action_space.shape))
        obs, _, _, _, info = env.step(action)
        assert obs.shape == (2, *shape)
        assert not info[term].any()
    env.close()


# -- the Control Suite ----------------------------------------------------------------------

@pytest.mark.parametrize("env_type", ["gymnasium", "dm"])
def test_control_suite_ids_step_dm_controls_tasks(env_type: str) -> None:
    # EnvPool's CheetahRun-v1 is aiopool's dmc/cheetah-run (dm_control's task, bit for bit in
    # tests/test_parity_dmc.py): the same observations from the same seeds, EnvPool's float32
    # rewards, its step limit (max_episode_steps) ending the episode truncated with discount 1,
    # and frame_skip as dm_control's n_sub_steps.
    env = ours.make("CheetahRun-v1", env_type=env_type, num_envs=2, seed=3, max_episode_steps=4)
    native = aiopool.make_gymnasium("dmc/cheetah-run", 2, seed=3, autoreset_mode="next_step",
                                    time_limit=float("inf"), max_episode_steps=4)
    assert env.config["frame_skip"] == 1 and env.config["task_name"] == "run"
    got = env.reset()
    want, _ = native.reset()
    action = np.linspace(-1, 1, 12).reshape(2, 6)
    for t in range(6):
        obs = got.observation._asdict() if env_type == "dm" else got[0]
        for key in ("position", "velocity"):
            np.testing.assert_array_equal(obs[key], want[key])
        got = env.step(action)
        want, reward, terminated, truncated, _ = native.step(action)
        if env_type == "dm":
            np.testing.assert_array_equal(got.reward, reward.astype(np.float32))
            assert got.step_type.tolist() == [2, 2] if t == 3 else got.step_type.tolist() != [2, 2]
            assert got.discount.tolist() == [1.0, 1.0]
        else:
            assert got[1].dtype == np.float32 and got[3].tolist() == truncated.tolist()
            assert truncated.tolist() == [t == 3] * 2 and not terminated.any()
    env.close()
    native.close()
    assert ours.make_spec("BallInCupCatch-v1").config.frame_skip == 10  # dm_control's
    assert ours.make_spec("CheetahRun-v1", frame_skip=2).config.frame_skip == 2
    with pytest.raises(ValueError, match="sets its control timestep"):
        ours.make_spec("BallInCupCatch-v1", frame_skip=20)


# -- what is refused, and how ----------------------------------------------------------------

@pytest.mark.parametrize(("task_id", "kwargs", "error", "match"), [
    ("HalfCheetah-v4", {}, ValueError, "only gymnasium's v5 MuJoCo envs: use 'HalfCheetah-v5'"),
    ("Pong-v4", {}, ValueError, "did you mean 'Pong-v5'"),
    ("MiniGrid-Empty-5x5-v0", {}, ValueError,
     "It has CartPole-v0, CartPole-v1, .*LunarLander-v3.*Ant-v5.*Atari games"),
    ("Pong-v5", {"reward_clipping": True}, TypeError, "did you mean 'reward_clip'"),
    ("Pong-v5", {"episodic_lives": True}, TypeError, "did you mean 'episodic_life'"),
    ("Pong-v5", {"numenvs": 4}, TypeError, "did you mean 'num_envs'"),
    ("CartPole-v1", {"sutton_barto_reward": True}, TypeError, "EnvPool's keywords for it"),
    ("Pong-v5", {"grayscale": False}, TypeError, "did you mean 'gray_scale'"),
    ("Pong-v5", {"stack_num": 2.5}, TypeError, "'stack_num' is 2.5, expected int"),
    ("Pong-v5", {"mode": 1}, ValueError, "mode=1 cannot be honoured"),
    ("Pong-v5", {"use_inter_area_resize": False}, ValueError, "INTER_AREA"),
    ("Pong-v5", {"thread_affinity_offset": 0}, ValueError, "does not pin worker threads"),
    ("Pong-v5", {"max_num_players": 2}, ValueError, "single-player"),
    ("Pong-v5", {"render_mode": "human"}, ValueError, "not windows"),
    ("Pong-v5", {"from_pixels": True}, ValueError, "pixel observations"),
    ("Pong-v5", {"render_mode": "rgb_array", "render_width": 84}, ValueError,
     "only MuJoCo and Control Suite"),
    ("Pong-v5", {"num_envs": 2, "render_env_id": 2}, ValueError, "render_env_id is 2"),
    ("Pong-v5", {"gym_reset_return_info": False}, ValueError, "always returns"),
    ("Pong-v5", {"seed": -1}, ValueError, "0 <= seed < 2\\*\\*31"),
    ("Pong-v5", {"num_envs": 2, "seed": [1, 2, 3]}, ValueError, "one per env"),
    ("Pong-v5", {"num_envs": 2, "batch_size": 3}, ValueError, "up to num_envs"),
    ("HalfCheetah-v5", {"frame_stack": 2}, ValueError, "frame_stack=2 cannot be honoured"),
    ("Pendulum-v1", {"version": 0}, ValueError, "gymnasium's Pendulum-v1"),
    ("CheetahRun-v1", {"frame_stack": 2}, ValueError, "frame_stack=2 cannot be honoured"),
    ("CheetahRun-v1", {"task_name": "walk"}, ValueError, "name another id"),
    ("CheetahRun-v1", {"frame_skip": 0}, ValueError, "frame_skip is 0"),
    ("CheetahWalk-v1", {}, ValueError, "did you mean 'CheetahRun-v1'.*Control Suite tasks"),
])
def test_refusals_say_what_and_why(task_id: str, kwargs: dict[str, Any],
                                   error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        ours.make(task_id, env_type="gymnasium", **kwargs)


@pytest.mark.parametrize("env_id", [np.array([True, False]), np.array([0.5, 1.7]),
                                    np.array([2**32 + 3]), np.array([-1])],
                         ids=["bool-mask", "floats", "beyond-int32", "negative"])
def test_env_ids_other_than_ints_in_range_are_refused(env_id: np.ndarray) -> None:
    """A done-mask or float ids passed as env_id were cast to int32 and stepped other envs
    (EnvPool garbles them too); an int is one id, as in EnvPool."""
    env = ours.make("CartPole-v1", env_type="gymnasium", num_envs=4)
    env.async_reset()
    env.recv()
    with pytest.raises(ValueError, match="env_ids (has shape|contains)"):
        env.send(np.zeros(len(env_id), np.int64), env_id)
    with pytest.raises(ValueError, match="env_ids (has shape|contains)"):
        env.reset(env_id)
    env.send(np.zeros(1, np.int64), 2)  # the pool goes on
    assert env.recv()[4]["env_id"].tolist() == [2]
    env.close()


def test_the_native_option_behind_episodic_life_needs_life_loss_info() -> None:
    with pytest.raises(ValueError, match="soft_reset_on_life_loss needs life_loss_info=True"):
        aiopool.make("Breakout-v5", soft_reset_on_life_loss=True)


def test_register_render_and_missing_info_keys_are_refused_clearly() -> None:
    env = ours.make("Pong-v5", env_type="gymnasium", num_envs=1)  # xla(): tests/test_xla.py
    with pytest.raises(RuntimeError, match="render_mode must be set"):
        env.render()
    with pytest.raises(NotImplementedError, match="register"):
        ours.register("MyEnv-v0", "mod", "Spec", "DM", "Gymnasium")
    with pytest.raises(ValueError, match="env_type is 'jax'"):
        ours.make("Pong-v5", env_type="jax")
    _, info = env.reset()
    with pytest.raises(KeyError, match="Atari's RAM.*not provide"):
        info["ram"]
    with pytest.raises(ValueError, match="one action per env"):
        env.step(np.zeros(3, dtype=int))
    with pytest.raises(ValueError):  # EnvPool steps with an out-of-range action
        env.step(np.full(1, 6))
    env.step(np.zeros(1, dtype=int))  # still usable
    env.close()


def test_recv_with_nothing_in_flight_raises_instead_of_hanging() -> None:
    env = ours.make("CartPole-v1", env_type="gymnasium", num_envs=4, batch_size=2)
    env.async_reset()
    env.recv()
    env.recv()
    with pytest.raises(aiopool.NothingInFlight):
        env.recv()
    env.close()


def test_gymnasium_wrappers_take_it_as_envpools_does() -> None:
    env = ours.make("Breakout-v5", env_type="gymnasium", num_envs=2)
    assert isinstance(env, gym.Env) and isinstance(env, gym.vector.VectorEnv)
    wrapped = gym.Wrapper(env)  # as CleanRL's RecordEpisodeStatistics
    assert wrapped.observation_space == env.single_observation_space
    obs, _ = wrapped.reset()
    assert obs.shape == (2, 4, 84, 84)
    assert env.spec.config.num_envs == 2 and env.spec.id == "Breakout-v5"
    assert "Breakout-v5" in repr(env) and len(env) == 2
    wrapped.close()
    assert env.pool.closed


# -- CleanRL's ppo_atari_envpool.py, unchanged but for the import ---------------------------

@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("backend", ["aiopool", "envpool"])
def test_cleanrl_ppo_atari_envpool_logs_game_over_episodes(
        backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")
    if backend == "envpool" and not HAVE_ENVPOOL:
        pytest.skip("needs EnvPool: pip install -e '.[test]'")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import ppo_atari_envpool as ppo

    out = ppo.main(ppo.Args(backend=backend, env_id="Breakout-v5", num_envs=4, num_steps=128,
                            total_timesteps=3 * 512, update_epochs=1, torch_threads=1))
    printed = capsys.readouterr().out
    assert out["updates"] == 3 and out["global_step"] == 1536
    episodes = out["episodes"]
    assert len(episodes) >= 4, printed  # logged only where lives reached 0 (game over)
    assert printed.count("episodic_return=") == len(episodes)
    # Breakout has 5 lives: each logged game ended 4 training episodes before its game over.
    assert out["life_losses"] >= 4 * len(episodes)
    for ep in episodes:
        assert ep["return"] >= 0 and ep["return"] == int(ep["return"])  # game points
        assert ep["length"] > 50  # a whole game, not one life


def test_render_gives_envpools_batch_first_frames() -> None:
    env = ours.make("Pong-v5", env_type="gymnasium", num_envs=3, render_mode="rgb_array",
                    render_env_id=1)
    assert env.render_mode == "rgb_array" and env.metadata["render_modes"] == ["rgb_array"]
    env.reset()
    frames = env.render()
    assert frames.shape == (1, 210, 160, 3) and frames.flags.writeable
    assert np.array_equal(env.render(env_ids=[0, 1, 2])[1], frames[0])
    assert env.render(env_ids=2).shape == (1, 210, 160, 3)
    env.close()
    cheetah = ours.make("HalfCheetah-v5", env_type="gymnasium", num_envs=2,
                        render_mode="rgb_array", render_width=64, render_height=48)
    cheetah.reset()
    assert cheetah.render(env_ids=[0, 1]).shape == (2, 48, 64, 3)
    with pytest.raises(NotImplementedError, match="render_camera_id"):
        cheetah.render(camera_id=1)
    cheetah.close()
    # The Control Suite's frames are dm_control's physics.render's, with its camera ids.
    dmc = ours.make("CheetahRun-v1", env_type="dm", num_envs=2, render_mode="rgb_array",
                    render_width=64, render_height=48, render_camera_id=1)
    dmc.reset()
    frame = dmc.render(env_ids=[1])
    assert frame.shape == (1, 48, 64, 3)
    assert np.array_equal(frame[0], dmc._pool.render([1])[0])
    dmc.close()
