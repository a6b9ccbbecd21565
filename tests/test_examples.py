"""The examples run with a tiny budget and print sensible results."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import demo


def test_demo_runs_and_a_random_policy_scores_like_one() -> None:
    out = asyncio.run(demo.main(demo.Args(seconds=0.5, num_envs=16, batch_size=8)))
    assert out["steps"] > 1000
    assert out["episodes"] > 10
    assert 10 < out["mean_return"] < 40  # a random CartPole policy averages ~22


def test_custom_env_streams_from_worker_processes() -> None:
    import custom_env

    out = asyncio.run(custom_env.main(custom_env.Args(seconds=1.0, num_envs=8, batch_size=4)))
    assert out["steps"] > 500 and out["episodes"] > 20
    # walking forward from a start in [0, 5) reaches the goal in 6..10 steps
    assert 1.0 - 0.10 < out["mean_return"] < 1.0 - 0.04
