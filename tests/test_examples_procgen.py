"""examples/ppo_procgen.py (CleanRL's PPO with the IMPALA CNN) runs on a tiny budget and logs
the games' own episode returns."""

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
    pytest.skip(f"procgen's library could not be fetched (python -m aiopool.procgen install): "
                f"{e}", allow_module_level=True)


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
