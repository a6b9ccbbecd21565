"""Procgen parity: aiopool's Procgen pools against procgen's own ``ProcgenGym3Env``.

Both sides run procgen 0.10.7's library from the same cache folder (aiopool.procgen fetches it
from PyPI on first use; the reference is procgen's env.py over gym3 0.3.3, fetched beside it).
Env i of a pool seeded ``seed`` is ``ProcgenGym3Env(num=1, rand_seed=seed + i)``. Both get the
same random actions, and every step's frame, reward, episode end and info (``level_seed``,
``prev_level_seed``, ``prev_level_complete``) must be equal. Under ``next_step`` autoreset the
step after an episode end is the pool's reset: its row repeats the frame procgen already shows
(the next level's first; procgen never draws a level's last frame) and the reference is not
stepped. The default tier runs one id per distribution mode; every id runs in the slow tier.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import numpy as np
import pytest

import aiopool
from aiopool import procgen, registry
from aiopool._native.families import PROCGEN

try:
    procgen.install()
except procgen.ProcgenNotInstalled as e:
    pytest.skip(f"procgen's library could not be fetched (python -m aiopool.procgen install): "
                f"{e}", allow_module_level=True)
if "_procgen" not in {m.__name__.rsplit(".", 1)[-1] for m in registry._modules()}:
    pytest.skip(f"aiopool was built without Procgen: {registry.unavailable_families()}",
                allow_module_level=True)

INFO = ("level_seed", "prev_level_seed", "prev_level_complete")
GAMES = ["bigfish", "bossfight", "caveflyer", "chaser", "climber", "coinrun", "dodgeball",
         "fruitbot", "heist", "jumper", "leaper", "maze", "miner", "ninja", "plunder",
         "starpilot"]
MODES = {"Easy": "easy", "Hard": "hard", "Extreme": "extreme", "Memory": "memory",
         "Exploration": "exploration"}
IDS = [i for i in aiopool.list_envs() if registry.family_of(i) is PROCGEN]


def _game_mode(env_id: str) -> tuple[str, str]:
    if env_id.startswith("procgen-"):
        return env_id.removeprefix("procgen-").removesuffix("-v0"), "hard"
    for title, mode in MODES.items():
        if env_id.endswith(f"{title}-v0"):
            return env_id.removesuffix(f"{title}-v0").lower(), mode
    raise AssertionError(env_id)


class Reference:
    """One ``ProcgenGym3Env(num=1)`` per env, stepped one at a time."""

    def __init__(self, env_id: str, num_envs: int, seed: int, **kwargs: Any) -> None:
        game, mode = _game_mode(env_id)
        kwargs.setdefault("distribution_mode", mode)
        self.envs = [procgen.reference_env(num=1, env_name=game, rand_seed=seed + i,
                                           num_threads=0, **kwargs) for i in range(num_envs)]
        self.last = [self._observe(i) for i in range(num_envs)]

    def _observe(self, i: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        rew, ob, first = self.envs[i].observe()
        info = self.envs[i].get_info()[0]
        return ob["rgb"][0].copy(), float(rew[0]), bool(first[0]), info

    def step(self, i: int, action: int) -> tuple[np.ndarray, float, bool, dict[str, Any]]:
        self.envs[i].act(np.array([action], dtype=np.int32))
        self.last[i] = self._observe(i)
        return self.last[i]


def _same_row(batch: aiopool.Batch, row: int, obs: np.ndarray, info: dict[str, Any],
              where: str) -> None:
    assert np.array_equal(batch.obs[row], obs), f"{where}: frames differ"
    for key in INFO:
        assert int(batch.info[key][row]) == int(info[key]), f"{where}: {key}"


def _compare(env_id: str, steps: int, *, num_envs: int = 2, seed: int = 5,
             autoreset: str = "next_step", action_seed: int = 0, **kwargs: Any) -> int:
    """Step a pool and the reference side by side; returns the number of episode ends."""
    ref = Reference(env_id, num_envs, seed, **kwargs)
    rng = np.random.default_rng(action_seed)
    ends = 0

    async def run() -> None:
        nonlocal ends
        with aiopool.make(env_id, num_envs=num_envs, num_threads=min(2, num_envs), seed=seed,
                          autoreset=autoreset, **kwargs) as pool:
            pool.async_reset()
            batch = await pool.recv()
            for row, i in enumerate(batch.env_id.tolist()):
                _same_row(batch, row, ref.last[i][0], ref.last[i][3], f"env {i} reset")
            ended = [False] * num_envs
            for t in range(steps):
                actions = rng.integers(15, size=num_envs)
                batch = await pool.step(actions)
                for i in range(num_envs):
                    where = f"env {i} step {t}"
                    if ended[i] and autoreset == "next_step":  # the pool's reset step
                        assert batch.reward[i] == 0 and not batch.terminated[i], where
                        _same_row(batch, i, ref.last[i][0], ref.last[i][3], where)
                        ended[i] = False
                        continue
                    obs, rew, first, info = ref.step(i, int(actions[i]))
                    _same_row(batch, i, obs, info, where)
                    assert batch.reward[i] == rew, where
                    assert bool(batch.terminated[i]) == first and not batch.truncated[i], where
                    if first and autoreset == "same_step":
                        assert np.array_equal(batch.info["final_obs"][i], obs), where
                    ended[i] = first
                    ends += first

    asyncio.run(run())
    return ends


# One id per distribution mode, and one of procgen's gym ids: games whose levels end within
# the rollout under random actions.
DEFAULT = ["BigfishEasy-v0", "StarpilotHard-v0", "DodgeballExtreme-v0", "DodgeballMemory-v0",
           "LeaperExploration-v0", "procgen-bossfight-v0"]


@pytest.mark.parametrize("env_id", DEFAULT)
def test_one_id_per_mode_equals_procgen(env_id: str) -> None:
    assert _compare(env_id, 600) > 0


@pytest.mark.slow
@pytest.mark.parametrize("env_id", IDS)
def test_every_id_equals_procgen(env_id: str) -> None:
    _compare(env_id, 1500, num_envs=3, seed=11)


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_autoreset_modes_equal_procgen(autoreset: str) -> None:
    assert _compare("StarpilotEasy-v0", 400, autoreset=autoreset, seed=2) > 0


def test_disabled_autoreset_takes_a_reset_that_shows_the_next_level() -> None:
    """With autoreset disabled the user resets an ended env: its row is the frame procgen
    already shows (the next level's first), and stepping goes on as procgen's."""
    ref = Reference("StarpilotEasy-v0", 1, 2)
    rng = np.random.default_rng(0)
    ends = 0
    with aiopool.make("StarpilotEasy-v0", num_envs=1, seed=2, autoreset="disabled") as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=60)
        for t in range(400):
            action = int(rng.integers(15))
            pool.send(np.array([action]))
            batch = pool.recv_blocking(timeout=60)
            obs, rew, first, info = ref.step(0, action)
            _same_row(batch, 0, obs, info, f"step {t}")
            assert batch.reward[0] == rew and bool(batch.terminated[0]) == first, f"step {t}"
            if first:
                pool.async_reset()
                batch = pool.recv_blocking(timeout=60)
                _same_row(batch, 0, obs, info, f"reset after step {t}")
                ends += 1
    assert ends > 0


def test_options_equal_procgen() -> None:
    _compare("ChaserEasy-v0", 300, center_agent=False, use_backgrounds=False,
             restrict_themes=True, use_monochrome_assets=True, paint_vel_info=True,
             use_generated_assets=True)


def test_level_sequence_follows_num_levels_and_start_level() -> None:
    """Levels drawn from [start_level, start_level + num_levels), in procgen's order, and
    procgen's sequential levels (seed + 997 after a completed level)."""
    kwargs = {"num_levels": 3, "start_level": 40}
    assert _compare("BossfightEasy-v0", 500, **kwargs) > 0
    with aiopool.make("BossfightEasy-v0", num_envs=2, seed=0, **kwargs) as pool:
        seeds = set()
        pool.async_reset()
        seeds.update(pool.recv_blocking(timeout=30).info["level_seed"].tolist())
        for _ in range(400):
            pool.send(np.zeros(2, dtype=np.int64), np.arange(2, dtype=np.int32))
            got = pool.recv_blocking(timeout=30)
            seeds.update(got.info["level_seed"].tolist())
        assert seeds <= {40, 41, 42} and len(seeds) > 1
    _compare("BigfishEasy-v0", 400, use_sequential_levels=True, num_levels=1, start_level=7)


def test_reseed_and_forced_reset_equal_procgen() -> None:
    """async_reset(seed=k) is a new ProcgenGym3Env(rand_seed=k + i); async_reset() mid-level is
    procgen's forced reset (action -1): the level ends and the next one in its sequence starts."""
    ref = Reference("CoinrunHard-v0", 2, 30)
    with aiopool.make("CoinrunHard-v0", num_envs=2, seed=9) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=30)
        pool.async_reset(seed=30)
        batch = pool.recv_blocking(timeout=30)
        for row, i in enumerate(batch.env_id.tolist()):
            _same_row(batch, row, ref.last[i][0], ref.last[i][3], f"reseeded env {i}")
        for t in range(20):
            pool.send(np.full(2, 7), np.arange(2, dtype=np.int32))
            batch = pool.recv_blocking(timeout=30)
            for row, i in enumerate(batch.env_id.tolist()):
                obs, _, _, info = ref.step(i, 7)
                _same_row(batch, row, obs, info, f"env {i} step {t}")
        pool.async_reset()
        batch = pool.recv_blocking(timeout=30)
        for row, i in enumerate(batch.env_id.tolist()):
            obs, _, first, info = ref.step(i, -1)
            assert first
            _same_row(batch, row, obs, info, f"env {i} forced reset")


def test_render_is_procgens_rgb_info() -> None:
    ref = Reference("StarpilotEasy-v0", 2, 4, render_mode="rgb_array")
    with aiopool.make("StarpilotEasy-v0", num_envs=2, seed=4, render_mode="rgb_array") as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=30)
        for t in range(3):
            frames = pool.render()
            assert frames.shape == (2, 512, 512, 3) and frames.dtype == np.uint8
            for i in range(2):
                ref.envs[i].observe()  # procgen draws info["rgb"] when observed
                rgb = ref.envs[i].get_info()[0]["rgb"]
                assert np.array_equal(frames[i], rgb), f"env {i} frame {t}"
            pool.send(np.full(2, 3), np.arange(2, dtype=np.int32))
            pool.recv_blocking(timeout=30)
            for i in range(2):
                ref.step(i, 3)


@pytest.mark.parametrize(("env_id", "kwargs", "message"), [
    ("CoinrunEasy-v0", {"distribution_mode": "extreme"},
     "distribution_mode is 'extreme'; coinrun has easy, hard, exploration"),
    ("BigfishEasy-v0", {"distribution_mode": "exploration"}, "bigfish has easy, hard$"),
    ("BigfishEasy-v0", {"num_levels": -1}, "num_levels is -1, expected 0 to"),
    ("BigfishEasy-v0", {"start_level": 2**31 - 10, "num_levels": 20}, "start_level \\+ num"),
    ("MazeExploration-v0", {"num_levels": 5}, "exploration' sets num_levels=1"),
])
def test_bad_options_are_refused_with_a_message(env_id: str, kwargs: dict[str, Any],
                                                message: str) -> None:
    with pytest.raises(ValueError, match=message):
        aiopool.make(env_id, num_envs=1, **kwargs)


def test_procgens_own_kwargs_get_a_hint() -> None:
    with pytest.raises(TypeError, match="rand_seed.*make\\(\\)'s seed="):
        aiopool.make("BigfishEasy-v0", rand_seed=3)
    with pytest.raises(TypeError, match="env_name"):
        aiopool.make("BigfishEasy-v0", env_name="coinrun")
    with pytest.raises(ValueError, match="seeds up to 2147483647"):
        aiopool.make("BigfishEasy-v0", num_envs=2, seed=2**31 - 1)


def test_ids_are_envpools_and_procgens_gym_ids() -> None:
    expected = {f"{g.title()}{t}-v0" for g, t in itertools.product(GAMES, ("Easy", "Hard"))}
    assert expected <= set(IDS)
    assert len([i for i in IDS if not i.startswith("procgen-")]) == 50  # as EnvPool's
    assert {f"procgen-{g}-v0" for g in GAMES} <= set(IDS)
    with aiopool.make("CoinrunHard-v0", num_envs=1) as pool:
        assert pool.single_observation_space.shape == (64, 64, 3)
        assert pool.single_action_space.n == 15
        assert pool.spec.family == "procgen"


def test_without_the_library_make_says_how_to_get_it(tmp_path: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIOPOOL_PROCGEN_DIR", str(tmp_path))
    monkeypatch.setenv("AIOPOOL_PROCGEN_FETCH", "0")
    with pytest.raises(ImportError, match="python -m aiopool.procgen install"):
        aiopool.make("CoinrunEasy-v0", num_envs=1)


def test_a_wheel_with_another_hash_is_refused(tmp_path: Any) -> None:
    with pytest.raises(procgen.ProcgenNotInstalled, match="expected 0000"):
        procgen._download(f"gym3=={procgen.GYM3_VERSION}", procgen.GYM3_WHEEL, "0" * 64,
                          tmp_path)
