"""The gymnasium adapter behaves like ``gymnasium.make_vec(..., vectorization_mode="sync")``.

Parity cases step the adapter and a SyncVectorEnv side by side with the same seeds and
actions, in each autoreset mode, and compare obs, rewards, terminations, truncations and the
same-step final observations at every step, through full resets with new seeds and partial
resets (``reset_mask``) mid-run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest
from gymnasium.vector import AutoresetMode
from helpers import DictObsEnv

import aiopool
from aiopool.adapters.gymnasium import GymnasiumVectorEnv, make_gymnasium

NUM_ENVS = 4
STEPS = 400
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def _pumped(env_id: str) -> Any:
    """Actions that end MountainCar/Acrobot episodes by termination too, not only the limit."""
    velocity = {"Acrobot-v1": 5, "MountainCarContinuous-v0": 1}.get(env_id)

    def act(obs: npt.NDArray[Any], sampled: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if velocity is None:
            return sampled
        sign = np.where(obs[:, velocity] >= 0, 1, -1)
        if sampled.dtype.kind == "i":
            return np.where(sampled == 1, 1, sign + 1).astype(sampled.dtype)
        return (np.abs(sampled) * sign[:, None]).astype(sampled.dtype)

    return act


def _pair(env_id: str | Callable[[], gym.Env[Any, Any]], mode: AutoresetMode,
          copy: bool = True) -> tuple[gym.vector.VectorEnv[Any, Any, Any], GymnasiumVectorEnv]:
    """A SyncVectorEnv and the adapter, of a registered id or of an env factory (the adapter
    runs a factory, or an id aiopool has no native env for, on the process backend)."""
    kw = SHORT_EPISODES.get(env_id, {}) if isinstance(env_id, str) else {}
    if isinstance(env_id, str):
        ref = gym.make_vec(env_id, NUM_ENVS, vectorization_mode="sync",
                           vector_kwargs={"autoreset_mode": mode, "copy": copy}, **kw)
    else:
        ref = gym.vector.SyncVectorEnv([env_id] * NUM_ENVS, autoreset_mode=mode, copy=copy)
    return ref, make_gymnasium(env_id, NUM_ENVS, autoreset_mode=mode, num_threads=2, copy=copy,
                               **kw)


# Envs whose episodes random actions do not end within STEPS: cut short, on both sides.
SHORT_EPISODES: dict[str, dict[str, Any]] = {"CarRacing-v3": {"max_episode_steps": 90}}


@pytest.fixture
def cartpole() -> Iterator[GymnasiumVectorEnv]:
    envs = make_gymnasium("CartPole-v1", NUM_ENVS, num_threads=2)
    yield envs
    envs.close()


def _same(a: Any, b: Any, where: str) -> None:
    """Equal in dtypes, shapes and bytes (per key for the dicts and tuples of Dict and Tuple
    observations)."""
    if isinstance(a, dict | tuple):
        _same_rows(a, b, where)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{where}: {a.dtype}{a.shape} vs {b.shape}"
    assert a.tobytes() == b.tobytes(), f"{where}:\n gymnasium {a.tolist()}\n aiopool   {b.tolist()}"


def _python_blackjack() -> gym.Env[Any, Any]:
    """gymnasium's Blackjack-v1, as a factory: the process backend runs it."""
    return gym.make("Blackjack-v1")


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize(("env_id", "path"), [
    ("CartPole-v1", "any"), ("Acrobot-v1", "any"), ("MountainCarContinuous-v0", "any"),
    ("CartPole-v1", "sorted"), ("Acrobot-v1", "python"), ("CartPole-v1", "python sorted"),
    ("Acrobot-v1", "copy=False"), ("CartPole-v1", "sorted copy=False"),
    ("MountainCarContinuous-v0", "python copy=False"),
    ("Blackjack-v1", "any"), ("Blackjack-v1", "sorted copy=False"),
    pytest.param(_python_blackjack, "any", id="Blackjack-v1-processes-any"),
    pytest.param(DictObsEnv, "any", id="DictObsEnv-any"),
    pytest.param(DictObsEnv, "sorted", id="DictObsEnv-sorted"),
    ("FrozenLake-v1", "any"), ("FrozenLake-v1", "sorted"),
    ("FrozenLake8x8-v1", "python copy=False"),
    ("LunarLander-v3", "any"), ("LunarLanderContinuous-v3", "sorted copy=False"),
    ("BipedalWalker-v3", "python"),
    pytest.param("CarRacing-v3", "sorted copy=False", marks=pytest.mark.slow)])  # 6 ms a step
def test_matches_sync_vector_env_step_by_step(env_id: str | Callable[[], gym.Env[Any, Any]],
                                              mode: AutoresetMode, path: str) -> None:
    """Each path of the lockstep. ``"any"``: the native copy (mostly in env id order).
    ``"sorted"``: every call of all envs is taken as out of env id order (the obs kept for
    partial resets are a sorted copy; with copy=False the native copy sorts the obs too).
    ``"python"``: the copies a process-backed pool's batches take (``"python sorted"``: the
    general sort and gather). ``"copy=False"``: the observations are the pool's views.
    Blackjack-v1 (Tuple observations: native, whose batches take the Python copies part by
    part; and gymnasium's on the process backend) and ``DictObsEnv`` (Dict observations, on
    the process backend, whose batches always take the Python copies)."""
    ref, ours = _pair(env_id, mode, copy="copy=False" not in path)
    if "sorted" in path:
        ours._steps._ids_bytes = b"never in order"  # type: ignore[attr-defined]
    if "python" in path:
        ours._steps._native_copies = False  # type: ignore[attr-defined]
    with closing(ref), closing(ours):
        assert ours.metadata["autoreset_mode"] is mode
        assert ours.observation_space == ref.observation_space
        assert ours.action_space == ref.action_space
        assert ours.single_observation_space == ref.single_observation_space
        assert ours.single_action_space == ref.single_action_space
        space = ref.action_space
        space.seed(5)
        act = _pumped(env_id)
        obs_ref, _ = ref.reset(seed=11)
        obs, _ = ours.reset(seed=11)
        _same(obs_ref, obs, "reset")
        episodes = partial = 0
        for t in range(STEPS):
            actions = act(obs_ref, space.sample())
            obs_ref, r_ref, term_ref, trunc_ref, info_ref = ref.step(actions)
            obs, r, term, trunc, info = ours.step(actions)
            for name, a, b in (("obs", obs_ref, obs), ("reward", r_ref, r),
                               ("terminated", term_ref, term), ("truncated", trunc_ref, trunc)):
                _same(a, b, f"step {t} {name}")
            ended = term_ref | trunc_ref
            episodes += int(ended.sum())
            if mode is AutoresetMode.SAME_STEP:
                assert ("final_obs" in info) == ("final_obs" in info_ref), f"step {t}"
                if "final_obs" in info:
                    _same(info_ref["_final_obs"], info["_final_obs"], f"step {t} _final_obs")
                    for i in np.flatnonzero(ended):
                        ref_obs, our_obs = info_ref["final_obs"][i], info["final_obs"][i]
                        _same(ref_obs, our_obs, f"step {t} final_obs[{i}]")
                        # as the env gave it: a Python int for toy text's states
                        assert [type(x) for x in np.atleast_1d(np.array(ref_obs, object))] == [
                            type(x) for x in np.atleast_1d(np.array(our_obs, object))], t
            mask = None
            if mode is AutoresetMode.DISABLED and ended.any():
                mask = ended
            elif t % 97 == 50:  # a partial reset in every mode, seeded every other time
                mask = np.arange(NUM_ENVS) % 2 == (t // 97) % 2
            if mask is not None:
                seed = 100 + t if t % 2 else None
                obs_ref, _ = ref.reset(seed=seed, options={"reset_mask": mask.copy()})
                obs, info = ours.reset(seed=seed, options={"reset_mask": mask.copy()})
                _same(obs_ref, obs, f"step {t} reset_mask {mask}")
                _same(mask, info["_elapsed_step"], f"step {t} reset info mask")
                partial += 1
            if t == STEPS // 2:
                obs_ref, _ = ref.reset(seed=3)
                obs, _ = ours.reset(seed=3)
                _same(obs_ref, obs, "full reset")
        assert episodes >= NUM_ENVS and partial >= 3, (episodes, partial)


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_reset_mask_right_after_episode_ends(mode: AutoresetMode) -> None:
    """Resetting the envs that just ended cancels their pending next-step autoreset."""
    ref, ours = _pair("CartPole-v1", mode)
    with closing(ref), closing(ours):
        _same(ref.reset(seed=1)[0], ours.reset(seed=1)[0], "reset")
        actions = np.array([1, 1, 0, 0])  # fall over within ~10 steps
        resets = 0
        for t in range(60):
            stepped = [ref.step(actions), ours.step(actions)]
            for name, a, b in zip(("obs", "reward", "terminated", "truncated"), *stepped,
                                  strict=False):
                _same(a, b, f"step {t} {name}")
            ended = stepped[0][2] | stepped[0][3]
            if ended.any():
                _same(ref.reset(options={"reset_mask": ended.copy()})[0],
                      ours.reset(options={"reset_mask": ended.copy()})[0], f"step {t} reset")
                resets += 1
        assert resets >= 4


def test_infos_are_dicts_of_arrays_with_masks_and_episode_totals() -> None:
    with closing(make_gymnasium("CartPole-v1", NUM_ENVS, autoreset_mode="same_step")) as envs:
        _, info = envs.reset(seed=0)
        assert info["elapsed_step"].tolist() == [0] * NUM_ENVS
        assert info["_elapsed_step"].all()
        returns = np.zeros(NUM_ENVS)
        for _ in range(100):
            _, reward, term, trunc, info = envs.step(np.zeros(NUM_ENVS, dtype=np.int64))
            returns += reward
            ended = term | trunc
            if ended.any():
                assert info["_final_obs"].tolist() == ended.tolist()
                assert info["_final_info"].tolist() == ended.tolist()
                assert info["final_info"]["elapsed_step"][ended].tolist() == returns[ended].tolist()
                assert info["episode_return"][ended].tolist() == returns[ended].tolist()
                assert all(o is None for o in info["final_obs"][~ended])
                returns[ended] = 0
        assert info["_episode_return"].all()


def _same_key(ref: dict[str, Any], ours: dict[str, Any], key: str, where: str) -> None:
    """``key`` and its mask in both infos or in neither, equal where given."""
    assert (key in ref) == (key in ours), f"{where}: {key!r} in {sorted(ref)} / {sorted(ours)}"
    assert (f"_{key}" in ref) == (f"_{key}" in ours), f"{where}: _{key}"
    if key in ref:
        _same(ref[f"_{key}"], ours[f"_{key}"], f"{where} _{key}")
        _same(ref[key], ours[key], f"{where} {key}")


@pytest.mark.parametrize("kw", [{"lap_complete_percent": 0.0}, {"max_episode_steps": 2}],
                         ids=["laps", "time-limit"])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_keys_set_on_some_steps_only_match_sync_vector_env(mode: AutoresetMode,
                                                           kw: dict[str, Any]) -> None:
    """CarRacing's ``lap_finished``, which gymnasium's step sets only where an episode ends
    (not where the time limit ends it): in the infos (and ``final_info``) on the steps and for
    the envs where SyncVectorEnv's has it. With ``lap_complete_percent=0`` every episode ends
    with a lap at its first step; with ``max_episode_steps=2`` episodes end without one. A
    partial reset after the first step puts the envs out of step with each other."""
    ref = gym.make_vec("CarRacing-v3", NUM_ENVS, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": mode}, **kw)
    ours = make_gymnasium("CarRacing-v3", NUM_ENVS, autoreset_mode=mode, num_threads=2, **kw)
    with closing(ref), closing(ours):
        _, info_ref = ref.reset(seed=1)
        _, info = ours.reset(seed=1)
        _same_key(info_ref, info, "lap_finished", "reset")
        masks = set()
        for t in range(6):
            actions = np.zeros((NUM_ENVS, 3), dtype=np.float32)
            obs_ref, _, term_ref, trunc_ref, info_ref = ref.step(actions)
            obs, _, term, trunc, info = ours.step(actions)
            _same(obs_ref, obs, f"step {t} obs")
            _same(term_ref, term, f"step {t} terminated")
            _same(trunc_ref, trunc, f"step {t} truncated")
            _same_key(info_ref, info, "lap_finished", f"step {t}")
            assert ("final_info" in info_ref) == ("final_info" in info), f"step {t}"
            if "final_info" in info_ref:
                _same_key(info_ref["final_info"], info["final_info"], "lap_finished",
                          f"step {t} final_info")
            masks.add(tuple(info.get("_lap_finished", np.zeros(NUM_ENVS, bool)).tolist()))
            if mode is AutoresetMode.DISABLED:
                reset = term_ref | trunc_ref
            else:
                reset = (np.arange(NUM_ENVS) < 2) & (t == 0)
            if reset.any():
                ref.reset(options={"reset_mask": reset.copy()})
                ours.reset(options={"reset_mask": reset.copy()})
        if "max_episode_steps" in kw:
            assert masks == {(False,) * NUM_ENVS}, masks
        elif mode is AutoresetMode.NEXT_STEP:
            assert (True, True, False, False) in masks, masks
        elif mode is AutoresetMode.DISABLED:
            assert masks == {(True,) * NUM_ENVS}, masks


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP],
                         ids=["NextStep", "SameStep"])
def test_vector_wrappers_work_on_top(mode: AutoresetMode) -> None:
    ref, ours = _pair("CartPole-v1", mode)

    def wrap(env: gym.vector.VectorEnv[Any, Any, Any]) -> gym.vector.VectorEnv[Any, Any, Any]:
        env = gym.wrappers.vector.RecordEpisodeStatistics(env)
        if mode is AutoresetMode.NEXT_STEP:  # gymnasium's obs wrappers refuse SAME_STEP
            env = gym.wrappers.vector.NormalizeObservation(env)
        return gym.wrappers.vector.ClipReward(env, max_reward=0.5)

    ref_w, ours_w = wrap(ref), wrap(ours)
    with closing(ref_w), closing(ours_w):
        space = ref.action_space
        space.seed(1)
        _same(ref_w.reset(seed=4)[0], ours_w.reset(seed=4)[0], "reset")
        episodes = 0
        for t in range(300):
            actions = space.sample()
            obs_ref, r_ref, *_, info_ref = ref_w.step(actions)
            obs, r, *_, info = ours_w.step(actions)
            _same(obs_ref, obs, f"step {t} obs")
            _same(r_ref, r, f"step {t} clipped reward")
            assert ("episode" in info) == ("episode" in info_ref)
            if "episode" in info:
                _same(info_ref["_episode"], info["_episode"], f"step {t} _episode")
                ended = info["_episode"]
                _same(info_ref["episode"]["r"][ended], info["episode"]["r"][ended], "r")
                _same(info_ref["episode"]["l"][ended], info["episode"]["l"][ended], "l")
                # RecordEpisodeStatistics' totals equal the pool's own
                assert info["episode"]["l"][ended].tolist() == (
                    info["episode_length"][ended].tolist())
                episodes += int(ended.sum())
        assert episodes >= NUM_ENVS


def test_per_env_seed_list_matches_gymnasium() -> None:
    ref, ours = _pair("CartPole-v1", AutoresetMode.NEXT_STEP)
    with closing(ref), closing(ours):
        seeds: list[int | None] = [7, 7, None, 9]
        obs_ref, _ = ref.reset(seed=seeds)
        obs, _ = ours.reset(seed=seeds)
        _same(obs_ref[[0, 1, 3]], obs[[0, 1, 3]], "seeded rows")
        for seeds in ([0, 1, 2, 1], [5, 0, 0, 0], [0, 0, 0, 0], [2**40, 3, None, 0]):
            obs_ref, _ = ref.reset(seed=seeds)
            obs, _ = ours.reset(seed=seeds)
            rows = [i for i, s in enumerate(seeds) if s is not None]
            _same(obs_ref[rows], obs[rows], f"seeds {seeds}")
            actions = np.ones(NUM_ENVS, dtype=np.int64)
            _same(ref.step(actions)[0][rows], ours.step(actions)[0][rows], f"step after {seeds}")
        with pytest.raises(ValueError, match="expected None, an int or a list of 4"):
            ours.reset(seed=[1, 2])
        with pytest.raises(ValueError, match=r"seed\[1\] is -1, expected a non-negative int"):
            ours.reset(seed=[0, -1, 0, 0])
        ours.step(np.zeros(NUM_ENVS, dtype=np.int64))  # still usable


def test_the_adapter_holds_exactly_num_envs_envs_and_resets_subsets() -> None:
    """Partial resets (reset_mask) hand out a short batch: no hidden filler envs."""
    ref, ours = _pair("CartPole-v1", AutoresetMode.NEXT_STEP)
    with closing(ref), closing(ours):
        pool = ours._steps.pool  # type: ignore[attr-defined]
        assert pool.num_envs == NUM_ENVS
        ref.reset(seed=3)
        ours.reset(seed=3)
        actions = np.zeros(NUM_ENVS, dtype=np.int64)
        for step in range(60):
            mask = np.zeros(NUM_ENVS, dtype=bool)
            mask[step % NUM_ENVS] = True
            if step % 7 == 0:
                obs_ref, _ = ref.reset(options={"reset_mask": mask})
                obs, _ = ours.reset(options={"reset_mask": mask})
                _same(obs_ref[mask], obs[mask], f"partial reset {step}")
            r = ref.step(actions)
            o = ours.step(actions)
            for k, name in enumerate(("obs", "reward", "terminated", "truncated")):
                _same(r[k], o[k], f"{name} at step {step}")
        assert pool.num_envs == NUM_ENVS


def test_bad_input_is_refused_and_nothing_is_lost(cartpole: GymnasiumVectorEnv) -> None:
    envs = cartpole
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\)"):
        envs.step(np.zeros(NUM_ENVS, dtype=np.int64))
    with pytest.raises(ValueError, match=r"the first reset\(\) resets every env"):
        envs.reset(options={"reset_mask": np.eye(NUM_ENVS, dtype=bool)[0]})  # zeros elsewhere
    obs, _ = envs.reset(seed=0)
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(4,\)"):
        envs.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="dtype float64, expected integers"):
        envs.step(np.zeros(NUM_ENVS))
    with pytest.raises(ValueError, match="out of range|expected 0 <="):
        envs.step(np.full(NUM_ENVS, 2, dtype=np.int64))
    with pytest.raises(TypeError, match="must be a numpy array"):
        envs.reset(options={"reset_mask": [True] * NUM_ENVS})
    with pytest.raises(ValueError, match=r"must have shape `\(4,\)`"):
        envs.reset(options={"reset_mask": np.ones(3, dtype=bool)})
    with pytest.raises(TypeError, match="dtype=np.bool_"):
        envs.reset(options={"reset_mask": np.ones(NUM_ENVS, dtype=np.int64)})
    with pytest.raises(ValueError, match="at least one True"):
        envs.reset(options={"reset_mask": np.zeros(NUM_ENVS, dtype=bool)})
    with pytest.raises(ValueError, match=r"reset options \['low'\] are not supported"):
        envs.reset(options={"low": -0.1})
    # After every refusal the envs step on from where they were, as a fresh twin does.
    with closing(make_gymnasium("CartPole-v1", NUM_ENVS, num_threads=2)) as twin:
        _same(twin.reset(seed=0)[0], obs, "reset")
        a = np.array([0, 1, 1, 0])
        for t in range(5):
            _same(twin.step(a)[0], envs.step(a)[0], f"step {t}")


def test_disabled_mode_refuses_to_step_an_ended_env() -> None:
    with closing(make_gymnasium("CartPole-v1", 2, autoreset_mode="disabled",
                                num_threads=2)) as envs:
        envs.reset(seed=0)
        ended = np.zeros(2, dtype=bool)
        while not ended.any():
            _, _, term, trunc, _ = envs.step(np.ones(2, dtype=np.int64))
            ended = term | trunc
        with pytest.raises(ValueError, match="autoreset_mode is DISABLED; reset them first"):
            envs.step(np.ones(2, dtype=np.int64))
        _, info = envs.reset(options={"reset_mask": ended})
        assert info["_elapsed_step"].tolist() == ended.tolist()
        envs.step(np.ones(2, dtype=np.int64))


@pytest.mark.parametrize("where", ["before the send", "after the send", "in the receive",
                                   "in a partial reset"])
def test_an_interrupted_step_is_drained_by_the_next_reset(
        cartpole: GymnasiumVectorEnv, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A Ctrl-C anywhere in a step (or a partial reset) loses nothing and leaves the env
    usable: ``reset()`` receives what is in flight. "after the send": in the send's own
    bookkeeping, once the native send had gone out (the env was wedged: its rows were in
    flight and nobody waited for them, so every step and reset was refused)."""
    envs = cartpole
    envs.reset(seed=0)
    pool = envs._steps.pool
    name = {"in the receive": "recv_blocking", "in a partial reset": "flush"}.get(where, "send")
    real = getattr(pool, name)

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(pool, name, real)
        if where == "after the send":
            real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, name, interrupted)
    zeros = np.zeros(NUM_ENVS, dtype=np.int64)
    with pytest.raises(KeyboardInterrupt):
        if where == "in a partial reset":
            envs.reset(options={"reset_mask": np.arange(NUM_ENVS) == 0})
        else:
            envs.step(zeros)
    if where == "before the send":
        envs.step(zeros)  # nothing went out: the envs step on
    else:
        with pytest.raises((RuntimeError, ValueError), match="interrupted|in flight"):
            envs.step(zeros)
    with closing(make_gymnasium("CartPole-v1", NUM_ENVS, num_threads=2)) as twin:
        _same(twin.reset(seed=1)[0], envs.reset(seed=1)[0], "reset after interrupt")
        a = np.ones(NUM_ENVS, dtype=np.int64)
        _same(twin.step(a)[0], envs.step(a)[0], "step after interrupt")


def test_spaces_render_close_and_construction_errors() -> None:
    envs = make_gymnasium("Pendulum-v1", 3, g=9.81)
    assert isinstance(envs, gym.vector.VectorEnv)
    assert envs.num_envs == 3 and envs.observation_space.shape == (3, 3)
    assert envs.action_space.shape == (3, 1) and envs.metadata["autoreset_mode"] is (
        AutoresetMode.NEXT_STEP)
    with pytest.warns(UserWarning, match="without specifying any render mode"):
        assert envs.render() == (None, None, None)  # made without render_mode, as gymnasium's
    envs.close()
    envs.close()  # idempotent
    with pytest.raises(aiopool.PoolClosed):
        envs.reset()
    with pytest.raises(ValueError, match="render_mode is 'human'"):
        make_gymnasium("Hopper-v5", 2, render_mode="human")
    with pytest.raises(ValueError, match="autoreset_mode is 'sometimes'"):
        make_gymnasium("CartPole-v1", 2, autoreset_mode="sometimes")
    with pytest.raises(TypeError, match="batch_size is num_envs"):
        make_gymnasium("CartPole-v1", 2, batch_size=1)
    with pytest.raises(ValueError, match="unknown env id 'CartPole-v9'"):
        make_gymnasium("CartPole-v9", 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'gravity'"):
        make_gymnasium("CartPole-v1", 2, gravity=1.0)
    with pytest.raises(TypeError, match="vectorization_mode is gymnasium.make_vec's"):
        make_gymnasium("CartPole-v1", 2, vectorization_mode="sync")


def test_spec_get_attr_set_attr_and_call_as_sync_vector_env() -> None:
    ref, ours = _pair("CartPole-v1", AutoresetMode.NEXT_STEP)
    with closing(ref), closing(ours):
        assert ours.spec is not None and ours.spec.id == "CartPole-v1" == ref.spec.id
        assert ours.spec.max_episode_steps == 500
        # gymnasium's registration holds: training scripts stop at its reward_threshold
        assert ours.spec.reward_threshold == gym.spec("CartPole-v1").reward_threshold == 475
        assert ours.get_attr("spec")[0].reward_threshold == 475
        for seed in (5, [7, None, 9, 3]):
            ref.reset(seed=seed)
            ours.reset(seed=seed)
            assert ours.get_attr("np_random_seed") == ref.get_attr("np_random_seed"), seed
            assert ours.call("np_random_seed") == ref.call("np_random_seed")
        assert ours.get_attr("action_space") == ref.get_attr("action_space")
        assert [s.id for s in ours.get_attr("spec")] == ["CartPole-v1"] * NUM_ENVS
        with pytest.raises(AttributeError, match="no attribute 'gravity'.*np_random_seed"):
            ours.get_attr("gravity")
        with pytest.raises(NotImplementedError, match="pass the env's constructor kwargs"):
            ours.set_attr("gravity", 3.0)
        ours.step(np.zeros(NUM_ENVS, dtype=np.int64))  # still usable
    # Each env's spec has the registration's kwargs, under the caller's, as gymnasium's.
    for kwargs in ({}, {"natural": True}):
        theirs = gym.make_vec("Blackjack-v1", 2, vectorization_mode="sync", **kwargs)
        with closing(theirs), closing(make_gymnasium("Blackjack-v1", 2, **kwargs)) as envs:
            registered = theirs.get_attr("spec")[0].kwargs
            assert envs.get_attr("spec")[0].kwargs == registered == {
                "sab": True, "natural": False, **kwargs}


def _permuted(batch: aiopool.Batch, rows: list[int]) -> aiopool.Batch:
    """The rows ``rows`` of ``batch`` as a batch of their own, in that order."""
    fields = tuple(f[rows] for f in batch.fields())
    out = aiopool.Batch((*fields[:5], None), batch._names, batch._pool)
    out._fields = fields
    return out


def _same_rows(a: Any, b: Any, where: str) -> None:
    """Two Rows (or parts of them) equal in structure, dtypes and bytes."""
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for k in a:
            _same_rows(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, tuple):
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_rows(x, y, f"{where}.{k}")
    else:
        _same(a, b, where)


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "HalfCheetah-v5"])
def test_rows_in_order_equal_the_general_path(env_id: str, autoreset: str) -> None:
    """The lockstep's fast paths (one batch, rows in env id order: each field copied once, the
    final ones only if an episode ended; natively, in one call, also from a batch whose rows
    are out of order) give what the general path gives for the same rows arriving shuffled,
    in one batch or two."""
    from aiopool.adapters import Plan, _rows, _rows_copied, _rows_in_order

    n = 4
    with aiopool.make(env_id, n, n, num_threads=1, seed=3, autoreset=autoreset,
                      max_episode_steps=15) as pool:
        ids = np.arange(n, dtype=np.int32)
        plan = Plan.of(pool._names, None)
        base = {"first": np.ones(n, dtype=np.bool_)}
        space = pool.single_action_space
        space.seed(0)
        ended = finals = 0
        shuffles = [np.array(p, dtype=np.int32) for p in ([3, 1, 0, 2], [1, 0, 3, 2], [2, 3, 1, 0])]
        pool.async_reset()
        sent = ids
        for t in range(60):
            batch = pool.recv_blocking()
            assert batch.env_id.tolist() == sent.tolist(), "one worker thread: in sent order"
            copies = batch._handle.copies
            in_order = sent is ids
            native = _rows_copied(copies, batch.obs, ids, plan, True, None, not in_order)
            some_ended = bool((batch.terminated | batch.truncated).any())
            assert ("final_obs" in native.info) == (autoreset == "same_step" and some_ended)
            ended += some_ended
            finals += "final_info" in native.info
            # Every third call is sent out of env id order, and (t = 2 mod 3) the next one's
            # rows are sorted natively though they are in it: only the native and general
            # paths apply.
            sent = shuffles[t % 9 // 3] if t % 3 == 1 else ids
            if not in_order or t % 3 == 2:
                _same_rows(_rows([batch], plan)._asdict(), native._asdict(), f"step {t}")
                based = _rows_copied(copies, batch.obs, ids, plan, True, base, True)
                assert list(based.info) == ["first", *native.info], f"step {t}"
                _same_rows(_rows([batch], plan, base)._asdict(), based._asdict(), f"step {t}")
                pool.send(np.stack([space.sample() for _ in range(n)]), sent)
                continue
            fast = _rows_in_order(batch, ids, plan)
            assert fast.env_id is ids
            _same_rows(native._asdict(), fast._asdict(), f"step {t} native")
            views = _rows_copied(copies, batch.obs, ids, plan, False, None, False)
            assert views.obs is batch.obs and views.info.keys() == fast.info.keys()
            for rows in ([3, 1, 0, 2], [2, 3, 0, 1]):
                shuffled = _permuted(batch, rows)
                general = _rows([shuffled], Plan.of(pool._names, None))
                _same_rows(general._asdict(), fast._asdict(), f"step {t} shuffled {rows}")
                halves = [_permuted(batch, rows[:1]), _permuted(batch, rows[1:])]
                general = _rows(halves, Plan.of(pool._names, None))
                _same_rows(general._asdict(), fast._asdict(), f"step {t} in two {rows}")
            for r in (fast, native):
                for value in (r.obs, r.reward, r.terminated, r.truncated, *r.info.values()):
                    for array in value.values() if isinstance(value, dict) else [value]:
                        assert array.flags.writeable and array.flags.owndata, f"step {t}"
            pool.send(np.stack([space.sample() for _ in range(n)]), sent)
        pool.recv_blocking()
        assert ended >= 3 and (finals >= 3) == (autoreset == "same_step"), (ended, finals)


@pytest.mark.parametrize("copy_obs", [True, False], ids=["copy", "views"])
@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_rows_arriving_out_of_env_id_order_are_sorted(native: bool, copy_obs: bool) -> None:
    """A lockstep step whose rows arrive shuffled gives the rows (and ``last_obs``, what a
    partial reset keeps of the other envs) of a twin stepped in order."""
    from aiopool.adapters import Lockstep

    n = 4
    kw: dict[str, Any] = {"seed": 0, "autoreset": "same_step", "num_threads": 1,
                          "max_episode_steps": 6}
    with closing(Lockstep("CartPole-v1", n, copy_obs=copy_obs, **kw)) as ours, \
            closing(Lockstep("CartPole-v1", n, **kw)) as twin:
        ours._native_copies = native
        ours.info_base = twin.info_base = {"first": np.ones(n, dtype=np.bool_)}
        ours.pool._caller_helps(False)  # one worker steps all: rows arrive as sent
        ours.reset()
        twin.reset()
        rng = np.random.default_rng(0)
        finals = 0
        for t in range(20):
            actions = rng.integers(0, 2, n)
            shuffled = rng.permutation(n).astype(np.int32)
            ours.pool.send(actions[shuffled], shuffled)  # Lockstep.send, in another order
            ours._pending, ours._awaiting = "step", n
            got, want = ours.wait(), twin.step(actions)
            assert ours._last[0].env_id.tolist() == shuffled.tolist(), "arrived as sent"
            _same_rows(want._asdict(), got._asdict(), f"step {t}")
            _same(want.obs, ours.last_obs, f"step {t} last_obs")
            finals += "final_obs" in got.info
        assert finals >= 3, finals


def test_step_arrays_are_the_callers_and_masks_shared_read_only() -> None:
    """A step's arrays are writeable copies that later steps leave alone; the all-True
    ``_key`` masks of a step are read-only and the same arrays every step."""
    with closing(make_gymnasium("HalfCheetah-v5", 3, num_threads=1)) as envs:
        envs.reset(seed=0)
        actions = np.zeros((3, 6), dtype=np.float32)
        obs, reward, term, trunc, info = envs.step(actions)
        kept = [a.copy() for a in (obs, reward, term, trunc)]
        kept_info = {k: v.copy() for k, v in info.items()}
        for _ in range(3):
            obs2, reward2, _, _, info2 = envs.step(actions + 0.5)
        for a, b in zip((obs, reward, term, trunc), kept, strict=True):
            _same(b, a, "a step's arrays after later steps")
            assert a.flags.writeable and a.flags.owndata
        for k, v in info.items():
            _same(kept_info[k], v, f"info[{k!r}] after later steps")
        assert obs2.tobytes() != obs.tobytes() and reward2.tobytes() != reward.tobytes()
        assert {"x_position", "reward_ctrl", "episode_return", "elapsed_step"} <= set(info)
        assert [k for k in info if not k.startswith("_")] == [k[1:] for k in info
                                                               if k.startswith("_")]
        for k, v in info.items():
            if k.startswith("_"):
                assert v.tolist() == [True] * 3 and not v.flags.writeable, k
                assert info2[k] is v, f"{k}: the same mask every step"
            else:
                assert v.flags.writeable and v is not info2[k], k
        with pytest.raises(ValueError, match="read-only"):
            info["_x_position"][0] = False
        # Partial resets give masks of their own, True only for the envs reset.
        _, reset_info = envs.reset(options={"reset_mask": np.array([False, True, False])})
        assert reset_info["_elapsed_step"].tolist() == [False, True, False]
        assert reset_info["_elapsed_step"].flags.writeable


def test_copy_false_returns_the_pools_views() -> None:
    """``copy=False``: a step's obs is a read-only view of the pool's batch, never written
    again (a later step's obs is a new view); a reset's obs is the adapter's own buffer,
    which the next reset writes into, as ``SyncVectorEnv(copy=False)``'s. When the rows came
    out of env id order (the caller stepped some envs, the worker the others), the obs are a
    sorted copy, read-only as well."""
    with closing(make_gymnasium("HalfCheetah-v5", 3, num_threads=1, copy=False)) as envs, \
            closing(make_gymnasium("HalfCheetah-v5", 3, num_threads=1)) as copied:
        assert not envs.spec.kwargs["copy"] and copied.spec.kwargs["copy"]
        obs, _ = envs.reset(seed=0)
        obs_copied, _ = copied.reset(seed=0)
        _same(obs_copied, obs, "reset")
        actions = np.full((3, 6), 0.3, dtype=np.float32)
        step_obs, reward, *_ = envs.step(actions)
        _same(copied.step(actions)[0], step_obs, "step")
        assert not step_obs.flags.writeable
        assert reward.flags.writeable and reward.flags.owndata  # only the obs are views
        envs._steps.pool._caller_helps(False)  # the worker steps them all: rows in order
        viewed = envs.step(actions)[0]
        _same(copied.step(actions)[0], viewed, "a step, rows in order")
        assert not viewed.flags.writeable and not viewed.flags.owndata
        kept = step_obs.copy()
        later = envs.step(actions)[0]
        _same(copied.step(actions)[0], later, "a later step")
        _same(kept, step_obs, "a step's obs after a later step")
        assert not np.shares_memory(later, step_obs)
        again, _ = envs.reset(seed=1, options={"reset_mask": np.array([True, False, True])})
        assert again is obs, "a reset returns the adapter's buffer"
        _same(copied.reset(seed=1, options={"reset_mask": np.array([True, False, True])})[0],
              again, "partial reset")


def test_a_sync_caller_steps_queued_envs_itself() -> None:
    """In the adapters' pools the thread in ``recv_blocking`` steps envs whose tickets are
    still queued: with one worker busy for 50 ms on env 0's ticket, the caller runs env 1's.
    The rows are those of a pool whose worker steps every env."""
    def rows(helping: bool) -> list[tuple[Any, ...]]:
        with aiopool.make("Counting-v0", num_envs=2, batch_size=2, num_threads=1, chunk=1,
                          step_ns=50_000_000, seed=0) as pool:
            pool._caller_helps(helping)
            pool.async_reset()
            out = []
            for t in range(3):
                batch = pool.recv_blocking()
                order = np.argsort(batch.env_id)
                out.append(tuple(np.asarray(f)[order].tolist() for f in batch.fields()))
                pool.send(np.array([t % 2, 1], dtype=np.int64))
                if helping:
                    assert pool._native.help() >= 1, "the caller ran no ticket"
            return out

    assert rows(True) == rows(False)


def test_closing_a_pool_while_a_sync_caller_steps_its_envs() -> None:
    """``close()`` from another thread while the caller is in the middle of an env step:
    close waits for it, and the caller's ``recv_blocking`` ends (a batch, or PoolClosed)."""
    pool = aiopool.make("Counting-v0", num_envs=2, batch_size=2, num_threads=1, chunk=1,
                        step_ns=200_000_000)
    pool._caller_helps()
    pool.async_reset()
    pool.recv_blocking()
    pool.send(np.zeros(2, dtype=np.int64))
    outcome: list[Any] = []

    def receive() -> None:
        try:
            outcome.append(pool.recv_blocking())
        except aiopool.PoolClosed as e:
            outcome.append(e)

    caller = threading.Thread(target=receive)
    caller.start()
    time.sleep(0.05)  # the worker and the caller are each in a 200 ms step
    pool.close()
    caller.join(timeout=5)
    assert not caller.is_alive(), "recv_blocking did not end after close()"
    assert len(outcome) == 1 and isinstance(outcome[0], aiopool.Batch | aiopool.PoolClosed)


def test_make_gymnasium_passes_a_process_envs_info_keys_to_the_pool() -> None:
    """``info_keys={key: dtype}`` is aiopool.make's (a process-backed env's info keys): the
    adapter hands it to the pool and reports those keys, as SyncVectorEnv does."""
    from helpers import CountingEnv

    with closing(make_gymnasium(CountingEnv, 2, seed=3,
                                info_keys=CountingEnv.INFO)) as env:
        _, info = env.reset()
        reference = gym.vector.SyncVectorEnv([CountingEnv, CountingEnv])
        _, ref_info = reference.reset(seed=3)
        np.testing.assert_array_equal(info["draw"], ref_info["draw"])
        assert info["draw"].dtype == np.float64
        reference.close()


def test_same_step_final_obs_only_where_an_atari_game_was_reset() -> None:
    """``life_loss_info=True`` in ``SameStep`` mode: a lost life is ``terminated`` but nothing is
    reset, so it has no ``final_obs`` / ``final_info`` (they were marked set, and zeros:
    ``final_info["lives"] == 0`` read as a game over); a game over has them."""
    envs = make_gymnasium("Breakout-v5", 1, seed=0, num_threads=1, life_loss_info=True,
                          autoreset_mode="SameStep")
    envs.reset()
    rng = np.random.default_rng(0)
    lives = []
    with closing(envs):
        for _ in range(3000):
            action = rng.integers(0, 4, 1)
            action[rng.random(1) < 0.3] = 1
            _, _, terminated, truncated, info = envs.step(action)
            if not (terminated[0] or truncated[0]):
                continue
            if "_final_obs" in info and info["_final_obs"][0]:  # a game over: reset
                assert info["final_info"]["lives"][0] == 0
                assert info["final_info"]["episode_frame_number"][0] > 0
                assert info["final_obs"][0].any()
                break
            lives.append(int(info["lives"][0]))  # a lost life: the game goes on
    assert lives == [4, 3, 2, 1]
