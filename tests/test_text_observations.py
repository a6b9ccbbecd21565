"""String observations on the process backend: gymnasium ``Text`` spaces (and other spaces of
strings, such as minigrid's ``MissionSpace``) travel as fixed-width numpy strings, one per row;
a string a row cannot hold as it came is an env error; minigrid's and BabyAI's envs step as
gymnasium's ``SyncVectorEnv`` steps them, seed for seed, directly and through the adapter."""

from __future__ import annotations

import string
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aiopool
from aiopool.spec import TEXT_WIDTH

WORDS = gym.spaces.Text(max_length=8, charset=string.ascii_lowercase + " ")


def _word(env_index: int, t: int) -> str:
    """The word env ``env_index`` says at step ``t``: its length changes with both."""
    return ("ab" * 4)[: 1 + (env_index + t) % 8]


class Says(gym.Env[Any, np.int64]):
    """Observes a word (``WORDS``) that depends on its seed and step; action 1 makes it say
    something its space does not hold: too long (``bad="long"``) or outside the charset."""

    def __init__(self, structure: str = "text", bad: str = "long") -> None:
        self.structure, self.bad = structure, bad
        self.observation_space: gym.Space[Any] = {
            "text": WORDS,
            "dict": gym.spaces.Dict({"word": WORDS, "t": gym.spaces.Discrete(100)}),
            "tuple": gym.spaces.Tuple((gym.spaces.Discrete(100), WORDS)),
        }[structure]
        self.action_space = gym.spaces.Discrete(2)
        self.who = self.t = 0

    def _obs(self, word: str) -> Any:
        if self.structure == "dict":
            return {"word": word, "t": self.t}
        if self.structure == "tuple":
            return self.t, word
        return word

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        if seed is not None:  # an autoreset keeps the env's word
            self.who = seed % 10
        self.t = 0
        return self._obs(_word(self.who, 0)), {}

    def step(self, action: np.int64) -> Any:
        self.t += 1
        word = _word(self.who, self.t)
        if action == 1:
            word = {"long": "abababab" + "x", "charset": "ab!", "nul": "ab\0",
                    "type": b"ab"}[self.bad]  # type: ignore[assignment]
        return self._obs(word), 1.0, False, self.t >= 5, {}


def _words(pool_obs: Any, structure: str) -> np.ndarray:
    return {"text": lambda o: o, "dict": lambda o: o["word"], "tuple": lambda o: o[1]}[
        structure](pool_obs)


@pytest.mark.asyncio
@pytest.mark.parametrize("structure", ["text", "dict", "tuple"])
async def test_text_observations_arrive_as_numpy_strings(structure: str) -> None:
    with aiopool.make(Says, num_envs=3, num_workers=2, seed=0, structure=structure) as pool:
        assert pool.single_observation_space == Says(structure).observation_space
        pool.async_reset()
        batch = await pool.recv()
        for _ in range(8):  # through the episode end at step 5 (next_step: a reset row)
            words = _words(batch.obs, structure)
            assert words.dtype == np.dtype("<U8") and words.shape == (3,)
            assert not words.flags.writeable
            elapsed = batch.info["elapsed_step"]
            assert words.tolist() == [_word(int(i), int(e))
                                      for i, e in zip(batch.env_id, elapsed, strict=True)]
            batch = await pool.step(np.zeros(3, np.int64))


@pytest.mark.asyncio
@pytest.mark.parametrize("bad", ["long", "charset", "nul", "type"])
async def test_a_string_its_space_does_not_hold_is_an_env_error_not_cut(bad: str) -> None:
    with aiopool.make(Says, num_envs=2, num_workers=1, seed=0, structure="dict",
                      bad=bad) as pool:
        pool.async_reset()
        (await pool.recv()).send(np.array([0, 1]))
        with pytest.raises(aiopool.EnvError, match=r"Says: observation\['word'\] ") as caught:
            await pool.recv()
        err = caught.value
        why = {"long": "has 9 characters, more than the 8 a batch holds",
               "charset": "outside the space's charset: '!'",
               "nul": "ends in NUL characters", "type": "is bytes b'ab', expected a str"}[bad]
        assert err.env_ids == [1] and why in str(err) and why in pool.env_error(1)
        assert str(WORDS) in str(err)  # the space, named
        assert err.batch is not None and err.batch.info["env_error"].tolist() == (
            err.batch.env_id == 1).tolist()
        err.batch.send(np.zeros(2, np.int64))  # env 1 resets on its next send; the pool goes on
        again = await pool.recv()
        words = dict(zip(again.env_id.tolist(), again.obs["word"].tolist(), strict=True))
        assert words == {0: _word(0, 2), 1: _word(1, 0)}
        assert not again.info["env_error"].any()


class Mission(gym.Env[Any, np.int64]):
    """minigrid's ``MissionSpace`` (a space of str with no maximum) on its own; action n > 0
    says a mission of n characters."""

    def __init__(self) -> None:
        from minigrid.core.mission import MissionSpace

        self.observation_space = MissionSpace(mission_func=lambda: "go")
        self.action_space = gym.spaces.Discrete(1000)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        return "go", {}

    def step(self, action: np.int64) -> Any:
        return "g" * int(action) if action else "go", 0.0, False, False, {}


@pytest.mark.asyncio
async def test_a_space_of_strings_without_a_maximum_holds_TEXT_WIDTH_characters() -> None:
    pytest.importorskip("minigrid", reason="needs minigrid: pip install -e '.[test]'")
    with aiopool.make(Mission, num_envs=2, num_workers=1) as pool:
        pool.async_reset()
        assert (await pool.recv()).obs.dtype == np.dtype(f"<U{TEXT_WIDTH}")
        batch = await pool.step(np.array([TEXT_WIDTH, 3]))
        assert batch.obs.tolist() == ["g" * TEXT_WIDTH, "ggg"]
        with pytest.raises(aiopool.EnvError, match=f"has {TEXT_WIDTH + 1} characters, more "
                           f"than the {TEXT_WIDTH}.*gymnasium.spaces.Text"):
            await pool.step(np.array([TEXT_WIDTH + 1, 0]))


# -- minigrid and BabyAI against gymnasium's SyncVectorEnv ------------------------------------

# (id, steps): steps past the first episode's max_steps (Empty-5x5 100, DoorKey-5x5 250,
# GoToLocal 64), so that every env's episodes end (mostly truncated, some reach the goal).
MINIGRID = [("MiniGrid-Empty-5x5-v0", 130), ("MiniGrid-DoorKey-5x5-v0", 260),
            ("BabyAI-GoToLocal-v0", 140)]
NUM_ENVS = 3


def _reference(env_id: str, mode: str = "NextStep") -> gym.vector.SyncVectorEnv:
    pytest.importorskip("minigrid", reason="needs minigrid: pip install -e '.[test]'")
    return gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * NUM_ENVS, autoreset_mode=mode)


def _actions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mostly forward (2), so that some episodes reach the goal; all 7 actions now and then."""
    return np.where(rng.random(n) < 0.5, 2, rng.integers(0, 7, n))


@pytest.mark.asyncio
@pytest.mark.parametrize(("env_id", "steps"), MINIGRID, ids=[i for i, _ in MINIGRID])
async def test_minigrid_steps_as_gymnasium_does_seed_for_seed(env_id: str, steps: int) -> None:
    """Every row of every step, next_step autoreset: image, direction, mission, reward,
    terminated and truncated equal to SyncVectorEnv's over the same seeds."""
    ref = _reference(env_id)
    with aiopool.make(env_id, num_envs=NUM_ENVS, seed=5, num_workers=2,
                      backend="processes") as pool:
        assert pool.single_observation_space == ref.single_observation_space
        want, _ = ref.reset(seed=5)
        pool.async_reset()
        first = await pool.recv()
        order = np.argsort(first.env_id)
        got = {key: value[order] for key, value in first.obs.items()}
        rng = np.random.default_rng(0)
        ended = np.zeros(NUM_ENVS, np.int64)
        for t in range(steps + 1):
            assert got["mission"].dtype.kind == "U"
            assert got["mission"].tolist() == list(want["mission"]), t
            assert np.array_equal(got["image"], want["image"]), t
            assert np.array_equal(got["direction"], want["direction"]), t
            if t == steps:
                break
            actions = _actions(rng, NUM_ENVS)
            batch = await pool.step(actions)
            want, reward, terminated, truncated, _ = ref.step(actions)
            assert np.array_equal(batch.reward, reward), t
            assert np.array_equal(batch.terminated, terminated), t
            assert np.array_equal(batch.truncated, truncated), t
            ended += terminated | truncated
            got = batch.obs
        assert ended.min() >= 1  # every env's episode ended (and the next one went on)
    ref.close()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_make_gymnasium_gives_minigrid_as_sync_vector_env_does(mode: str) -> None:
    """Spaces equal, missions as tuples of str, final_obs of same_step too; and a partial
    reset (reset_mask) keeps the other envs' missions."""
    env_id = "MiniGrid-DoorKey-5x5-v0"
    ref = _reference(env_id, mode)
    envs = aiopool.make_gymnasium(env_id, NUM_ENVS, autoreset_mode=mode, backend="processes",
                                  num_workers=2)
    try:
        assert envs.single_observation_space == ref.single_observation_space
        assert envs.observation_space == ref.observation_space
        got, _ = envs.reset(seed=11)
        want, _ = ref.reset(seed=11)
        rng = np.random.default_rng(1)
        finals = 0
        for t in range(260):
            assert isinstance(got["mission"], tuple) and got["mission"] == want["mission"], t
            assert all(type(m) is str for m in got["mission"])
            assert np.array_equal(got["image"], want["image"]), t
            assert np.array_equal(got["direction"], want["direction"]), t
            assert envs.observation_space.contains(got)
            actions = _actions(rng, NUM_ENVS)
            got, reward, term, trunc, info = envs.step(actions)
            want, reward_ref, term_ref, trunc_ref, info_ref = ref.step(actions)
            assert np.array_equal(reward, reward_ref) and np.array_equal(term, term_ref)
            assert np.array_equal(trunc, trunc_ref), t
            assert ("final_obs" in info) == ("final_obs" in info_ref), t
            if "final_obs" in info:
                finals += 1
                for mine, theirs in zip(info["final_obs"], info_ref["final_obs"], strict=True):
                    assert (mine is None) == (theirs is None)
                    if mine is not None:
                        assert type(mine["mission"]) is str
                        assert mine["mission"] == theirs["mission"]
                        assert mine["direction"] == theirs["direction"]
                        assert np.array_equal(mine["image"], theirs["image"])
        assert finals >= (1 if mode == "SameStep" else 0)
        mask = np.array([False, True, False])
        got, _ = envs.reset(seed=[None, 40, None], options={"reset_mask": mask})
        want, _ = ref.reset(seed=[None, 40, None], options={"reset_mask": mask})
        assert got["mission"] == want["mission"]
        assert np.array_equal(got["image"], want["image"])
    finally:
        envs.close()
        ref.close()
