"""The recorded digests (tests/recorded.py) hide no mismatch, and the default tier steps every
registered id through an episode end against them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import test_parity_atari
import test_parity_mujoco
from recorded import Store, Trace, case_key_of, kernel_profile

import aiopool
from aiopool import registry

ROOT = Path(__file__).resolve().parent.parent
PARITY = sorted(p.stem for p in (ROOT / "tests").glob("test_parity_*.py"))


class Flipping(Trace):
    """A recorded trace that flips one bit of one env's observation in one batch, as a native
    env that went wrong by one ulp would."""

    def __init__(self, key: str, module: str, batch: int, env: int) -> None:
        super().__init__(key, module, "recorded")
        self.batches, self.at, self.env = 0, batch, env

    def rows(self, batch: Any) -> int:
        self.batches += 1
        if self.batches == self.at:
            obs = np.array(batch.obs)
            row = int(np.flatnonzero(np.asarray(batch.env_id) == self.env)[0])
            obs[row].reshape(-1).view(np.uint8)[-1] ^= 1  # the last byte's lowest bit
            batch = SimpleNamespace(obs=obs, reward=batch.reward, terminated=batch.terminated,
                                    truncated=batch.truncated, info=batch.info,
                                    env_id=batch.env_id)
        return super().rows(batch)


async def _hopper(trace: Trace) -> None:
    await test_parity_mujoco.run_beside_gymnasium(
        "Hopper-v5", num_envs=3, steps=250, seed=7, kwargs={}, max_episode_steps=60,
        trace=trace)


async def _pong(trace: Trace) -> None:  # _compare runs a loop of its own: in a thread
    await asyncio.to_thread(test_parity_atari._compare, "Pong-v5", 100, trace=trace)


CASES = {"mujoco": ("test_parity_mujoco", "test_default_kwargs_match_gymnasium[Hopper-v5]",
                    _hopper),
         "atari": ("test_parity_atari", "test_default_settings[Pong-v5]", _pong)}


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize("family", list(CASES))
async def test_one_flipped_bit_in_one_observation_fails(family: str) -> None:
    module, key, run = CASES[family]
    await run(Trace(key, module, "recorded"))  # unflipped: the recording holds
    for batch, env in ((101, 1), (2, 0)):
        with pytest.raises(pytest.fail.Exception,
                           match=rf"{key.replace('[', '.').replace(']', '.')}: env {env}'s "
                                 r"rows \d+\.\.\d+ .*differ from the recording"):
            await run(Flipping(key, module, batch, env))


@pytest.mark.asyncio
@pytest.mark.asyncio_loop_only
@pytest.mark.parametrize("family", list(CASES))
async def test_one_flipped_bit_in_the_recording_fails(family: str) -> None:
    module, key, run = CASES[family]
    trace = Trace(key, module, "recorded")
    assert trace.expected is not None
    digests = list(trace.expected["digests"])
    last = digests[-1]
    digests[-1] = last[:-1] + format(int(last[-1], 16) ^ 1, "x")
    trace.expected = {**trace.expected, "digests": digests}
    with pytest.raises(pytest.fail.Exception,
                       match=rf"env {len(digests) - 1}'s rows .* differ from the recording"):
        await run(trace)


def test_a_case_missing_from_the_recording_fails_and_says_how_to_record_it() -> None:
    with pytest.raises(pytest.fail.Exception, match=r"not in .*test_parity_mujoco.json: record "
                                                    r"it with `python -m tests.record_refer"):
        Trace("test_default_kwargs_match_gymnasium[NoSuchEnv-v0]", "test_parity_mujoco",
              "recorded")


def test_the_default_tier_steps_every_registered_id_through_an_episode_end() -> None:
    """Every id of every family has a recorded case in the default tier (``-m "not slow"``)
    whose recording crossed an episode end after its seeded reset (each case starts with one)."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", "-m", "not slow",
                          *(f"tests/{m}.py" for m in PARITY)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300, check=True)
    default = {(line.split("::")[0].removeprefix("tests/").removesuffix(".py"),
                case_key_of(line.split("::")[1]))
               for line in out.stdout.splitlines() if "::" in line and "recorded" in line}
    profile = kernel_profile()
    stepped: dict[str, set[str]] = {}
    for module, key in default:
        case = Store(module).cases(profile)[key]
        if case["ends"] >= 1:
            stepped.setdefault(case["env_id"], set()).add(key)
    families: dict[str, set[str]] = {}
    for env_id in set(aiopool.list_envs()) - {"Counting-v0"}:  # the tests' env: no reference
        family = registry.family_of(env_id)
        assert family is not None
        families.setdefault(family.name, set()).add(env_id)
    assert set(families) == {"classic_control", "toy_text", "box2d", "mujoco", "dmc", "atari",
                             "minigrid", "procgen", "metaworld"}
    # Procgen's games are procgen's own library, equal by construction: its default tier steps
    # one id per distribution mode beside the live reference (test_parity_procgen.py's
    # DEFAULT, through level ends), the exhaustive tier every id; nothing is recorded.
    for name, ids in families.items():
        if name == "procgen":
            continue
        missing = sorted(ids - set(stepped))
        assert not missing, f"{name}: the default tier steps no recorded case of {missing}"
