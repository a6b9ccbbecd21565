"""The seeding contract: env ``i`` of ``aiopool.make(id, num_envs=N, seed=s)`` draws exactly what
``gymnasium.make(id)`` draws after ``reset(seed=s + i)``; an unseeded ``async_reset()`` continues
each env's stream as gymnasium's unseeded ``reset()`` does; ``async_reset(seed=t)`` re-seeds env
``i`` to ``t + i``. Classic-control resets are uniform draws from numpy's PCG64, so equal reset
observations mean an equal stream."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import pytest

import aiopool

NUM_ENVS = 3
# CartPole draws 4 uniforms per reset, Pendulum 2 (from array bounds), MountainCar 1, Acrobot 4
# (then rounds them to float32).
ENV_IDS = ["CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0",
           "Acrobot-v1"]
SEEDS = [0, 7, 2**31 + 12345]


async def _reset_obs(pool: aiopool.Pool, seed: int | None = None) -> npt.NDArray[np.float32]:
    pool.async_reset(seed=seed)
    batch = await pool.recv()
    return np.asarray(batch.obs)[np.argsort(batch.env_id)]


def _assert_same(got: npt.NDArray[np.float32], expected: list[npt.NDArray[np.float32]],
                 what: str) -> None:
    for i, exp in enumerate(expected):
        assert got[i].tobytes() == exp.tobytes(), (
            f"{what}: env {i} reset to {got[i].tolist()}, gymnasium to {exp.tolist()}")


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("env_id", ENV_IDS)
async def test_resets_draw_what_gymnasium_draws(env_id: str, seed: int) -> None:
    envs = [gym.make(env_id) for _ in range(NUM_ENVS)]
    with aiopool.make(env_id, num_envs=NUM_ENVS, num_threads=2, seed=seed) as pool:
        first = await _reset_obs(pool)
        _assert_same(first, [e.reset(seed=seed + i)[0] for i, e in enumerate(envs)],
                     f"make(seed={seed})")

        for k in range(3):
            again = await _reset_obs(pool)
            _assert_same(again, [e.reset()[0] for e in envs], f"unseeded reset {k + 1}")

        reseed = seed + 1000
        reseeded = await _reset_obs(pool, seed=reseed)
        _assert_same(reseeded, [e.reset(seed=reseed + i)[0] for i, e in enumerate(envs)],
                     f"async_reset(seed={reseed})")
        after = await _reset_obs(pool)
        _assert_same(after, [e.reset()[0] for e in envs], "unseeded reset after re-seeding")


@pytest.mark.asyncio
async def test_envs_of_one_pool_get_consecutive_seeds() -> None:
    with aiopool.make("CartPole-v1", num_envs=NUM_ENVS, num_threads=2, seed=5) as a, \
         aiopool.make("CartPole-v1", num_envs=1, num_threads=1, seed=7) as b:
        obs_a = await _reset_obs(a)
        obs_b = await _reset_obs(b)
        assert obs_a[2].tobytes() == obs_b[0].tobytes()
        assert obs_a[0].tobytes() != obs_a[1].tobytes()


def test_standard_normal_is_numpys_ziggurat() -> None:
    """The MuJoCo envs' standard_normal: 200k draws (the ziggurat's slow paths included) equal
    numpy's Generator.standard_normal on the same PCG64 stream, bit for bit."""
    from aiopool._native import _mujoco  # type: ignore[attr-defined]
    from aiopool.pool import seed_states

    for seed in (0, 12345, 2**40 + 3):
        state = seed_states([seed], 1)[0]
        got = np.asarray(_mujoco._standard_normal_draws([int(x) for x in state], 200_000))
        want = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed))).standard_normal(
            200_000)
        assert got.tobytes() == want.tobytes(), (
            f"seed {seed}: first difference at {int(np.flatnonzero(got != want)[0])}")


def test_integers_are_numpys_bounded_draws() -> None:
    """The toy-text envs' Generator.integers(0, n) (Taxi's fickle passenger, np_random.choice of
    a list): numpy's Lemire draws on buffered 32-bit halves, interleaved with 1-element and
    2**32 bounds (which draw nothing and a bare 32-bit half), on one stream, bit for bit."""
    from aiopool._native import _toy_text  # type: ignore[attr-defined]
    from aiopool.pool import seed_states

    bounds_rng = np.random.default_rng(0)
    for seed in range(100):
        bounds = [int(b) for b in bounds_rng.integers(1, 50, size=40)]
        bounds += [1, 3, 2**32, 2**31 + 5, 13, 2**32 - 1, 7]
        state = seed_states([seed], 1)[0]
        got = _toy_text._integers_draws([int(x) for x in state], bounds)
        generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        assert got == [int(generator.integers(0, b)) for b in bounds], f"seed {seed}"


def test_per_env_seed_lists_mean_what_gymnasium_means() -> None:
    def first_obs(seed: int) -> np.ndarray:
        return gym.make("CartPole-v1").reset(seed=seed)[0]

    with aiopool.make("CartPole-v1", num_envs=4, batch_size=4, num_threads=1, seed=100) as pool:
        pool.async_reset(seed=[3, 0, 2**40, None])  # None: env 3 keeps its seed from make
        batch = pool.recv_blocking(timeout=5)
        obs = dict(zip(batch.env_id.tolist(), np.array(batch.obs), strict=True))
        for env, seed in {0: 3, 1: 0, 2: 2**40, 3: 103}.items():
            assert obs[env].tobytes() == first_obs(seed).tobytes(), f"env {env}, seed {seed}"
        pool.async_reset(seed=[0, 0], env_ids=[3, 1])
        assert pool.flush(timeout=5) == 2  # a short batch of the two
        batch = pool.recv_blocking(timeout=5)
        assert sorted(batch.env_id.tolist()) == [1, 3]
        for row in np.array(batch.obs):
            assert row.tobytes() == first_obs(0).tobytes()
        with pytest.raises(ValueError, match="one per env in env_ids"):
            pool.async_reset(seed=[1, 2, 3], env_ids=[0, 2])
        with pytest.raises(ValueError, match=r"seed\[0\] is -2"):
            pool.async_reset(seed=[-2, 1], env_ids=[0, 2])


def test_atari_seeds_stay_c_ints() -> None:
    with aiopool.make("Pong-v5", num_envs=2, batch_size=2, num_threads=1) as pool, \
            pytest.raises(ValueError, match="seeds up to 2147483647"):
        pool.async_reset(seed=[0, 2**31])



def test_random_interval_and_shuffle_are_numpys() -> None:
    """minigrid's Crossing envs shuffle lists: Generator.shuffle is Fisher-Yates over numpy's
    random_interval (masked rejection on buffered 32-bit draws). Shuffles of many lengths, one
    after another on one stream, equal numpy's ``shuffle`` of a list, bit for bit; and single
    interval draws for many maxima (powers of two and their neighbours, where the mask's
    rejection rate is highest and lowest) equal the first swap of numpy's shuffle of
    ``arange(max + 1)``, which leaves ``random_interval(max)`` at position ``max``."""
    from aiopool._native import _minigrid  # type: ignore[attr-defined]
    from aiopool.pool import seed_states

    sizes_rng = np.random.default_rng(1)
    maxima = sorted({1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 255, 256, 257, 2**16 - 1, 2**16 + 1,
                     2**20 - 1, 2**20, 2**20 + 1})
    for seed in range(200):
        state = [int(x) for x in seed_states([seed], 1)[0]]
        sizes = [int(n) for n in sizes_rng.integers(0, 40, size=12)] + [1, 2, 3, 64, 65, 1000]
        generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        want = []
        for n in sizes:
            x = list(range(n))
            generator.shuffle(x)
            want.append(x)
        assert _minigrid._shuffles(state, sizes) == want, f"seed {seed}"
        for m in [*maxima, int(sizes_rng.integers(1, 2**20))] if seed < 20 else []:
            generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
            perm = np.arange(m + 1)
            generator.shuffle(perm)
            assert _minigrid._interval_draws(state, [m]) == [int(perm[m])], (
                f"seed {seed}, max {m}")
