"""examples/ppo_procgen.py (CleanRL's PPO with the IMPALA CNN) runs on a tiny budget and logs
the games' own episode returns; examples/demo.py runs a Procgen game."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from aiopool import procgen

try:
    procgen.install()
except procgen.ProcgenNotInstalled as e:
    pytest.skip(f"cannot install procgen's library here (python -m aiopool.procgen install): "
                f"{e}", allow_module_level=True)


def test_demo_runs_a_procgen_game() -> None:
    import asyncio

    import demo

    out = asyncio.run(demo.main(demo.Args(env_id="BigfishEasy-v0", seconds=1.0, num_envs=8,
                                          batch_size=4)))
    assert out["steps"] > 100 and out["episodes"] > 0  # bigfish eats a random player quickly


def test_ppo_procgen_tiny_budget_logs_episodes() -> None:
    import ppo_procgen

    # bigfish's levels end within a few dozen steps under a random policy (it gets eaten)
    out = ppo_procgen.main(ppo_procgen.Args(
        env_id="BigfishEasy-v0", total_timesteps=512, num_envs=4, num_steps=128,
        num_minibatches=2, update_epochs=1, torch_threads=1, num_threads=1))
    assert out["global_step"] == 512 and out["updates"] == 1
    assert out["episodes"], "no level ended in 512 steps of bigfish"
    # the game's own return (procgen's reward: 1 per fish eaten, 10 on completion), not the
    # normalised one the learner sees
    assert all(float(e["return"]).is_integer() and e["length"] > 0 for e in out["episodes"])
