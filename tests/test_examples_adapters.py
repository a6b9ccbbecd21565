"""The adapter examples run with a tiny budget and print sensible results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import legacy_gymnasium


def test_legacy_gymnasium_runs_and_equals_the_gymnasium_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = legacy_gymnasium.Args(num_envs=4, steps=600)
    out = legacy_gymnasium.main(args)
    assert "mean return" in capsys.readouterr().out
    assert out["episodes"] >= 4 and out["mean_return"] > 400  # the heuristic balances the pole

    def before(env_id: str, num_envs: int) -> Any:  # the line the example replaced
        return gym.make_vec(env_id, num_envs, vectorization_mode="sync")

    monkeypatch.setattr(legacy_gymnasium.aiopool, "make_gymnasium", before)
    ref = legacy_gymnasium.main(args)
    assert (ref["episodes"], ref["mean_return"]) == (out["episodes"], out["mean_return"])


def test_sb3_ppo_runs_with_a_tiny_budget(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("stable_baselines3",
                        reason="needs stable-baselines3: pip install -e '.[test]'")
    import sb3_ppo

    out = sb3_ppo.main(sb3_ppo.Args(num_envs=4, total_timesteps=512, n_steps=32,
                                    batch_size=64, n_epochs=1, eval_episodes=4))
    printed = capsys.readouterr().out
    assert "env-steps  mean return (last 100)" in printed and "greedy policy" in printed
    assert "nan" not in printed.splitlines()[-2]  # episodes ended, so SB3 got their stats
    assert 5 <= out["mean_return"] <= 500


def test_record_video_writes_an_mp4_of_each_env(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("moviepy", reason="needs moviepy: pip install -e '.[test]'")
    iio = pytest.importorskip("imageio.v3", reason="needs imageio: pip install -e '.[test]'")
    import record_video

    videos = record_video.main(record_video.Args(out=str(tmp_path), steps=12, width=64,
                                                 height=48))
    shapes = {"HalfCheetah-v5": (48, 64, 3), "Pong-v5": (210, 160, 3)}
    for env_id, path in videos.items():
        frames = iio.imread(path)
        # one frame per step (the encoder may drop one at the end)
        assert frames.shape[1:] == shapes[env_id] and 11 <= frames.shape[0] <= 13, frames.shape
        assert frames.std() > 5  # a picture, not a blank
    assert "HalfCheetah-v5" in capsys.readouterr().out
