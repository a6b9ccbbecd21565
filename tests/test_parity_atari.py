"""Atari parity: aiopool's <Game>-v5 pools against ale-py 0.12.1's ``AtariVectorEnv``.

Both sides get the same settings, the same seeds and the same random action sequence, and every
step's observations, rewards, terminated, truncated, lives and episode frame numbers must be
equal bit for bit. Both autoreset the next step by default (``autoreset="next_step"`` /
``AutoresetMode.NEXT_STEP``); ``same_step`` is compared against ale-py's ``SAME_STEP``.
aiopool's ``Pool.step`` returns rows ordered by env_id, as ale-py's synchronous step does.
The long rollouts are marked slow.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from recorded import Trace

import aiopool
from aiopool import registry
from aiopool._native.families import ATARI

ale_py = pytest.importorskip("ale_py")
from ale_py.vector_env import AtariVectorEnv  # noqa: E402

if "_atari" not in {m.__name__.rsplit(".", 1)[-1] for m in registry._modules()}:
    pytest.skip(f"aiopool was built without Atari: {registry.unavailable_families()}",
                allow_module_level=True)

GAMES = {"Pong-v5": "pong", "Breakout-v5": "breakout", "SpaceInvaders-v5": "space_invaders",
         "MsPacman-v5": "ms_pacman"}


def _compare(env_id: str, steps: int, *, num_envs: int = 2, seed: int = 3,
             action_seed: int = 0, reseed_at: int | None = None, trace: Trace | None = None,
             **kwargs: Any) -> int:
    """Step both sides ``steps`` times; assert equality at every step. Returns the number of
    episode ends seen (so a test can check its rollout crossed a reset). ``trace``: the case's
    digests (tests/recorded.py); a recorded one steps the pool alone against the recording."""
    ref = None
    if trace is not None:
        trace.env_id = env_id
    if trace is None or trace.live:
        ref = AtariVectorEnv(GAMES.get(env_id) or _rom_of(env_id), num_envs, **kwargs)
    ends = 0

    def traced(batch: aiopool.Batch) -> aiopool.Batch:
        if trace is not None:
            trace.rows(batch)
        return batch

    async def run() -> None:
        nonlocal ends
        with aiopool.make(env_id, num_envs=num_envs, num_threads=min(2, num_envs), seed=seed,
                          **kwargs) as pool:
            pool.async_reset()
            batch = traced(await pool.recv())
            order = np.argsort(batch.env_id)
            if ref is not None:
                assert pool.single_action_space == ref.single_action_space
                assert pool.single_observation_space == ref.single_observation_space
                obs, info = ref.reset(seed=seed)
                _assert_equal("reset", np.asarray(batch.obs)[order], obs)
                _assert_equal("reset lives", np.asarray(batch.info["lives"])[order],
                              info["lives"])
            rng = np.random.default_rng(action_seed)
            n = int(pool.single_action_space.n)
            for t in range(steps):
                if t == reseed_at:
                    pool.async_reset(seed=seed + 100)
                    batch = traced(await pool.recv())
                    if ref is not None:
                        obs, info = ref.reset(seed=seed + 100)
                        order = np.argsort(batch.env_id)
                        _assert_equal(f"re-seeded reset at {t}", np.asarray(batch.obs)[order],
                                      obs)
                actions = rng.integers(0, n, num_envs)
                b = traced(await pool.step(actions))
                ends += int(np.sum(np.asarray(b.terminated) | np.asarray(b.truncated)))
                if ref is None:
                    continue
                obs, reward, terminated, truncated, info = ref.step(actions)
                where = f"{env_id} {kwargs} step {t}"
                _assert_equal(f"{where}: obs", b.obs, obs)
                _assert_equal(f"{where}: reward", b.reward, reward.astype(np.float64))
                _assert_equal(f"{where}: terminated", b.terminated, terminated)
                _assert_equal(f"{where}: truncated", b.truncated, truncated)
                _assert_equal(f"{where}: lives", b.info["lives"], info["lives"])
                _assert_equal(f"{where}: episode_frame_number", b.info["episode_frame_number"],
                              info["episode_frame_number"])

    try:
        asyncio.run(run())
    finally:
        if ref is not None:
            ref.close()
    if trace is not None:
        trace.done()
    return ends


def _rom_of(env_id: str) -> str:
    return str(registry._module_for(env_id).env_config(env_id)[0][-1][2]).removesuffix(".bin")


def _assert_equal(what: str, got: Any, expected: Any) -> None:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, ale-py {expected.shape}"
    if not np.array_equal(got, expected):
        diff = np.argwhere(got != expected)
        raise AssertionError(f"{what}: {len(diff)} elements differ, first at {diff[0].tolist()}: "
                             f"{got[tuple(diff[0])]} vs ale-py {expected[tuple(diff[0])]}")


# -- fast: every default-run test steps a few hundred frames ---------------------------------

@pytest.mark.parametrize("env_id", list(GAMES))
def test_default_settings(env_id: str, trace: Trace) -> None:
    _compare(env_id, 100, trace=trace)


def test_rgb(trace: Trace) -> None:  # the slow run covers RGB on all four games
    _compare("Pong-v5", 100, grayscale=False, trace=trace)


def test_no_noops_and_episodic_life_cross_resets(trace: Trace) -> None:
    ends = _compare("Breakout-v5", 300, noop_max=0, episodic_life=True, trace=trace)
    assert ends > 0, "the rollout never crossed a reset; lengthen it"


def test_life_loss_info_keeps_playing(trace: Trace) -> None:
    # terminated on a lost life, but no reset follows (ale-py resets only at game over).
    ends = _compare("Breakout-v5", 300, life_loss_info=True, trace=trace)
    assert ends > 0


class Screens:
    """ale-py's emulator (its ``ALEInterface``) driven as an aiopool Atari env without no-op
    starts or FIRE resets: ``reset_game`` at each reset (the ROM loaded with ``random_seed =
    seed + i``), ``frameskip`` repeats of each action, an episode ended by game over or
    ``max_frames``. ``screens()`` is each env's ``getScreenRGB()``: what ale-py's
    ``env.render()`` returns."""

    def __init__(self, game: str, num_envs: int, seed: int, frameskip: int, max_frames: int,
                 autoreset: str) -> None:
        from ale_py import ALEInterface, roms

        self.ales = []
        for i in range(num_envs):
            ale = ALEInterface()
            ale.setFloat("repeat_action_probability", 0.0)
            ale.setInt("random_seed", seed + i)
            ale.loadROM(roms.get_rom_path(game))
            ale.reset_game()
            self.ales.append(ale)
        self.actions = self.ales[0].getMinimalActionSet()
        self.frameskip, self.max_frames, self.autoreset = frameskip, max_frames, autoreset
        self.frames = [0] * num_envs
        self.ended = [False] * num_envs

    def step(self, actions: Any) -> int:
        """Step every env; returns how many episodes ended."""
        ends = 0
        for i, (ale, a) in enumerate(zip(self.ales, actions, strict=True)):
            if self.ended[i]:  # next_step: this step is the reset
                ale.reset_game()
                self.frames[i], self.ended[i] = 0, False
                continue
            for _ in range(self.frameskip):
                ale.act(self.actions[int(a)])
                self.frames[i] += 1
                if ale.game_over() or self.frames[i] >= self.max_frames:
                    ends += 1
                    if self.autoreset == "same_step":
                        ale.reset_game()
                        self.frames[i] = 0
                    else:
                        self.ended[i] = True
                    break
        return ends

    def screens(self) -> Any:
        return np.stack([ale.getScreenRGB() for ale in self.ales])


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
@pytest.mark.parametrize("env_id", ["Pong-v5", "Breakout-v5"])
def test_frames_equal_ale_pys_screens_through_resets(env_id: str, autoreset: str) -> None:
    """500 frames of each game and mode (2 envs x 250 steps) across episode ends: each one
    ale-py's screen of the same emulator state, pixel for pixel."""
    seed, steps, max_frames = 7, 250, 240

    async def run() -> int:
        with aiopool.make(env_id, num_envs=2, num_threads=2, seed=seed, autoreset=autoreset,
                          render_mode="rgb_array", noop_max=0, use_fire_reset=False,
                          max_num_frames_per_episode=max_frames) as pool:
            ref = Screens(GAMES[env_id], 2, seed, 4, max_frames, autoreset)
            pool.async_reset()
            await pool.recv()
            frames = pool.render()
            assert frames.shape == (2, 210, 160, 3) and not frames.flags.writeable
            _assert_equal("reset", frames, ref.screens())
            rng = np.random.default_rng(1)
            ends = 0
            for t in range(steps):
                actions = rng.integers(0, int(pool.single_action_space.n), 2)
                batch = await pool.step(actions)
                ended = ref.step(actions)
                assert int(np.sum(batch.terminated | batch.truncated)) == ended, f"step {t}"
                _assert_equal(f"{env_id} {autoreset} step {t}", pool.render(), ref.screens())
                ends += ended
            return ends

    assert asyncio.run(run()) >= 4, "the frames crossed too few resets"


def test_frame_limit_truncates(trace: Trace) -> None:
    ends = _compare("Pong-v5", 120, max_num_frames_per_episode=150, noop_max=5, trace=trace)
    assert ends > 0


def test_sticky_actions_unclipped_rewards_full_action_space(trace: Trace) -> None:
    _compare("SpaceInvaders-v5", 200, repeat_action_probability=0.25, reward_clipping=False,
             full_action_space=True, trace=trace)


@pytest.mark.parametrize("kwargs", [
    {"frameskip": 1, "stack_num": 1},
    {"maxpool": False, "frameskip": 3},
    {"img_height": 210, "img_width": 160},  # no resize: the frame is copied
    {"img_height": 100, "img_width": 80, "grayscale": False},  # one integer factor
    {"img_height": 64, "img_width": 48, "use_fire_reset": False},
], ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()))
def test_preprocessing_options(kwargs: dict[str, Any], trace: Trace) -> None:
    _compare("Breakout-v5", 60, trace=trace, **kwargs)


def test_reseeding_mid_run(trace: Trace) -> None:
    _compare("MsPacman-v5", 60, reseed_at=30, trace=trace)


def test_same_step_autoreset() -> None:
    ref = AtariVectorEnv("breakout", 2, autoreset_mode="SameStep", episodic_life=True,
                         noop_max=0)

    async def run() -> int:
        ends = 0
        with aiopool.make("Breakout-v5", num_envs=2, seed=5, autoreset="same_step",
                          episodic_life=True, noop_max=0) as pool:
            ref.reset(seed=5)
            pool.async_reset()
            await pool.recv()
            rng = np.random.default_rng(1)
            for t in range(300):
                actions = rng.integers(0, 4, 2)
                obs, reward, terminated, truncated, info = ref.step(actions)
                b = await pool.step(actions)
                _assert_equal(f"step {t}: obs", b.obs, obs)
                _assert_equal(f"step {t}: reward", b.reward, reward.astype(np.float64))
                _assert_equal(f"step {t}: terminated", b.terminated, terminated)
                _assert_equal(f"step {t}: lives", b.info["lives"], info["lives"])
                done = terminated | truncated
                if done.any():
                    ends += int(done.sum())
                    _assert_equal(f"step {t}: final_obs", np.asarray(b.info["final_obs"])[done],
                                  info["final_obs"][done])
        return ends

    try:
        assert asyncio.run(run()) > 0
    finally:
        ref.close()


@pytest.mark.asyncio
async def test_unseeded_reset_continues_the_stream() -> None:
    ref = AtariVectorEnv("pong", 2, noop_max=30)
    try:
        with aiopool.make("Pong-v5", num_envs=2, seed=11) as pool:
            ref.reset(seed=11)
            pool.async_reset()
            await pool.recv()
            for k in range(3):  # noop counts come from the same mt19937 stream on both sides
                obs, info = ref.reset()
                pool.async_reset()
                batch = await pool.recv()
                order = np.argsort(batch.env_id)
                _assert_equal(f"unseeded reset {k}", np.asarray(batch.obs)[order], obs)
                _assert_equal(f"unseeded reset {k} frame", np.asarray(
                    batch.info["episode_frame_number"])[order], info["episode_frame_number"])
    finally:
        ref.close()


def test_ids_are_gymnasiums_ale_v5_names() -> None:
    import gymnasium as gym

    ids = {i for i in aiopool.list_envs() if registry.family_of(i) is ATARI}
    gym.register_envs(ale_py)
    expected = {k.removeprefix("ALE/") for k in gym.registry if k.startswith("ALE/") and
                k.endswith("-v5")}
    assert ids == expected
    assert len(ids) == 104  # ale-py's 108 ROMs minus the 4 without a single-player mode


# Names with digits, and the screens that are not 210x160 (Adventure, AirRaid: 250 rows;
# Carnival: 214).
@pytest.mark.parametrize("env_id", ["TicTacToe3D-v5", "Pitfall2-v5", "AirRaid-v5", "Carnival-v5"])
def test_a_sample_of_roms_load_and_step(env_id: str, trace: Trace) -> None:
    _compare(env_id, 8, num_envs=1, seed=0, noop_max=3, trace=trace)


@pytest.mark.parametrize("env_id", sorted(i for i in aiopool.list_envs()
                                          if registry.family_of(i) is ATARI))
def test_every_rom_loads_and_steps(env_id: str, trace: Trace) -> None:
    """Every game, from seeded resets through episode ends: a 40-frame limit truncates each
    episode after 10 steps (ALE loads each ROM in ~0.3 s on each side)."""
    ends = _compare(env_id, 24, num_envs=2, seed=0, noop_max=3, max_num_frames_per_episode=40,
                    trace=trace)
    assert ends >= 2


# -- errors -----------------------------------------------------------------------------------

def test_integer_scale_sizes_are_refused_with_a_reason() -> None:
    with pytest.raises(ValueError, match="integer factor"):
        aiopool.make("Pong-v5", img_height=105, img_width=80)
    with pytest.raises(ValueError, match="enlarging"):
        aiopool.make("Pong-v5", img_height=300)


def test_bad_values_and_kwargs() -> None:
    with pytest.raises(ValueError, match="frameskip is 0"):
        aiopool.make("Pong-v5", frameskip=0)
    with pytest.raises(TypeError, match="valid: img_height, img_width"):
        aiopool.make("Pong-v5", continuous=True)
    with pytest.raises(ValueError, match="no ROM"), pytest.warns(UserWarning,
                                                                 match="not supported"):
        aiopool.make("Pong-v5", rom_path="no_such_game.bin")


def test_seeds_beyond_a_c_int_are_refused() -> None:
    with pytest.raises(ValueError, match="takes seeds up to 2147483647"):
        aiopool.make("Pong-v5", num_envs=2, seed=2**31 - 1)
    with aiopool.make("Pong-v5", num_envs=2, seed=2**31 - 2) as pool:
        with pytest.raises(ValueError, match="takes seeds up to"):
            pool.async_reset(seed=2**31)


@pytest.mark.asyncio
async def test_out_of_range_actions_are_refused_and_the_pool_stays_usable() -> None:
    with aiopool.make("Pong-v5", num_envs=2) as pool:
        pool.async_reset()
        await pool.recv()
        with pytest.raises(ValueError, match=r"expected 0 <= action < 6"):
            pool.send(np.array([0, 6]))
        b = await pool.step(np.array([0, 5]))
        assert b.obs.shape == (2, 4, 84, 84)


def test_a_build_without_ale_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # As a build with -DAIOPOOL_WITH_ALE=OFF: the module file is missing.
    import importlib

    real_import = importlib.import_module

    def without_atari(name: str, package: str | None = None) -> Any:
        if name == "aiopool._native._atari":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", without_atari)
    monkeypatch.setattr(registry, "_loaded", {"_core": registry._core})
    monkeypatch.setattr(registry, "_unavailable", {})
    with pytest.raises(ValueError, match=r"Pong-v5 is one of aiopool's Atari envs, which are "
                                         r"unavailable here: this aiopool was built without ALE"):
        aiopool.make("Pong-v5")
    assert "ALE_SOURCE_DIR" in registry.unavailable_families()["Atari"]
    assert "Pong-v5" not in aiopool.list_envs()
    assert "CartPole-v1" in aiopool.list_envs()


# -- slow: long rollouts ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("grayscale", [True, False], ids=["gray", "rgb"])
@pytest.mark.parametrize("noop_max,episodic_life", [(30, False), (0, True)],
                         ids=["noop30", "noop0-episodic"])
@pytest.mark.parametrize("env_id", list(GAMES))
def test_long_rollouts(env_id: str, grayscale: bool, noop_max: int, episodic_life: bool) -> None:
    ends = _compare(env_id, 2000, num_envs=2, seed=17, grayscale=grayscale, noop_max=noop_max,
                    episodic_life=episodic_life, repeat_action_probability=0.25)
    assert ends > 0
