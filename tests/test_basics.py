"""make(), list_envs(), spec and spaces, the Batch fields, seeding of the counting env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from helpers import counting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


def test_list_envs_has_counting() -> None:
    assert "Counting-v0" in aiopool.list_envs()


def test_spec_and_spaces() -> None:
    with counting(num_envs=4, batch_size=2, episode_length=7) as pool:
        assert pool.num_envs == 4 and pool.batch_size == 2 and pool.num_threads == 2
        assert pool.single_action_space == gym.spaces.Discrete(1000)
        assert pool.single_observation_space.shape == (4,)
        assert pool.single_observation_space.dtype == np.int64
        assert pool.spec.config["episode_length"] == 7
        assert [f.name for f in pool.spec.info] == ["draw", "events_parity"]


@pytest.mark.asyncio
async def test_batch_fields_and_views_are_read_only() -> None:
    with counting(num_envs=4, batch_size=4) as pool:
        pool.async_reset()
        batch = await pool.recv()
        assert sorted(batch.env_id.tolist()) == [0, 1, 2, 3]
        assert batch.obs.shape == (4, 4) and batch.obs.dtype == np.int64
        assert batch.reward.dtype == np.float64 and batch.terminated.dtype == np.bool_
        extra = {"env_error"} if pool.backend == "processes" else set()  # Python envs can raise
        assert set(batch.info) == {"elapsed_step", "episode_return", "episode_length", "draw",
                                   "events_parity", *extra}
        for a in (batch.obs, batch.reward, batch.env_id, batch.info["draw"]):
            assert not a.flags.writeable
            with pytest.raises(ValueError):
                a[0] = 1
        batch.send(np.arange(4) * 10)
        stepped = await pool.recv()
        by_env = dict(zip(stepped.env_id.tolist(), stepped.reward.tolist(), strict=True))
        assert by_env == {int(e): 10.0 * k for k, e in enumerate(batch.env_id)}  # row k's env
        assert np.all(stepped.info["elapsed_step"] == 1)


@pytest.mark.asyncio
async def test_seed_plus_i_matches_numpy_generator() -> None:
    # The counting env draws one uniform at each reset: env i seeded s draws what
    # np.random.default_rng(s + i) draws, and an unseeded reset continues that stream.
    with counting(num_envs=3, batch_size=3, seed=5) as pool:
        pool.async_reset()
        first = await pool.recv()
        order = np.argsort(first.env_id)
        rngs = [np.random.default_rng(5 + i) for i in range(3)]
        assert first.info["draw"][order].tolist() == [r.random() for r in rngs]
        pool.async_reset()
        again = await pool.recv()
        order = np.argsort(again.env_id)
        assert again.info["draw"][order].tolist() == [r.random() for r in rngs]
        pool.async_reset(seed=100)
        reseeded = await pool.recv()
        order = np.argsort(reseeded.env_id)
        assert reseeded.info["draw"][order].tolist() == [
            np.random.default_rng(100 + i).random() for i in range(3)]


@pytest.mark.asyncio
async def test_same_trajectories_whatever_num_threads() -> None:
    async def run(threads: int) -> list[np.ndarray]:
        with counting(num_envs=6, batch_size=6, num_threads=threads, seed=3,
                      episode_length=4) as pool:
            pool.async_reset()
            out = [np.array((await pool.recv()).info["draw"])]
            rng = np.random.default_rng(0)
            for _ in range(20):
                b = await pool.step(rng.integers(0, 1000, size=6))
                out.append(np.concatenate([b.obs.ravel(), b.reward, b.info["draw"]]))
            return out

    one, three = await run(1), await run(3)
    assert all(np.array_equal(a, b) for a, b in zip(one[1:], three[1:], strict=True))
    assert np.array_equal(np.sort(one[0]), np.sort(three[0]))


@pytest.mark.asyncio
async def test_step_returns_rows_ordered_by_env_id() -> None:
    with counting(num_envs=8, batch_size=4, num_threads=2) as pool:
        pool.async_reset()
        await pool.recv()
        await pool.recv()
        batch = await pool.step(np.arange(8))
        assert batch.env_id.tolist() == list(range(8))
        assert batch.reward.tolist() == [float(i) for i in range(8)]
        assert not batch.obs.flags.writeable


def test_repr() -> None:
    with counting(num_envs=2) as pool:
        assert pool.spec.id in repr(pool) and "open" in repr(pool)
        assert pool.spec.id == ("CountingEnv" if pool.backend == "processes" else "Counting-v0")
    assert "closed" in repr(pool)


@pytest.mark.asyncio
async def test_flush_hands_out_a_short_batch_and_batches_go_on_after_it() -> None:
    with counting(num_envs=4, batch_size=4, step_ns=30_000_000) as pool:
        pool.async_reset()
        first = await pool.recv(timeout=5)
        first.send(np.arange(4))
        await pool.recv(timeout=5)
        assert pool.flush(timeout=5) == 0  # every batch was full
        pool.send(np.array([7, 8, 9]), [0, 1, 2])
        assert pool.flush(timeout=0.001) == -1  # steps take 30 ms: still in flight
        assert pool.flush(timeout=5) == 3
        short = await pool.recv(timeout=5)
        assert sorted(short.env_id.tolist()) == [0, 1, 2]
        assert sorted(short.reward.tolist()) == [7.0, 8.0, 9.0]
        with pytest.raises(aiopool.NothingInFlight):
            await pool.recv(timeout=5)
        pool.send(np.ones(4, np.int64))
        full = await pool.recv(timeout=5)
        assert len(full) == 4 and sorted(full.env_id.tolist()) == [0, 1, 2, 3]


@pytest.mark.asyncio
async def test_each_flush_publishes_its_own_short_batch() -> None:
    """A second flush before the first one's short batch is received publishes a second short
    batch (only the rows since the first), and receives take them in flush order."""
    with counting(num_envs=4, batch_size=4, num_threads=1, step_ns=1_000_000) as pool:
        pool.async_reset()
        (await pool.recv(timeout=5)).release()
        pool.send(np.array([5]), [0])
        assert pool.flush(timeout=5) == 1
        pool.send(np.array([6, 7]), [1, 2])
        assert pool.flush(timeout=5) == 2
        assert pool.flush(timeout=5) == 0  # nothing new since
        first = await pool.recv(timeout=5)
        second = await pool.recv(timeout=5)
        assert first.env_id.tolist() == [0] and first.reward.tolist() == [5.0]
        assert sorted(second.env_id.tolist()) == [1, 2]
        assert sorted(second.reward.tolist()) == [6.0, 7.0]


_WITHOUT = """
import sys

blocked = set(sys.argv[1].split(","))


class Block:  # these packages are not installed, as far as this process can tell
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


sys.meta_path.insert(0, Block())
import aiopool

for what in sys.argv[2:]:
    try:
        if what.startswith("aiopool."):
            exec(f"import {what}")
        elif what.startswith("render:"):
            aiopool.make(what[len("render:"):], render_mode="rgb_array")
        else:
            getattr(aiopool, what)
        print("no error:", what)
    except ImportError as e:
        print(e)
"""


@pytest.mark.parametrize(("blocked", "what", "says"), [
    ("dm_env", "make_dm", 'aiopool.make_dm needs dm-env>=1.6: pip install "dm-env>=1.6"'),
    ("stable_baselines3", "make_sb3", "aiopool.make_sb3 needs stable-baselines3>=2.3"),
    ("grpc", "aiopool.inference.kserve", "aiopool.inference.kserve needs grpcio>=1.67, "
                                         "protobuf>=5.27"),
    ("mlserver", "aiopool.inference.mlserver_runtime", "needs mlserver==1.7.1"),
    ("Box2D", "render:LunarLander-v3", "Rendering LunarLander-v3 (gymnasium's drawing code) "
                                      "needs pygame-ce>=2.1.3, box2d==2.3.10"),
])
def test_a_missing_optional_dependency_says_what_to_install(blocked: str, what: str,
                                                            says: str) -> None:
    """A feature whose packages are not installed names them and aiopool's extra (it was a bare
    ``No module named ...``, or gymnasium's advice for its own extras)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _WITHOUT, blocked, what], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert says in out and "extra" in out, out
