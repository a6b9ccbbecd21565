"""The SB3 adapter behaves like SB3's DummyVecEnv over Monitor-wrapped gymnasium envs with the
same seeds: observations, float32 rewards, dones, ``terminal_observation``,
``TimeLimit.truncated`` and Monitor's ``episode`` totals, step for step."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="needs stable-baselines3: pip install -e '.[test]'")
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv, VecNormalize

from aiopool.adapters.sb3 import Sb3VecEnv, make_sb3

NUM_ENVS = 4


def _dummy(env_id: str, **kw: Any) -> DummyVecEnv:
    return DummyVecEnv([lambda: Monitor(gym.make(env_id, **kw)) for _ in range(NUM_ENVS)])


@contextmanager
def _seeded_pair(env_id: str, num_threads: int, seed: int,
                 **kw: Any) -> Iterator[tuple[DummyVecEnv, VecEnv]]:
    """DummyVecEnv and the adapter, both seeded ``seed`` and reset to the same observations."""
    ref = _dummy(env_id, **kw)
    ours = make_sb3(env_id, NUM_ENVS, num_threads=num_threads, **kw)
    try:
        ref.seed(seed)
        ours.seed(seed)
        assert ref.reset().tobytes() == ours.reset().tobytes()
        yield ref, ours
    finally:
        ref.close()
        ours.close()


# The process backend's env_error, MuJoCo's mujoco_error and mujoco_warning (env_error()).
_SIGNALS = frozenset({"env_error", "mujoco_error", "mujoco_warning"})


def _same_info(a: dict[str, Any], b: dict[str, Any], where: str) -> None:
    """The env's own info keys (Monitor's ``episode`` and the terminal observation aside) as
    DummyVecEnv's: a key with a shape as a numpy array of its own, of the same dtype and values;
    a scalar as a Python scalar of the same value. Beside them, only the pool's signals of an
    env's error (``_SIGNALS``)."""
    own = {"episode", "terminal_observation"}
    assert a.keys() - own <= b.keys() - own <= a.keys() | _SIGNALS, where
    for key in a.keys() - own:
        if isinstance(a[key], np.ndarray) and a[key].ndim:
            assert isinstance(b[key], np.ndarray) and b[key].dtype == a[key].dtype, (where, key)
            assert np.array_equal(a[key], b[key]), (where, key)
        else:
            assert type(b[key]) in (bool, int, float) and b[key] == a[key], (where, key)


def _compare_step(ref: VecEnv, ours: VecEnv, actions: Any, t: int) -> tuple[int, int]:
    """Step both and compare; returns (episodes ended, of which by the time limit)."""
    obs_ref, r_ref, done_ref, infos_ref = ref.step(actions)
    obs, r, done, infos = ours.step(actions)
    assert obs.tobytes() == obs_ref.tobytes() and obs.dtype == obs_ref.dtype, f"step {t}: obs"
    assert r.dtype == np.float32 and r.tobytes() == r_ref.tobytes(), f"step {t}: reward"
    assert done.tolist() == done_ref.tolist(), f"step {t}: dones"
    for i, (a, b) in enumerate(zip(infos_ref, infos, strict=True)):
        _same_info(a, b, f"step {t} env {i}")
        assert ("terminal_observation" in a) == ("terminal_observation" in b)
        if "terminal_observation" in a:
            terminal = a["terminal_observation"], b["terminal_observation"]
            assert np.asarray(terminal[0]).tobytes() == np.asarray(terminal[1]).tobytes()
            assert (a["episode"]["r"], a["episode"]["l"]) == (b["episode"]["r"],
                                                              b["episode"]["l"]), f"step {t}"
    return int(done.sum()), sum(info["TimeLimit.truncated"] for info in infos)


_CASES = [("CartPole-v1", {"max_episode_steps": 15}), ("Pendulum-v1", {"max_episode_steps": 50}),
          ("LunarLander-v3", {"max_episode_steps": 60}),
          ("BipedalWalker-v3", {"max_episode_steps": 40}),
          ("CarRacing-v3", {"max_episode_steps": 30}), ("Taxi-v4", {"max_episode_steps": 40})]


# The process backend carries the scalar info keys it is given (info_keys=), not Taxi's
# action_mask array: Taxi runs on threads only here.
# gymnasium's CarRacing draws with pygame (10-16 s a case): with the slow suites.
@pytest.mark.parametrize(("env_id", "kw", "backend"),
                         [pytest.param(e, kw, b, marks=[pytest.mark.slow] if e == "CarRacing-v3"
                                       else []) for e, kw in _CASES
                          for b in ("threads", "processes") if (e, b) != ("Taxi-v4", "processes")])
def test_matches_dummy_vec_env_step_by_step(env_id: str, kw: dict[str, Any],
                                            backend: str) -> None:
    ref = _dummy(env_id, **kw)
    ours = make_sb3(env_id, NUM_ENVS, num_threads=2, backend=backend, **kw)
    try:
        assert ours.observation_space == ref.observation_space
        assert ours.action_space == ref.action_space and ours.num_envs == ref.num_envs
        assert ref.seed(8) == ours.seed(8) == [8, 9, 10, 11]
        assert ref.reset().tobytes() == ours.reset().tobytes()
        for i, (a, b) in enumerate(zip(ref.reset_infos, ours.reset_infos, strict=True)):
            _same_info(a, b, f"reset env {i}")
        space = ref.action_space
        space.seed(2)
        episodes = truncations = 0
        for t in range(300):
            actions = np.stack([space.sample() for _ in range(NUM_ENVS)])
            ended, limited = _compare_step(ref, ours, actions, t)
            episodes += ended
            truncations += limited
            if t == 150:  # an unseeded reset continues every env's random stream
                assert ref.reset().tobytes() == ours.reset().tobytes()
        assert episodes >= 2 * NUM_ENVS and truncations >= NUM_ENVS, (episodes, truncations)
    finally:
        ref.close()
        ours.close()


@pytest.mark.parametrize("kw", [{"lap_complete_percent": 0.0}, {"max_episode_steps": 3}],
                         ids=["laps", "time-limit"])
def test_keys_set_on_some_steps_only_are_in_those_infos_only(kw: dict[str, Any]) -> None:
    """CarRacing's ``lap_finished`` (set by gymnasium's step only where an episode ends, not
    where the time limit ends it) is in an env's info on the steps DummyVecEnv's has it: with
    ``lap_complete_percent=0`` every episode ends with a lap at its first step (the terminal
    step's value beside terminal_observation); with ``max_episode_steps=3``, never."""
    with _seeded_pair("CarRacing-v3", 2, 3, **kw) as (ref, ours):
        actions = np.zeros((NUM_ENVS, 3), dtype=np.float32)
        dones = 0
        for t in range(6):
            _, _, done_ref, infos_ref = ref.step(actions)
            _, _, done, infos = ours.step(actions)
            assert done.tolist() == done_ref.tolist(), f"step {t}"
            dones += int(done.sum())
            for i, (a, b) in enumerate(zip(infos_ref, infos, strict=True)):
                assert ("lap_finished" in a) == ("lap_finished" in b), f"step {t} env {i}"
                assert a.get("lap_finished") is b.get("lap_finished")
                assert ("lap_finished" in b) == ("max_episode_steps" not in kw)
                assert "_lap_finished" not in b
        assert dones == (6 if "lap_complete_percent" in kw else 2) * NUM_ENVS


def test_vec_normalize_on_top_matches() -> None:
    ref = VecNormalize(_dummy("CartPole-v1"), gamma=0.9)
    ours = VecNormalize(make_sb3("CartPole-v1", NUM_ENVS, num_threads=2), gamma=0.9)
    ref.seed(0)
    ours.seed(0)
    assert np.array_equal(ref.reset(), ours.reset())
    rng = np.random.default_rng(0)
    for t in range(200):
        actions = rng.integers(0, 2, size=NUM_ENVS)
        obs_ref, r_ref, done_ref, _ = ref.step(actions)
        obs, r, done, _ = ours.step(actions)
        assert np.array_equal(obs_ref, obs) and np.array_equal(r_ref, r), f"step {t}"
        assert np.array_equal(done_ref, done)
    ref.close()
    ours.close()


def test_attributes_methods_and_errors() -> None:
    env = make_sb3("CartPole-v1", 2, num_threads=1)
    assert isinstance(env, Sb3VecEnv) and isinstance(env, VecEnv)
    assert env.get_attr("render_mode") == [None, None]
    assert env.get_attr("action_space", indices=[1]) == [gym.spaces.Discrete(2)]
    assert env.has_attr("observation_space") and not env.has_attr("gravity")
    with pytest.raises(AttributeError, match="no attribute 'gravity'"):
        env.get_attr("gravity")
    with pytest.raises(NotImplementedError, match="cannot be set"):
        env.set_attr("gravity", 1.0)
    with pytest.raises(NotImplementedError, match="no Python methods"):
        env.env_method("close")
    assert env.env_is_wrapped(Monitor) == [True, True]
    assert env.env_is_wrapped(gym.wrappers.TimeLimit) == [False, False]
    with pytest.warns(UserWarning, match="no `render_mode` was passed"):
        assert env.render() is None  # made without render_mode: SB3's warning, no frame
    assert env.get_images() == [None, None]
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        env.step(np.zeros(2, dtype=np.int64))
    first = env.reset()
    with pytest.raises(RuntimeError, match=r"call step_async\(\) before step_wait\(\)"):
        env.step_wait()
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(2,\)"):
        env.step_async(np.zeros(3, dtype=np.int64))
    env.step_async(np.zeros(2, dtype=np.int64))
    with pytest.raises(RuntimeError, match="SB3.s step_async.. was not followed by step_wait"):
        env.step_async(np.zeros(2, dtype=np.int64))
    obs, *_ = env.step_wait()
    assert obs.shape == (2, 4) and obs.flags.writeable
    env.set_options({"low": -0.1})
    with pytest.raises(ValueError, match="reset options"):
        env.reset()
    env.set_options(None)
    env.seed(0)
    assert env.reset().tobytes() == first.tobytes()  # make_sb3's default seed is 0
    env.close()


def test_an_interrupted_step_wait_loses_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    env, twin = make_sb3("CartPole-v1", 2, num_threads=1), make_sb3("CartPole-v1", 2)
    assert env.reset().tobytes() == twin.reset().tobytes()
    pool = env._steps.pool
    real = pool.recv_blocking

    def interrupted(timeout: float | None = None) -> Any:
        monkeypatch.setattr(pool, "recv_blocking", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, "recv_blocking", interrupted)
    actions = np.array([0, 1])
    env.step_async(actions)
    with pytest.raises(KeyboardInterrupt):
        env.step_wait()
    with pytest.raises(RuntimeError, match="previous step have not all been received"):
        env.step_async(actions)
    assert env.step_wait()[0].tobytes() == twin.step(actions)[0].tobytes()
    assert env.step(actions)[0].tobytes() == twin.step(actions)[0].tobytes()
    env.close()
    twin.close()


def test_atari_episodes_report_game_scores_and_the_family_info() -> None:
    """SB3's own Atari stack puts Monitor below ClipRewardEnv, so ep_rew_mean is the game
    score: the adapter reports the unclipped return while the step rewards stay clipped."""
    env = make_sb3("SpaceInvaders-v5", 2, seed=0, num_threads=1)
    env.reset()
    rng = np.random.default_rng(0)
    unclipped = np.zeros(2)
    clipped = np.zeros(2)
    episodes = []
    for _ in range(4000):
        _, reward, done, infos = env.step(rng.integers(0, 6, 2))
        for i, info in enumerate(infos):
            assert {"lives", "reward_unclipped", "frame_number"} <= set(info), sorted(info)
            unclipped[i] += info["reward_unclipped"]
            clipped[i] += reward[i]
            assert abs(reward[i]) <= 1
            if done[i]:
                episodes.append((info["episode"]["r"], unclipped[i], clipped[i], info["lives"]))
                unclipped[i] = clipped[i] = 0
        if len(episodes) >= 2:
            break
    env.close()
    assert len(episodes) >= 2, "no episode ended"
    for score, total, clipped_total, lives in episodes:
        assert score == total and score > clipped_total, episodes
        assert lives == 0  # a game over, not a lost life


def test_a_lost_life_with_life_loss_info_is_done_but_no_episode() -> None:
    """``life_loss_info=True``: a lost life is done (SB3's EpisodicLifeEnv says so too) but the
    game goes on: its terminal observation is the row's own, its info the real one (lives left,
    frame numbers), and no ``episode`` is logged until the game is over (SB3's Monitor sits
    below EpisodicLifeEnv). They were zeros, and every life an episode of return 0."""
    env = make_sb3("Breakout-v5", 1, seed=0, num_threads=1, life_loss_info=True)
    obs = env.reset()
    rng = np.random.default_rng(0)
    lost, games = [], []
    for _ in range(3000):
        action = rng.integers(0, 4, 1)
        action[rng.random(1) < 0.3] = 1  # FIRE now and then: the ball comes back
        obs, _, done, infos = env.step(action)
        if done[0]:
            info = infos[0]
            if info["lives"] > 0:
                assert "episode" not in info
                assert np.array_equal(info["terminal_observation"], obs[0])
                assert info["episode_frame_number"] > 0
                lost.append(info["lives"])
            else:
                assert info["episode"]["l"] > 0 and info["terminal_observation"].any()
                games.append(info["episode"])
                break
    env.close()
    assert lost == [4, 3, 2, 1] and len(games) == 1, (lost, games)


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Humanoid-v5"])
def test_mujoco_family_infos_match_dummy_vec_env(env_id: str) -> None:
    """The family's info keys per env, as DummyVecEnv's (the terminal step's where an episode
    ended), beside the pool's own: Python scalars as SB3 code expects, Humanoid's tendon
    lengths and velocities as arrays of their own, at resets too."""
    with _seeded_pair(env_id, 1, 3, max_episode_steps=20) as (ref, ours):
        for i, (a, b) in enumerate(zip(ref.reset_infos, ours.reset_infos, strict=True)):
            _same_info(a, {k: b[k] for k in a}, f"reset env {i}")  # gymnasium's reset keys
        space = ref.action_space
        space.seed(4)
        ended = 0
        for t in range(50):
            actions = np.stack([space.sample() for _ in range(NUM_ENVS)]) * 0.3
            obs_ref, *_, infos_ref = ref.step(actions)
            obs, _, done, infos = ours.step(actions)
            assert obs.tobytes() == obs_ref.tobytes(), f"step {t}"
            ended += int(done.sum())
            for i, (a, b) in enumerate(zip(infos_ref, infos, strict=True)):
                _same_info(a, b, f"step {t} env {i}")
                assert type(b["mujoco_warning"]) is bool
                assert ("episode" in b) == bool(done[i]) == ("terminal_observation" in b)
        assert ended >= 2 * NUM_ENVS


def test_atari_action_meanings_are_ale_py_s() -> None:
    """``env_method("get_action_meanings")`` / ``call(...)``: ale-py's names of the action set
    (SB3's and CleanRL's Atari code asks for them; the C++ envs have no Python method)."""
    from ale_py import AtariEnv

    from aiopool.adapters.gymnasium import make_gymnasium

    for kwargs in ({}, {"full_action_space": True}):
        ref = AtariEnv("breakout", **kwargs)
        want = ref.get_action_meanings()
        ref.close()
        venv = make_sb3("Breakout-v5", 2, **kwargs)
        assert venv.env_method("get_action_meanings") == [want, want]
        assert venv.env_method("get_action_meanings", indices=[1]) == [want]
        venv.close()
        envs = make_gymnasium("Breakout-v5", 2, **kwargs)
        assert envs.call("get_action_meanings") == (want, want)
        envs.close()
    assert len(want) == 18
    with pytest.raises(NotImplementedError, match="no Python methods"):
        make_sb3("CartPole-v1", 1).env_method("get_action_meanings")
