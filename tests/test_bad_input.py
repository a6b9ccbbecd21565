"""Bad input gets a clear error and the pool keeps working afterwards."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import CountingEnv, Ledger, counting

import aiopool

# The pool contract: each test runs on native threads and on worker processes.
pytestmark = pytest.mark.usefixtures("backend")


def test_make_rejects_unknown_ids_kwargs_and_sizes() -> None:
    with pytest.raises(ValueError, match="unknown env id 'CartPole-v9'.*did you mean"):
        aiopool.make("CartPole-v9")
    with pytest.raises(TypeError, match="unexpected keyword argument 'gravity'.*valid: "
                                        "sutton_barto_reward"):
        aiopool.make("CartPole-v1", gravity=3.0)
    with pytest.raises(TypeError, match="expected a bool"):
        aiopool.make("CartPole-v1", sutton_barto_reward=2)
    with pytest.raises(ValueError, match="batch_size"):
        aiopool.make("CartPole-v1", num_envs=2, batch_size=3)
    with pytest.raises(ValueError, match="num_envs"):
        aiopool.make("CartPole-v1", num_envs=0)
    with pytest.raises(ValueError, match="autoreset"):
        aiopool.make("CartPole-v1", autoreset="sometimes")
    with pytest.raises(ValueError, match="seed"):
        aiopool.make("CartPole-v1", seed=-1)


def test_an_env_id_that_is_neither_an_id_nor_a_factory_says_so() -> None:
    import gymnasium as gym

    for env_id in (None, b"CartPole-v1", 3):
        with pytest.raises(TypeError, match="expected a registered id .* or a factory"):
            aiopool.make(env_id)  # type: ignore[arg-type]
    env = gym.make("CartPole-v1")
    with pytest.raises(TypeError, match="an env already made: pass a factory"):
        aiopool.make(env)  # type: ignore[arg-type]
    env.close()


def test_bad_sends_leave_the_pool_usable() -> None:
    with counting(num_envs=4, batch_size=4, num_actions=5) as pool:
        with pytest.raises(ValueError, match="has not been reset yet"):
            pool.send(np.zeros(4, dtype=np.int64))
        ledger = Ledger(4)
        pool.async_reset()
        ledger.record(pool.recv_blocking(timeout=5))
        bad = [
            (np.zeros(3, dtype=np.int64), None, r"shape \(3,\), expected \(4,\)"),
            (np.zeros((4, 1), dtype=np.int64), None, r"shape \(4, 1\)"),
            (np.zeros(4, dtype=np.float32), None, "dtype float32, expected integers"),
            (np.array([0, 1, 2, 5]), None, r"actions\[3\] is 5, expected 0 <= action < 5"),
            (np.array([0, -1, 2, 3]), None, r"actions\[1\] is -1"),
            (np.zeros(2, dtype=np.int64), [0, 4], "env_ids contains 4"),
            (np.zeros(2, dtype=np.int64), [1, 1], "names env 1 twice"),
            (np.zeros(2, dtype=np.int64), [[0, 1]], "1-d array"),
            (np.zeros(2, dtype=np.int64), [0.0, 1.0], "integers"),
            (["a", "b", "c", "d"], None, "dtype <U1"),
        ]
        for actions, ids, match in bad:
            with pytest.raises(ValueError, match=match):
                pool.send(actions, ids)
        pool.send(np.zeros(2, dtype=np.int64), [0, 1])
        with pytest.raises(ValueError, match="env 1 still has an action in flight"):
            pool.send(np.zeros(2, dtype=np.int64), [1, 2])
        with pytest.raises(ValueError, match="env 1 still has an action in flight"):
            pool.send(np.array([9, 9]), [1, 2])  # the envs' state is said before the actions'
        with pytest.raises(ValueError, match="still has an action in flight"):
            pool.async_reset(env_ids=[0])
        with pytest.raises(ValueError, match="still has an action in flight"):
            pool.async_reset(seed=7, env_ids=[2, 0])  # the seed is not staged either
        with pytest.raises(ValueError, match="env 1 still has an action in flight"):
            pool.async_reset(seed=[7, None], env_ids=[2, 1])  # nor env 2's, beside a None
        pool.send([1, 2], [2, 3])  # lists and small ints are fine
        batch = pool.recv_blocking(timeout=5)
        ledger.record(batch)
        assert sorted(batch.reward.tolist()) == [0.0, 0.0, 1.0, 2.0]
        assert (batch.info["elapsed_step"] == 1).all()  # each env stepped, none reset
        pool.async_reset()  # unseeded: env 2's random stream goes on, no seed 7 staged
        reset = pool.recv_blocking(timeout=5)
        draw = reset.info["draw"][reset.env_id == 2]
        assert draw != CountingEnv().reset(seed=7)[1]["draw"]


def test_a_batch_is_sent_once() -> None:
    """A loop that keeps last round's batch and sends it again would step its envs on
    observations they have left, once they are idle again (the pool alone cannot tell); a
    batch's second send is refused, and the pool goes on. A released batch may be sent."""
    with counting(num_envs=8, batch_size=4, num_actions=5) as pool:
        pool.async_reset()
        first, second = pool.recv_blocking(timeout=5), pool.recv_blocking(timeout=5)
        first.send(np.ones(4, dtype=np.int64))
        again = pool.recv_blocking(timeout=5)  # first's envs, idle again
        assert sorted(again.env_id.tolist()) == sorted(first.env_id.tolist())
        with pytest.raises(ValueError, match=r"was already sent.*pool\.send\(actions, batch"):
            first.send(np.zeros(4, dtype=np.int64))
        second.release()
        again.send(np.zeros(4, dtype=np.int64))  # the pool goes on
        second.send(np.zeros(4, dtype=np.int64))
        got = sorted(pool.recv_blocking(timeout=5).env_id.tolist()
                     + pool.recv_blocking(timeout=5).env_id.tolist())
        assert got == list(range(8))


@pytest.mark.asyncio
async def test_nothing_in_flight_names_the_rows_the_task_itself_holds() -> None:
    """A loop that receives again before sending what it holds: the error says so."""
    with counting(num_envs=4, batch_size=2, num_actions=5) as pool:
        pool.async_reset()
        held = [await pool.recv(timeout=5), await pool.recv(timeout=5)]
        with pytest.raises(aiopool.NothingInFlight, match=r"this task holds 4 rows of batches "
                                                          r"it received and has not sent"):
            await pool.recv(timeout=5)
        for batch in held:
            batch.send(np.zeros(2, dtype=np.int64))
        assert len(await pool.recv(timeout=5)) == 2


def test_continuous_actions_must_not_be_nan() -> None:
    with aiopool.make("Pendulum-v1", num_envs=2) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=5)
        with pytest.raises(ValueError, match=r"actions\[1\] contains nan.*must not be NaN"):
            pool.send(np.array([[0.0], [np.nan]], dtype=np.float32))
        with pytest.raises(ValueError, match=r"shape \(2,\), expected \(2, 1\)"):
            pool.send(np.zeros(2, dtype=np.float32))
        pool.send(np.array([[100.0], [-100.0]]))  # out of range: clipped by the env, as gymnasium
        batch = pool.recv_blocking(timeout=5)
        assert np.all(np.isfinite(batch.obs))
        pool.send(np.array([[np.inf], [-np.inf]], dtype=np.float32))  # clipped alike
        batch = pool.recv_blocking(timeout=5)
        assert np.all(np.isfinite(batch.obs))
        with warnings.catch_warnings():  # beyond float32: inf, clipped, and no numpy warning
            warnings.simplefilter("error")
            pool.send(np.array([[1e40], [-1e40]]))
        batch = pool.recv_blocking(timeout=5)
        assert np.all(np.isfinite(batch.obs))


@pytest.mark.asyncio
async def test_step_needs_idle_envs_and_divisible_batches() -> None:
    with counting(num_envs=4, batch_size=3) as pool:
        with pytest.raises(ValueError, match="divisible"):
            await pool.step(np.zeros(4, dtype=np.int64))
    with counting(num_envs=4, batch_size=2) as pool:
        pool.async_reset()
        with pytest.raises(ValueError, match="idle"):
            await pool.step(np.zeros(4, dtype=np.int64))


@pytest.mark.parametrize("order", [">", "<"])
def test_arrays_of_either_byte_order_are_converted_never_reinterpreted(order: str) -> None:
    with counting(num_envs=2, batch_size=1, num_threads=1, num_actions=1000) as pool:
        pool.async_reset()
        for _ in range(2):
            pool.recv_blocking(timeout=5)
        pool.send(np.array([7], dtype=f"{order}i8"), np.array([1], dtype=f"{order}i4"))
        batch = pool.recv_blocking(timeout=5)
        assert batch.env_id.tolist() == [1] and batch.reward.tolist() == [7.0]
        with pytest.raises(ValueError, match="expected 0 <= action < 1000"):
            pool.send(np.array([2**56], dtype=f"{order}i8"), [1])
        pool.send(np.array([5], dtype=f"{order}i8"), [1])  # the refused send changed nothing
        assert pool.recv_blocking(timeout=5).reward.tolist() == [5.0]
    with aiopool.make("Pendulum-v1", num_envs=1, batch_size=1, num_threads=1, seed=0) as pool, \
            aiopool.make("Pendulum-v1", num_envs=1, batch_size=1, num_threads=1, seed=0) as ref:
        for p in (pool, ref):
            p.async_reset()
            p.recv_blocking(timeout=5)
        pool.send(np.array([[1.5]], dtype=f"{order}f4"))
        ref.send(np.array([[1.5]], dtype=np.float32))
        assert np.array_equal(pool.recv_blocking(timeout=5).obs, ref.recv_blocking(timeout=5).obs)


def test_odd_arrays_are_converted_or_refused() -> None:
    with counting(num_envs=4, batch_size=2, num_threads=1) as pool:
        pool.async_reset()
        for _ in range(2):
            pool.recv_blocking(timeout=5)
        strided = np.array([3, 0, 4, 0], dtype=np.int64)[::2]
        pool.send(strided, np.array([2, 0, 3, 0], dtype=np.int32)[::2])
        batch = pool.recv_blocking(timeout=5)
        assert dict(zip(batch.env_id.tolist(), batch.reward.tolist(), strict=True)) == \
            {2: 3.0, 3: 4.0}
        for actions, ids, match in [
            (np.array([True, False]), [0, 1], "expected integers"),
            (np.array([1, 2], dtype=object), [0, 1], "expected integers"),
            (np.zeros(2, np.int64), np.array([True, False]), "env_ids"),
            (np.zeros(2, np.int64), np.array([0, 1], dtype=object), "env_ids"),
            (np.zeros(2, np.int64), np.array([0.0, 1.0]), "env_ids"),
        ]:
            with pytest.raises(ValueError, match=match):
                pool.send(actions, ids)
        pool.send(np.zeros(0, np.int64), np.zeros(0, np.int32))  # nothing to step: a no-op
        pool.send(np.ones(2, np.int64), [0, 1])
        assert sorted(pool.recv_blocking(timeout=5).reward.tolist()) == [1.0, 1.0]


def test_an_unknown_kwarg_suggests_the_closest_valid_name() -> None:
    with pytest.raises(TypeError, match="'reward_clip'; did you mean 'reward_clipping'"):
        aiopool.make("Pong-v5", reward_clip=True)
    with pytest.raises(TypeError, match="'ctrl_cost_weigth'; did you mean 'ctrl_cost_weight'"):
        aiopool.make("Hopper-v5", ctrl_cost_weigth=0.1)
    with pytest.raises(TypeError, match="'zzz'; valid: sutton_barto_reward"):
        aiopool.make("CartPole-v1", zzz=1)
