"""A MuJoCo error (mju_error) ends only the episode of the env that raised it, never the process.

The trigger is reproducible: Ant-v5 with `<size memory="16K"/>` overflows MuJoCo's stack once
its legs touch the floor with enough contacts, at different steps for different envs.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np
import pytest

import aiopool

ASSETS = Path(gym.__file__).parent / "envs" / "mujoco" / "assets"
NUM_ENVS, STEPS = 4, 300


def _ant_with_memory(tmp_path: Path, memory: str) -> str:
    xml = (ASSETS / "ant.xml").read_text()
    path = tmp_path / f"ant_{memory}.xml"
    path.write_text(xml.replace("<option ", f'<size memory="{memory}"/>\n  <option ', 1))
    return str(path)


def _first_error_in_gymnasium(path: str, seed: int, actions: np.ndarray) -> int | None:
    """The step at which gymnasium's Ant-v5 raises mujoco.FatalError, or None."""
    env = gym.make("Ant-v5", xml_file=path, max_episode_steps=10**6)
    env.reset(seed=seed)
    try:
        for t, a in enumerate(actions):
            try:
                _, _, terminated, _, _ = env.step(a)
            except mujoco.FatalError:
                return t
            if terminated:
                return None  # the comparison only follows the first episode
        return None
    finally:
        env.close()


def test_an_error_mid_episode_ends_that_episode_and_the_pool_goes_on(tmp_path: Path) -> None:
    path = _ant_with_memory(tmp_path, "16K")
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, (STEPS, NUM_ENVS, 8)).astype(np.float32)
    first_error: dict[int, int] = {}
    episode_ended: dict[int, int] = {}
    with aiopool.make("Ant-v5", num_envs=NUM_ENVS, batch_size=NUM_ENVS, num_threads=1, seed=0,
                      xml_file=path, max_episode_steps=10**6) as pool:
        pool.async_reset()
        pool.recv_blocking(timeout=30)
        last_error_row: dict[int, int] = {}
        for t in range(STEPS):
            pool.send(actions[t])
            batch = pool.recv_blocking(timeout=30)
            for r, env in enumerate(batch.env_id.tolist()):
                if last_error_row.get(env) == t - 1:  # the step after an error resets the env
                    assert batch.info["elapsed_step"][r] == 0 and not batch.info["mujoco_error"][r]
                if batch.info["mujoco_error"][r]:
                    assert batch.truncated[r] and not batch.terminated[r], "an error truncates"
                    assert batch.reward[r] == 0.0
                    first_error.setdefault(env, t)
                    last_error_row[env] = t
                elif batch.terminated[r]:
                    episode_ended.setdefault(env, t)
        assert first_error, "the 16K model raised no error: the trigger no longer works"
        assert len(first_error) < NUM_ENVS or len(set(first_error.values())) > 1, \
            "every env failed at the same step: nothing shows the others going on"
        for env in range(NUM_ENVS):
            if env in first_error:
                assert "mj_stackAlloc" in pool.env_error(env), pool.env_error(env)
            else:
                assert pool.env_error(env) == ""
        pool.send(np.zeros((NUM_ENVS, 8), np.float32))  # still usable
        assert len(pool.recv_blocking(timeout=30)) == NUM_ENVS
    # gymnasium raises mujoco.FatalError at the very step where the pool reports the error
    for env in range(NUM_ENVS):
        ours = first_error.get(env)
        if ours is not None and episode_ended.get(env, STEPS) < ours:
            continue  # a terminated episode came first: the trajectories part there
        theirs = _first_error_in_gymnasium(path, env, actions[:, env])
        assert ours == theirs, f"env {env}: error at step {ours}, gymnasium's at {theirs}"


def test_a_model_mujoco_cannot_simulate_is_a_python_error_at_make(tmp_path: Path) -> None:
    path = _ant_with_memory(tmp_path, "8K")
    with pytest.raises(ValueError, match=r"ant_8K\.xml.*mj_stackAlloc"):
        aiopool.make("Ant-v5", num_envs=2, xml_file=path)


def test_model_compile_warnings_print_once_per_model() -> None:
    """HalfCheetah's MJCF uses the deprecated `settotalmass`; MuJoCo warns at each load, and a
    pool loads the model for its spec and again for its envs. gymnasium prints it once."""
    import subprocess
    import sys

    code = ("import aiopool\n"
            "for _ in range(2):\n"
            "    aiopool.make('HalfCheetah-v5', num_envs=4).close()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (r.stdout + r.stderr).count("settotalmass") == 1, r.stdout + r.stderr


def test_an_error_in_a_control_suite_reset_ends_that_episode_as_dm_control_raises_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """cheetah's reset runs 200 substeps; with `<size memory="16K"/>` they overflow MuJoCo's
    stack, and dm_control's reset raises mujoco.FatalError. The pool's env reports it, starts
    from the model's reset state, ends the episode at its first step, and the process lives."""
    from dm_control.rl import control
    from dm_control.suite import cheetah

    from aiopool._native import families

    xml, assets = cheetah.get_model_and_assets()
    small = (xml.decode() if isinstance(xml, bytes) else xml).replace(
        "<option", '<size memory="16K"/>\n  <option', 1)
    env = control.Environment(cheetah.Physics.from_xml_string(small, assets),
                              cheetah.Cheetah(random=0))
    with pytest.raises(mujoco.FatalError, match="mj_stackAlloc") as raised:
        env.reset()
    path = tmp_path / "cheetah_16K.mjb"
    mujoco.mj_saveModel(env.physics.model.ptr, str(path), None)
    aiopool.make("dmc/cheetah-run", num_envs=1).close()  # dm_control's model, then ours instead
    for key, (_, steps, limit) in list(families._DMC_MODELS.items()):
        if key[0] == "dmc/cheetah-run":
            monkeypatch.setitem(families._DMC_MODELS, key, (str(path), steps, limit))
    with aiopool.make("dmc/cheetah-run", num_envs=2, num_threads=1, seed=0) as pool:
        pool.async_reset()
        first = pool.recv_blocking(timeout=30)
        reset_state = mujoco.MjData(env.physics.model.ptr)  # mj_resetData's state
        np.testing.assert_array_equal(first.obs["position"][0], reset_state.qpos[1:])
        for i in range(2):
            assert pool.env_error(i) == f"mujoco.FatalError: {raised.value}", pool.env_error(i)
        pool.send(np.zeros((2, 6)))
        step = pool.recv_blocking(timeout=30)
        assert step.truncated.all() and not step.terminated.any() and (step.reward == 0).all()
        np.testing.assert_array_equal(step.obs["position"][0], reset_state.qpos[1:])  # unstepped
        assert pool.env_error(0) == f"mujoco.FatalError: {raised.value}"
        pool.send(np.zeros((2, 6)))  # the next episode's reset: the same error, no crash
        assert len(pool.recv_blocking(timeout=30)) == 2
