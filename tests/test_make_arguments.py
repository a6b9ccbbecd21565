"""What ``make``, ``send`` and the adapters take as arguments: numpy's scalars as Python's,
sizes in range, kwarg names suggested from those a user may pass, actions never reinterpreted,
and a process that lives on when threads or memory run out."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from contextlib import closing

import numpy as np
import pytest

import aiopool


def _rows(pool: aiopool.Pool, steps: int) -> list[np.ndarray]:
    pool.async_reset()
    out = []
    for _ in range(steps):
        batch = pool.recv_blocking(timeout=10)
        out.append(np.array(batch.obs[np.argsort(batch.env_id)]))
        batch.send(np.full((len(batch), 2), 0.7, dtype=np.float32))
    return out


def test_numpy_scalars_are_taken_as_python_numbers() -> None:
    """Hyper-parameter sweeps hand numpy scalars around: sizes and env kwargs take them as the
    Python values they hold (gymnasium's envs do), and the pool steps as with those."""
    as_numpy = {"gravity": np.float32(-9.0), "continuous": np.True_, "enable_wind": np.bool_(True),
                "wind_power": np.float64(5.0)}
    as_python = {"gravity": -9.0, "continuous": True, "enable_wind": True, "wind_power": 5.0}
    with aiopool.make("LunarLander-v3", num_envs=np.int64(2), batch_size=np.int32(2),
                      num_threads=np.int16(1), max_episode_steps=np.int64(30),
                      **as_numpy) as a, \
            aiopool.make("LunarLander-v3", num_envs=2, batch_size=2, num_threads=1,
                         max_episode_steps=30, **as_python) as b:
        assert a.spec.config == b.spec.config
        assert all(type(v) is type(b.spec.config[k]) for k, v in a.spec.config.items())
        assert (a.num_envs, a.spec.max_episode_steps) == (2, 30)
        for x, y in zip(_rows(a, 40), _rows(b, 40), strict=True):
            np.testing.assert_array_equal(x, y)
    with aiopool.make("FrozenLake-v1", is_slippery=np.False_, success_rate=np.float32(0.5),
                      reward_schedule=np.array([1, 0, 0])) as pool:
        assert pool.spec.config["reward_schedule"] == (1, 0, 0)
        assert pool.spec.config["is_slippery"] is False
    for adapter in (aiopool.make_gymnasium, aiopool.make_dm, aiopool.make_sb3):
        envs = adapter("CartPole-v1", num_envs=np.int64(3))
        assert envs.num_envs == 3 and type(envs.num_envs) is int
        envs.close()
    with pytest.raises(TypeError, match="expected a bool"):
        aiopool.make("FrozenLake-v1", is_slippery=np.float64(1.0))


@pytest.mark.parametrize("backend", ["threads", "processes"])
def test_max_episode_steps_is_gymnasium_s(backend: str) -> None:
    """``max_episode_steps=-1`` takes the time limit off, as ``gymnasium.make``'s does; 0 is
    refused as there (it meant "none" here, so a ``steps // skip`` of 0 ran endless episodes),
    on both backends alike."""
    with aiopool.make("CartPole-v1", num_envs=1, max_episode_steps=-1, backend=backend) as pool:
        assert pool.spec.max_episode_steps == 0  # the spec's "none"
        pool.async_reset(seed=0)
        pool.recv_blocking(timeout=10).release()
    with closing(aiopool.make_gymnasium("Taxi-v4", num_envs=1, max_episode_steps=-1,
                                        backend=backend)) as envs:
        assert envs.spec.max_episode_steps is None
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"expected an int >= 1, or -1 for no time limit"):
            aiopool.make("CartPole-v1", num_envs=1, max_episode_steps=bad, backend=backend)


def test_bool_kwargs_take_0_and_1_as_gymnasium_s_envs_do() -> None:
    """A config file or ``argparse`` gives a flag as 0 / 1; gymnasium's envs take it as its
    truth. Other ints are refused (a typo, not a flag)."""
    with aiopool.make("FrozenLake-v1", is_slippery=0) as a, \
            aiopool.make("FrozenLake-v1", is_slippery=np.int64(1)) as b:
        assert a.spec.config["is_slippery"] is False and b.spec.config["is_slippery"] is True
    with pytest.raises(TypeError, match=r"is 2, expected a bool \(or 0 / 1\)"):
        aiopool.make("FrozenLake-v1", is_slippery=2)


@pytest.mark.parametrize("size", [0, -1, 2**31, 10**12, True, 2.0])
def test_sizes_out_of_range_are_value_errors(size: object) -> None:
    with pytest.raises(ValueError, match=r"num_envs is .*expected a positive int \(at most "):
        aiopool.make("FrozenLake-v1", num_envs=size)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_envs is"):
        aiopool.make_gymnasium("FrozenLake-v1", num_envs=size)  # type: ignore[arg-type]


def test_num_threads_is_at_most_num_envs() -> None:
    with aiopool.make("CartPole-v1", num_envs=3, num_threads=64) as pool:
        assert pool.num_threads == 3


@pytest.mark.parametrize("adapter, hint", [
    (aiopool.make_gymnasium, "autoreset_mode="), (aiopool.make_dm, "dm_env"),
    (aiopool.make_sb3, "SB3"),
])
def test_the_adapters_say_they_set_autoreset_themselves(adapter: object, hint: str) -> None:
    with pytest.raises(TypeError, match=f"sets its pool's autoreset itself: .*{hint}"):
        adapter("CartPole-v1", 2, autoreset="same_step")  # type: ignore[operator]


def test_kwarg_suggestions_name_only_what_a_user_may_pass() -> None:
    """The config keys make() fills itself (the renderer's render_width, ...) are neither
    suggested nor listed; the rendering kwargs are."""
    for env_id, typo, meant in [("dmc/cheetah-run", "camera_idx", "camera_id"),
                                ("dmc/cheetah-run", "heigth", "height"),
                                ("HalfCheetah-v5", "camera_nam", "camera_name")]:
        with pytest.raises(TypeError) as e:
            aiopool.make(env_id, **{typo: 1})
        message = str(e.value)
        assert f"did you mean {meant!r}?" in message and "render_" not in message, message
        rendering = "camera_id" if env_id.startswith("dmc") else "camera_id, camera_name"
        assert f"rendering: {rendering}" in message, message
    with pytest.raises(TypeError, match="'camera_name' .not a rendering kwarg of dmc/cheetah-run"):
        aiopool.make("dmc/cheetah-run", render_mode="rgb_array", camera_name="side")
    with pytest.raises(TypeError, match="unexpected keyword argument 'render_width'; valid:"):
        aiopool.make("dmc/cheetah-run", render_mode="rgb_array", render_width=8)


def test_unsigned_actions_beyond_int64_are_named_as_given() -> None:
    with aiopool.make("FrozenLake-v1", num_envs=2) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=10)
        with pytest.raises(ValueError, match=r"actions\[1\] is 18446744073709551615, beyond "
                                             r"int64: out of Discrete\(4\)"):
            pool.send(np.array([1, 2**64 - 1], np.uint64))
        pool.send(np.array([1, 2], np.uint64))  # in range: taken as the values they hold
        assert sorted(pool.recv_blocking(timeout=10).env_id.tolist()) == [0, 1]


def _survives(code: str) -> str:
    """Run ``code`` in a child under a 3 GiB address-space limit; its stdout (it must exit 0)."""
    prelude = "import resource\nresource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_out_of_threads_is_a_python_error_and_the_process_lives_on() -> None:
    out = _survives("""
        import aiopool
        try:
            aiopool.make("FrozenLake-v1", num_envs=2000, num_threads=2000)  # 8 MiB stacks
        except RuntimeError as e:
            print("raised:", e)
        with aiopool.make("FrozenLake-v1", num_envs=4, num_threads=2) as pool:
            pool.async_reset()
            print("then:", len(pool.recv_blocking(timeout=10)))
    """)
    assert "raised: could not start worker thread" in out and "then: 4" in out, out


def test_the_control_suite_out_of_memory_at_make_is_a_python_error() -> None:
    """MuJoCo's allocation failure (mju_error, which its default handler ends the process
    with) is trapped at make as in a step."""
    out = _survives("""
        import aiopool
        try:
            aiopool.make("dmc/cartpole-balance", num_envs=1000)  # ~12 MiB each
        except RuntimeError as e:
            print("raised:", e)
        with aiopool.make("dmc/cartpole-balance", num_envs=2) as pool:
            pool.async_reset()
            print("then:", len(pool.recv_blocking(timeout=10)))
    """)
    assert "raised: MuJoCo: Could not allocate memory" in out and "then: 2" in out, out


def test_lunar_lander_s_wind_advice_warns_as_gymnasium_s() -> None:
    with pytest.warns(UserWarning, match=r"wind_power value is recommended to be between 0.0 "
                                         r"and 20.0, \(current value: 25.0\)"):
        aiopool.make("LunarLander-v3", enable_wind=True, wind_power=25.0).close()
    with pytest.warns(UserWarning, match="turbulence_power value is recommended .*nan"):
        aiopool.make("LunarLander-v3", turbulence_power=float("nan")).close()


def test_a_map_of_other_than_ascii_is_refused_as_such() -> None:
    with pytest.raises(ValueError, match="desc' is .*rows of ASCII characters expected"):
        aiopool.make("FrozenLake-v1", desc=["SF\u00e9", "FFG"])


def test_recv_spins_longer_where_a_core_is_left_free_for_it() -> None:
    """recv's default spin: 200 µs where the pool's threads leave a core free (the receiver
    then spins on a core of its own; batches of cheap steps arrive within it, and a parked
    receiver would cost the worker a wake-up), 20 µs where every core steps; a value given
    is kept either way."""
    import os

    cores = len(os.sched_getaffinity(0))
    with aiopool.make("CartPole-v1", num_envs=4, num_threads=max(1, cores - 1)) as pool:
        assert pool._spin_ns == (200_000 if cores > 1 else 20_000)
    with aiopool.make("CartPole-v1", num_envs=max(4, cores), num_threads=cores) as pool:
        assert pool._spin_ns == 20_000
    for threads in {1, cores}:
        with aiopool.make("CartPole-v1", num_envs=max(4, cores), num_threads=threads,
                          recv_spin_us=5) as pool:
            assert pool._spin_ns == 5_000


def test_a_rom_path_ale_cannot_load_is_an_error_not_an_exit(tmp_path: object) -> None:
    """ALE ends the process (exit 1, no exception, no ``finally``) on a file it cannot make a
    console of; ``make`` loads a user's ROM file in a child process first and raises."""
    from pathlib import Path

    bad = Path(str(tmp_path)) / "garbage.bin"
    bad.write_text("<xml>not a ROM</xml>")
    with pytest.raises(ValueError, match=r"ALE cannot load .*garbage\.bin as a ROM.*Unrecognized "
                                         r"cartridge"):
        aiopool.make("Pong-v5", rom_path=str(bad))
    from ale_py import roms

    good = Path(str(tmp_path)) / "pong.bin"
    good.write_bytes(Path(roms.get_rom_path("pong")).read_bytes())
    with aiopool.make("Pong-v5", rom_path=str(good)) as pool:
        pool.async_reset(seed=0)
        assert pool.recv_blocking(timeout=30).obs.shape == (1, 4, 84, 84)


def test_ale_py_s_own_id_names_the_native_one() -> None:
    """``ALE/Breakout-v5`` is ale-py's gymnasium env (raw frames, sticky actions); once ale_py
    was imported (aiopool imports it for its ROMs) it ran silently in worker processes, before
    that it was an unknown id. It now names the native ``Breakout-v5``, whatever was
    imported, and ``backend="processes"`` runs ale-py's env itself."""
    with pytest.raises(ValueError, match=r"'ALE/Breakout-v5' is ale_py's own gymnasium env; "
                                         r"aiopool's native Atari env of it is 'Breakout-v5'"):
        aiopool.make("ALE/Breakout-v5", num_envs=1)
    with pytest.raises(ValueError, match="native Atari env of it is 'Breakout-v5'"):
        aiopool.make_gymnasium("ALE/Breakout-v5", 1)
    with aiopool.make("ALE/Breakout-v5", num_envs=1, backend="processes") as pool:
        assert pool.backend == "processes"
        assert pool.single_observation_space.shape == (210, 160, 3)
    for unknown in ("ALE/Nonsense-v9", "ALE/NotAGame-v5"):  # the latter looks like a game id
        with pytest.raises(ValueError, match=f"unknown env id '{unknown}'"):
            aiopool.make(unknown)


def test_ale_py_s_vector_env_arguments_say_what_to_pass() -> None:
    """What an ``AtariVectorEnv`` user passes: 0 for default sizes, thread pinning, the
    continuous mode, gymnasium's autoreset values."""
    with pytest.raises(ValueError, match=r"num_threads is 0.*None for the default"):
        aiopool.make("Pong-v5", num_threads=0)
    with pytest.raises(TypeError, match=r"'thread_affinity_offset' \(drop it: aiopool does not"):
        aiopool.make("Pong-v5", thread_affinity_offset=-1)
    with pytest.raises(TypeError, match=r"'continuous' \(drop it: aiopool has no continuous"):
        aiopool.make("Pong-v5", continuous=False)
    with aiopool.make("CartPole-v1", autoreset="SameStep") as pool:
        assert pool.autoreset == "same_step"
    with pytest.raises(ValueError, match=r"autoreset is \['x'\], expected one of"):
        aiopool.make("CartPole-v1", autoreset=["x"])  # type: ignore[arg-type]
