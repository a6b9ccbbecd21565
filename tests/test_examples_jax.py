"""examples/ppo_atari_jax_scan.py and examples/ppo_purejaxrl_cartpole.py: with a tiny budget
each runs its jitted rollout (a ``lax.scan`` over ``envs.xla()``'s step) and update, and prints
lines that parse (SPS, episodic returns); the PureJaxRL-style PPO over aiopool's CartPole
learns, and its gymnax backend trains with the same function."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flax", reason="needs flax: pip install -e '.[test]'")
pytest.importorskip("optax", reason="needs optax: pip install -e '.[test]'")
pytest.importorskip("gymnax", reason="needs gymnax: pip install -e '.[test]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import ppo_atari_jax_scan as atari
import ppo_purejaxrl_cartpole as purejaxrl

ROOT = Path(__file__).resolve().parent.parent

ATARI_LINE = re.compile(r"^iteration (\d+)/(\d+)  global_step=(\d+)  SPS=(\d+)  "
                        r"episodic_return=(-|[\d.]+ \(\d+ games\))", re.M)
CARTPOLE_LINE = re.compile(r"^\[(aiopool|gymnax)\] iteration (\d+)/(\d+)  global_step=(\d+)  "
                           r"SPS=(\d+)  episodic_return=([\d.]+) \((\d+) episodes\)", re.M)
SUMMARY_ROW = re.compile(r"^(aiopool|gymnax) +(\d+) +(\d+) +([\d.]+) +([\d.]+)$", re.M)


@pytest.mark.slow  # ~16 s: XLA compiles the Atari network's update
def test_atari_scan_tiny_budget_runs_from_the_command_line() -> None:
    # Two iterations of 2 envs x 8 steps, one epoch of one minibatch (what costs is compiling
    # the CNN's rollout and update, ~12 s of CPU): the flags reach the script, a line per
    # iteration and the summary parse.
    r = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ppo_atari_jax_scan.py"), "--env-id",
         "Breakout-v5", "--num-envs", "2", "--num-steps", "8", "--total-timesteps", "32",
         "--update-epochs", "1", "--num-minibatches", "1", "--seed", "3"],
        capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = ATARI_LINE.findall(r.stdout)
    assert [(i, n, step) for i, n, step, _, _ in lines] == [("1", "2", "16"), ("2", "2", "32")]
    assert all(int(sps) > 0 for *_, sps, _ in lines)
    summary = re.search(r"^done: 32 env steps in [\d.]+ s, SPS=(\d+) \(after the first "
                        r"iteration, which compiles: (\d+)\), (\d+) games", r.stdout, re.M)
    assert summary and int(summary[1]) > 0 and int(summary[2]) > 0, r.stdout


@pytest.mark.slow  # ~12 s: XLA compiles the Atari network
def test_atari_scan_rollout_logs_whole_games_from_the_info() -> None:
    # The jitted rollout, replayed: the same-seed envs stepped in Python with the actions the
    # scan took give the same frames, and the games it logged are theirs. Breakout with
    # episodic life: a lost life ends a training episode (done), a game ends on
    # info["terminated"], its score is the unclipped info["reward"] summed over the game.
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax.training.train_state import TrainState

    import aiopool.envpool as envpool

    args = atari.Args(num_envs=2, num_steps=400)
    envs, replay = (envpool.make("Breakout-v5", env_type="gymnasium", num_envs=2,
                                 episodic_life=True, reward_clip=True, seed=5)
                    for _ in range(2))
    agent = atari.AtariAgent(4)
    obs, _ = envs.reset()
    state = TrainState.create(apply_fn=agent.apply, tx=optax.sgd(0.0),
                              params=agent.init(jax.random.PRNGKey(0), jnp.asarray(obs)))
    handle, _, _, step = envs.xla()
    rollout, _ = atari.make_functions(args, step, agent)
    games = atari.Games(jnp.zeros(2), jnp.zeros(2, jnp.int32))
    *_, moved, ended = jax.device_get(
        rollout(state, handle, jnp.asarray(obs), games, jax.random.PRNGKey(1)))
    envs.close()

    frames, _ = replay.reset()
    score, length = np.zeros(2), np.zeros(2, np.int64)
    logged = []
    for t in range(args.num_steps):
        np.testing.assert_array_equal(moved.obs[t], frames, err_msg=f"step {t}")
        frames, reward, terminated, truncated, info = replay.step(moved.action[t])
        assert list(moved.reward[t]) == list(reward)  # clipped: what the agent learns from
        assert list(moved.done[t]) == list(terminated | truncated)
        score += info["reward"]
        length += 1
        over = info["terminated"].astype(bool) | truncated
        assert list(ended.ended[t]) == list(over), f"step {t}"
        for i in np.flatnonzero(over):
            logged.append((ended.score[t, i], ended.length[t, i]))
            assert (ended.score[t, i], ended.length[t, i]) == (score[i], length[i])
        score[over], length[over] = 0, 0
    replay.close()
    assert logged, "a random policy loses Breakout's 5 lives within 400 steps"
    assert any(done and not over for done, over in
               zip(moved.done.ravel(), ended.ended.ravel(), strict=True))  # a lost life


def test_purejaxrl_tiny_budget_trains_on_both_backends(capsys: pytest.CaptureFixture[str]) -> None:
    args = purejaxrl.Args(backend="both", total_timesteps=4 * 4 * 128, print_every=1)
    out = purejaxrl.main(args)
    printed = capsys.readouterr().out
    assert set(out) == {"aiopool", "gymnax"}
    for name, result in out.items():
        assert result["global_step"] == 2048 and result["iterations"] == 4
        assert result["sps"] > 0 and result["compile_s"] > 0
        # random CartPole episodes last ~22 steps: each iteration of 4 x 128 steps ends some
        assert all(ended > 0 for ended, _ in result["history"])
        assert 8 < result["final_return"] < 100
        lines = [m for m in CARTPOLE_LINE.findall(printed) if m[0] == name]
        assert [m[1] for m in lines] == ["1", "2", "3", "4"]
        assert all(int(m[4]) > 0 for m in lines[1:])  # the first iteration compiles: SPS 0
    rows = {m[0]: m for m in SUMMARY_ROW.findall(printed)}
    assert set(rows) == {"aiopool", "gymnax"}
    assert all(row[1] == "2048" and int(row[2]) > 0 for row in rows.values())


def test_purejaxrl_over_aiopool_learns_cartpole() -> None:
    # 64k env steps, ~1 s after a ~3 s compile: seeds 0-2 reached 212-306 (a random policy ~22)
    args = purejaxrl.Args(backend="aiopool", total_timesteps=65_536, print_every=0)
    result = purejaxrl.main(args)["aiopool"]
    assert result["final_return"] > 100, result["final_return"]
