"""examples/ppo_continuous_async.py and examples/ppo_atari_async.py: their strict modes are
CleanRL's loops float for float, their overlapped modes run and learn with the same update.
On CUDA (the tests that need a GPU skip without one), strict is CleanRL's loop on the same GPU
within floating-point tolerance.

The references are CleanRL's scripts as ported in benchmarks/training.py: for MuJoCo, CleanRL's
loop over gymnasium's SyncVectorEnv with CleanRL's wrappers (the example normalizes in the
driver instead); for Atari, CleanRL's loop over EnvPool's interface on the same aiopool envs
(one synchronous batch of every env), as EnvPool's own emulator differs from ale-py's.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch", reason="needs torch: pip install -e '.[test]'")

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import ppo_atari_async as atari
import ppo_continuous_async as mujoco
import torch
import training
from torch import nn

CLEANRL_STATS = ("value_loss", "policy_loss", "entropy", "old_approx_kl", "approx_kl",
                 "clipfrac", "explained_variance")


def assert_same_training(mine: dict[str, Any], theirs: dict[str, Any],
                         lengths: bool = True) -> None:
    """The same weights bit for bit, the same losses every update, the same episodes (their
    returns, and their lengths if ``lengths``)."""
    assert mine["updates"] == theirs["updates"] == len(mine["history"])
    assert mine["weights"].keys() == theirs["weights"].keys()
    for name, value in theirs["weights"].items():
        np.testing.assert_array_equal(mine["weights"][name], value, err_msg=name)
    for k, (a, b) in enumerate(zip(mine["history"], theirs["history"], strict=True)):
        assert {s: a[s] for s in CLEANRL_STATS} == {s: b[s] for s in CLEANRL_STATS}, k
    fields = slice(1, 3 if lengths else 2)
    assert [e[fields] for e in mine["episodes"]] == [e[fields] for e in theirs["episodes"]]


def assert_close_training(mine: dict[str, Any], theirs: dict[str, Any],
                          lengths: bool = True) -> None:
    """On CUDA: the same run as ``assert_same_training`` checks, but weights and losses equal
    within floating-point tolerance (CUDA does not promise bitwise-reproducible kernels)."""
    assert mine["updates"] == theirs["updates"] == len(mine["history"])
    assert mine["weights"].keys() == theirs["weights"].keys()
    for name, value in theirs["weights"].items():
        np.testing.assert_allclose(mine["weights"][name], value, rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    for k, (a, b) in enumerate(zip(mine["history"], theirs["history"], strict=True)):
        for stat in CLEANRL_STATS:
            assert a[stat] == pytest.approx(b[stat], rel=1e-3, abs=1e-6), (k, stat)
    fields = slice(1, 3 if lengths else 2)
    assert [e[fields] for e in mine["episodes"]] == [e[fields] for e in theirs["episodes"]]


GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
DEVICES = ["cpu", "auto", pytest.param("cuda", marks=GPU)]


def continuous(env_id: str, num_envs: int, num_steps: int, updates: int,
               **kw: Any) -> mujoco.Args:
    return mujoco.Args(env_id=env_id, num_envs=num_envs, num_steps=num_steps,
                       total_timesteps=num_envs * num_steps * updates, print_every=0, **kw)


# Hopper ends episodes by termination (a fall), HalfCheetah by truncation at 1000 steps: both
# autoreset paths, with the terminal observation updating the running statistics. The Control
# Suite's cartpole-balance (truncated at 1000 steps) against CleanRL's loop over dm_control
# itself (benchmarks/training.py's DmControlEnv), its Dict observation flattened by CleanRL's
# FlattenObservation (keys sorted) and by the example's flat_observation (dm_control's order):
# the same order for its keys, position and velocity.
@pytest.mark.parametrize(("env_id", "num_envs", "num_steps"),
                         [("Hopper-v5", 2, 64), ("HalfCheetah-v5", 1, 512),
                          ("dmc/cartpole-balance", 2, 512)])
def test_continuous_strict_is_cleanrl_over_syncvectorenv_float_for_float(
        env_id: str, num_envs: int, num_steps: int) -> None:
    args = continuous(env_id, num_envs, num_steps, 3, num_minibatches=4, update_epochs=2,
                      strict=True)
    mine = asyncio.run(mujoco.main(args))
    theirs = training.cleanrl_continuous(args)
    assert mine["global_step"] == theirs["global_step"] == num_envs * num_steps * 3
    assert len(theirs["episodes"]) >= 1  # at least one autoreset on the way
    assert_same_training(mine, theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_strict_is_cleanrls_loop_on_the_same_device(device: str) -> None:
    # --device reaches the network, the rollout's tensors and the update in both examples and
    # in CleanRL's loops: bit for bit on the CPU (auto is the CPU without a GPU), within
    # floating-point tolerance on CUDA.
    mujoco_args = continuous("Hopper-v5", 2, 64, 2, num_minibatches=4, update_epochs=1,
                             strict=True, device=device)
    atari_args = atari.Args(num_steps=8, total_timesteps=2 * 8 * 8, update_epochs=1,
                            strict=True, print_every=0, device=device,
                            learner_threads=1)  # both loops: quick on a loaded machine
    runs = [(asyncio.run(mujoco.main(mujoco_args)), training.cleanrl_continuous(mujoco_args),
             True),
            (asyncio.run(atari.main(atari_args)),
             training.cleanrl_atari(atari_args, training.AiopoolAsEnvPool("Breakout-v5", 8, 1)),
             False)]  # game lengths: see test_atari_strict_is_cleanrl_on_the_same_envs_...
    expected = mujoco.torch_device(device).type
    for mine, theirs, lengths in runs:
        assert mine["device"] == theirs["device"] == expected
        if expected == "cpu":
            assert_same_training(mine, theirs, lengths)
        else:
            assert_close_training(mine, theirs, lengths)


@pytest.mark.slow  # a training run: the exhaustive tier
@pytest.mark.parametrize("fresh_weights", [True, False])
def test_continuous_overlapped_changes_only_the_schedule(fresh_weights: bool) -> None:
    # One env: the first rollout comes from the initial weights in both modes, step for step.
    # Its update is CleanRL's in strict mode and the decoupled one overlapped, which without
    # policy lag is the same update up to rounding (the proximal policy is evaluated in one
    # batch, not row by row). Then the overlapped actor acts while the learner learns, so
    # rollout 2 comes from other weights than in strict mode, and the runs part.
    args = continuous("Hopper-v5", 1, 256, 3, num_minibatches=4, update_epochs=2,
                      fresh_weights=fresh_weights)
    overlapped = asyncio.run(mujoco.main(args))
    strict = asyncio.run(mujoco.main(replace(args, strict=True)))
    assert overlapped["updates"] == 3 and overlapped["global_step"] >= 3 * 256
    first = [e for e in strict["episodes"] if e[0] <= 256]
    assert first and overlapped["episodes"][:len(first)] == first
    assert overlapped["history"][0]["lag_weight_max"] == pytest.approx(1.0, abs=1e-5)
    for stat in CLEANRL_STATS:
        assert overlapped["history"][0][stat] == pytest.approx(strict["history"][0][stat],
                                                               rel=1e-3, abs=1e-6), stat
    for h in overlapped["history"]:
        assert math.isfinite(h["lag_weight_max"]) and h["lag_weight_max"] > 0
        assert h["seconds"] > 0  # measured in the learner process
    assert all(np.isfinite(w).all() for w in overlapped["weights"].values())


def test_shared_weights_carry_the_learners_newest_weights_to_the_actor() -> None:
    torch = pytest.importorskip("torch")
    import multiprocessing

    torch.manual_seed(0)
    actor = mujoco.Agent(11, 3)
    torch.manual_seed(1)
    learner = mujoco.Agent(11, 3)
    obs = np.random.default_rng(0).standard_normal((4, 11)).astype(np.float32)

    def act(agent: mujoco.Agent) -> tuple[np.ndarray, ...]:
        torch.manual_seed(2)
        return mujoco.act(agent, obs)

    before = act(actor)
    shared = mujoco.SharedWeights(actor, multiprocessing.get_context("spawn"))
    shared.bind(actor)  # the actor's parameters become views of one flat tensor: same policy
    for a, b in zip(act(actor), before, strict=True):
        np.testing.assert_array_equal(a, b)

    assert shared.progress(0) == 0
    shared.start(3)
    shared.publish(learner, 5)  # update 3, 5 minibatches done
    assert (shared.progress(3), shared.progress(2)) == (5, 0)
    for a, b in zip(act(actor), before, strict=True):  # not yet: the actor refreshes
        np.testing.assert_array_equal(a, b)
    shared.refresh()
    for name, value in learner.state_dict().items():
        np.testing.assert_array_equal(actor.state_dict()[name].numpy(), value.numpy(), name)
    for a, b in zip(act(actor), act(learner), strict=True):
        np.testing.assert_array_equal(a, b)

    # Loading a state dict (the update's final weights) writes through to the flat tensor.
    actor.load_state_dict({k: v * 0 for k, v in learner.state_dict().items()})
    assert not shared.flat.any()


@pytest.mark.slow  # a training run: the exhaustive tier
def test_fresh_weights_start_the_envs_of_a_rollout_together(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The learner's progress moves while the actor decides which envs may start the next
    # rollout. Here it crosses the threshold between two reads: had the envs of one rollout
    # been split by it, less than a batch would be in flight and recv would raise
    # NothingInFlight (it did, before the gate was decided once per rollout).
    reads: dict[int, int] = {}

    def progress(self: mujoco.SharedWeights, k: int) -> int:
        reads[k] = reads.get(k, 0) + 1
        return 0 if reads[k] % 4 else 10**6

    monkeypatch.setattr(mujoco.SharedWeights, "progress", progress)
    args = continuous("HalfCheetah-v5", 4, 32, 6, num_minibatches=4, update_epochs=30,
                      num_threads=1)
    out = asyncio.run(mujoco.main(args))
    assert out["updates"] == 6 and out["global_step"] == 6 * 4 * 32
    assert reads  # the gate was consulted


@pytest.mark.slow  # a training run: the exhaustive tier
def test_continuous_halves_of_the_envs_overlap_stepping_and_inference() -> None:
    args = continuous("HalfCheetah-v5", 4, 32, 2, num_minibatches=4, update_epochs=1)
    out = asyncio.run(mujoco.main(args))
    assert out["updates"] == 2 and out["global_step"] >= 2 * 4 * 32
    assert len(out["history"]) == 2


def check_game_logging(out: dict[str, Any], num_envs: int) -> None:
    """EnvPool-style episodic life in Breakout (5 lives): every game that ended cost 4 lives
    that ended training episodes without ending the game, each game still running up to 4."""
    games = len(out["episodes"])
    assert 4 * games <= out["life_losses"] <= 4 * (games + num_envs)
    assert all(score >= 0 and length > 0 for _, score, length in out["episodes"])


def test_atari_overlapped_tiny_budget_runs_through_the_batcher() -> None:
    args = atari.Args(num_steps=16, total_timesteps=8 * 16 * 2, update_epochs=1,
                      print_every=0)
    out = asyncio.run(atari.main(args))
    assert out["updates"] == 2 and out["global_step"] >= 8 * 16 * 2
    assert out["rows_per_forward"] >= 4  # each call of a consumer is half of the envs
    assert all(math.isfinite(h["lag_weight_max"]) for h in out["history"])
    check_game_logging(out, 8)
    if torch.cuda.is_available():  # --device auto: CUDA, its learner in a thread
        assert (out["device"], out["learner"]) == ("cuda", "thread")
        return
    assert (out["device"], out["learner"]) == ("cpu", "process")
    # the learner went wide while the actor waited for it (in the last update, for which
    # there is nothing left to act)
    assert all(0 <= h["wide_minibatches"] <= 1 for h in out["history"])
    if len(os.sched_getaffinity(0)) > 1:
        assert out["history"][-1]["wide_minibatches"] > 0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=GPU)])
def test_atari_overlapped_learner_thread_learns_from_the_device_storage(device: str) -> None:
    # The learner beside the actor (CUDA's default; on the CPU only when asked): the rollouts'
    # frames are copied to its device as they are stored, the actor acts on the device too.
    args = atari.Args(num_steps=16, total_timesteps=8 * 16 * 2, update_epochs=1,
                      print_every=0, device=device, learner="thread")
    out = asyncio.run(atari.main(args))
    assert (out["device"], out["learner"], out["learner_threads"]) == (device, "thread", 1)
    assert out["updates"] == 2 and out["global_step"] >= 8 * 16 * 2
    assert all(math.isfinite(h["lag_weight_max"]) for h in out["history"])
    assert out["history"][0]["lag_weight_max"] == pytest.approx(1.0, abs=1e-4)  # no lag yet
    assert all("wide_minibatches" not in h for h in out["history"])  # no thread juggling
    assert all(np.isfinite(w).all() for w in out["weights"].values())
    check_game_logging(out, 8)


def test_training_benchmark_sizes_reach_both_examples() -> None:
    # benchmarks/training.py --num-envs / --num-threads: the examples' env and thread counts
    # (0 keeps CleanRL's env count and the engines' default threads).
    atari_args = training.example_args("Breakout-v5", 1, 8192, "cpu", 32, 16)
    assert (atari_args.num_envs, atari_args.num_threads) == (32, 16)
    assert training.example_args("Breakout-v5", 1, 8192, "cpu").num_envs == 8
    mujoco_args = training.example_args("Hopper-v5", 1, 8192, "cpu", 4, 2)
    assert (mujoco_args.num_envs, mujoco_args.num_threads) == (4, 2)
    assert training.example_args("Hopper-v5", 1, 8192, "cpu").num_envs == 1
    # The Control Suite's tasks go to the continuous example (and CleanRL's continuous loop).
    assert isinstance(training.example_args("dmc/cartpole-balance", 1, 8192), mujoco.Args)
    assert training.is_atari("Pong-v5") and not training.is_atari("dmc/cartpole-balance")
    # The graphed actor is the example's default on CUDA; --no-cuda-graph reaches it too.
    assert training.example_args("Breakout-v5", 1, 8192, "cuda").cuda_graph
    assert not training.example_args("Breakout-v5", 1, 8192, "cuda", cuda_graph=False).cuda_graph
    assert atari.parse_args([]).cuda_graph and not atari.parse_args(["--no-cuda-graph"]).cuda_graph


@pytest.mark.slow  # a training run: the exhaustive tier
@pytest.mark.timeout(180)
def test_atari_overlapped_actor_does_not_wait_on_envs_the_learner_needs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A fast actor and several workers: envs finish in varying order and drift apart, so a
    # batch can hold both an env a rollout ahead and one the learner's next rollout still
    # needs. Such a batch acts (a batch that waited for the learner there would wait forever:
    # it did, in 2 of 2 runs, before the fix; and on a GPU, where the actor is fast).
    def fast(self: atari.Acting, obs: np.ndarray) -> np.ndarray:
        out = np.empty(len(obs), atari.ACTED)
        out["action"] = np.random.randint(0, 4, len(obs))
        out["logprob"], out["value"] = -math.log(4), 0.0
        return out

    monkeypatch.setattr(atari.Acting, "__call__", fast)
    args = atari.Args(num_steps=4, total_timesteps=8 * 4 * 40, update_epochs=1, print_every=0,
                      device="cpu", learner="thread", num_threads=4)
    out = asyncio.run(asyncio.wait_for(atari.main(args), 120))
    assert out["updates"] == 40 and out["global_step"] >= 8 * 4 * 40


def test_atari_act_rows_draws_from_the_policy_with_its_logprob_and_value() -> None:
    # The graphed actor's draw (Gumbel-max over uniform noise): the log-probability and value
    # of the action it draws are get_action_and_value's for that action, and the draws follow
    # the policy's probabilities.
    torch.manual_seed(0)
    agent = atari.Agent(4)
    with torch.no_grad():
        x = torch.randint(0, 255, (8, 4, 84, 84)).float()
        acted = atari.act_rows(agent, x, torch.rand((8, 4)))
        _, logprob, _, value = agent.get_action_and_value(x, acted[:, 0].long())
    torch.testing.assert_close(acted[:, 1], logprob)
    torch.testing.assert_close(acted[:, 2], value.flatten())
    # The draws, over a network small enough for many rows: frequencies within 0.02 of the
    # probabilities of a skewed policy.
    small = nn.Module()
    small.network, small.actor, small.critic = nn.Identity(), nn.Linear(3, 4), nn.Linear(3, 1)
    with torch.no_grad():
        small.actor.weight.copy_(torch.tensor([[300.0, 0, 0], [0, 300, 0], [0, 0, 0], [0, 0, 0]]))
        small.actor.bias.zero_()
        x = torch.tensor([[1.0, 2.0, 0.0]]).repeat(40_000, 1)
        acted = atari.act_rows(small, x, torch.rand((40_000, 4)))  # type: ignore[arg-type]
        probs = torch.softmax(small.actor(x[:1] / 255.0), dim=1)[0].numpy()
    counts = np.bincount(acted[:, 0].long().numpy(), minlength=4) / 40_000
    assert probs.max() > 0.5 and probs.min() > 0.05
    np.testing.assert_allclose(counts, probs, atol=0.02)
    np.testing.assert_allclose(acted[:, 1].exp().numpy(), probs[acted[:, 0].long().numpy()],
                               rtol=1e-5)


@GPU
def test_atari_graphed_actor_acts_as_the_eager_one() -> None:
    # Overlapped on CUDA, the actor replays a CUDA graph: its log-probabilities and values are
    # the eager forward's for the actions it draws, for any row count up to the graph's, and
    # weights published later reach the graph.
    torch.manual_seed(0)
    agent = atari.Agent(4).to("cuda")
    eager = atari.Acting(atari.Agent(4).to("cuda"), 1)
    graphed = atari.Acting(agent, 1, graph_rows=8)
    graphed.capture((4, 84, 84))
    rng = np.random.default_rng(0)
    for version in range(2):
        weights = {k: v.detach().cpu().numpy() + version * 0.01
                   for k, v in agent.state_dict().items()}
        graphed.publish(weights)
        eager.publish(weights)
        for n in (1, 4, 8):
            obs = rng.integers(0, 255, (n, 4, 84, 84), dtype=np.uint8)
            out = graphed(obs)
            assert out["action"].min() >= 0 and out["action"].max() < 4
            with torch.no_grad():
                eager(obs)  # loads the weights
                x = torch.from_numpy(obs).to("cuda").float()
                _, logprob, _, value = eager.agent.get_action_and_value(
                    x, torch.from_numpy(out["action"]).to("cuda"))
            np.testing.assert_allclose(out["logprob"], logprob.cpu().numpy(), rtol=1e-4,
                                       atol=1e-5)
            np.testing.assert_allclose(out["value"], value.flatten().cpu().numpy(), rtol=1e-4,
                                       atol=1e-5)


@GPU
def test_continuous_overlapped_learns_on_cuda_and_acts_on_the_cpu() -> None:
    args = continuous("HalfCheetah-v5", 2, 64, 2, num_minibatches=4, update_epochs=2,
                      device="cuda")
    out = asyncio.run(mujoco.main(args))
    assert out["device"] == "cuda" and out["updates"] == 2
    assert all(np.isfinite(w).all() for w in out["weights"].values())


def test_atari_frames_reach_the_device_storage_one_copy_per_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A rollout with device storage stages its frames in host memory (pinned only with CUDA)
    # and upload copies each run of consecutive envs at one step in one copy.
    device = torch.device("cpu")
    first, second = (atari.Rollout.empty(2, 8, (4, 84, 84), device=device) for _ in range(2))
    assert first.staging is not None and first.device_obs is not None
    assert not first.staging.is_pinned() and first.device_obs.device == device
    rng = np.random.default_rng(0)
    for r in (first, second):
        r.obs[:] = rng.integers(0, 255, r.obs.shape, dtype=np.uint8)
    rows = [(first, 0, 0), (first, 0, 1), (first, 0, 2), (first, 1, 3), (first, 0, 5),
            (second, 0, 6), (second, 0, 7)]
    copies = []
    copy = torch.Tensor.copy_

    def counting_copy(self: Any, src: Any, non_blocking: bool = False) -> Any:
        copies.append(len(self))
        return copy(self, src, non_blocking)

    monkeypatch.setattr(torch.Tensor, "copy_", counting_copy)
    atari.upload(rows)
    monkeypatch.undo()
    assert copies == [3, 1, 1, 2]
    for r, t, i in rows:
        assert r.device_obs is not None
        np.testing.assert_array_equal(r.device_obs[t, i].numpy(), r.obs[t, i])


def test_atari_update_from_the_device_storage_is_the_update_from_host_frames() -> None:
    # The learner thread reads a rollout's frames from its device storage: the same update,
    # bit for bit, as from the frames in host memory (here both on the CPU).
    weights, host = initial_weights(), random_rollout()
    stored = atari.Rollout.empty(16, 8, (4, 84, 84), device=torch.device("cpu"))
    stored.obs[:] = host.obs
    for field in ("next_obs", "actions", "rewards", "logprobs", "values", "dones"):
        getattr(stored, field)[:] = getattr(host, field)
    atari.upload([(stored, t, i) for t in range(16) for i in range(8)])
    args = atari.Args(update_epochs=1, learner_threads=1)
    out = []
    for rollout in (host, stored):
        atari.learner_init(args, 4, weights)
        out.append(atari.learner_update(rollout, args.learning_rate, True))
    (w0, s0), (w1, s1) = out
    assert w0 is not None and w1 is not None
    for name in weights:
        np.testing.assert_array_equal(w1[name], w0[name], err_msg=name)
    assert {s: s1[s] for s in CLEANRL_STATS} == {s: s0[s] for s in CLEANRL_STATS}


def random_rollout(num_steps: int = 16, num_envs: int = 8) -> atari.Rollout:
    rollout = atari.Rollout.empty(num_steps, num_envs, (4, 84, 84))
    rng = np.random.default_rng(0)
    rollout.obs[:] = rng.integers(0, 255, rollout.obs.shape, dtype=np.uint8)
    rollout.next_obs[:] = rng.integers(0, 255, rollout.next_obs.shape, dtype=np.uint8)
    rollout.actions[:] = rng.integers(0, 4, rollout.actions.shape)
    rollout.rewards[:] = rng.choice([-1.0, 0.0, 1.0], rollout.rewards.shape)
    return rollout


def initial_weights() -> dict[str, np.ndarray]:
    import torch

    torch.manual_seed(0)
    return {k: v.detach().numpy().copy() for k, v in atari.Agent(4).state_dict().items()}


def test_atari_channels_last_learner_is_the_same_update_up_to_rounding() -> None:
    # The overlapped learner's CNN in channels-last layout: the same update as CleanRL's
    # layout (strict's), up to the rounding of another summation order.
    torch = pytest.importorskip("torch")
    weights, rollout = initial_weights(), random_rollout()
    out = {}
    for channels_last in (False, True):
        args = atari.Args(update_epochs=2, channels_last=channels_last, learner_threads=1)
        atari.learner_init(args, 4, weights)
        assert atari._learner is not None
        conv = atari._learner[0].network[0].weight
        assert conv.is_contiguous(memory_format=torch.channels_last) == channels_last
        out[channels_last] = atari.learner_update(rollout, args.learning_rate, True)
    (w0, s0), (w1, s1) = out[False], out[True]
    assert w0 is not None and w1 is not None
    for name in weights:
        assert not np.array_equal(w0[name], weights[name]), name  # it learned
        np.testing.assert_allclose(w1[name], w0[name], rtol=1e-3, atol=1e-5, err_msg=name)
    for stat in CLEANRL_STATS:
        assert s1[stat] == pytest.approx(s0[stat], rel=1e-3, abs=1e-6), stat


def test_atari_decoupled_update_without_lag_is_cleanrls_bit_for_bit() -> None:
    # When the actor's records are the learner's own outputs (no lag: every lag weight is
    # exp(0) = 1), the overlapped learner's update (its proximal pass, the frames scaled once
    # for the whole rollout) is CleanRL's update, bit for bit, in CleanRL's layout.
    torch = pytest.importorskip("torch")
    weights, rollout = initial_weights(), random_rollout()
    agent = atari.Agent(4)
    agent.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()})
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the learner's
    try:
        with torch.no_grad():  # the records as CleanRL's actor makes them
            _, logprob, _, value = agent.get_action_and_value(
                torch.Tensor(rollout.obs.reshape(-1, 4, 84, 84)),
                torch.from_numpy(rollout.actions.reshape(-1)))
    finally:
        torch.set_num_threads(threads)
    rollout.logprobs[:] = logprob.numpy().reshape(rollout.logprobs.shape)
    rollout.values[:] = value.numpy().reshape(rollout.values.shape)
    out = {}
    for decoupled in (False, True):
        args = atari.Args(update_epochs=2, channels_last=False, learner_threads=1)
        atari.learner_init(args, 4, weights)
        assert atari._learner is not None
        _, stats = atari.learner_update(rollout, args.learning_rate, decoupled)
        learned = {k: v.numpy().copy() for k, v in atari._learner[0].state_dict().items()}
        out[decoupled] = learned, stats
    (w0, s0), (w1, s1) = out[False], out[True]
    assert s1["lag_weight_max"] == 1.0
    for name in weights:
        assert not np.array_equal(w0[name], weights[name]), name  # it learned
        np.testing.assert_array_equal(w1[name], w0[name], err_msg=name)
    assert {s: s1[s] for s in CLEANRL_STATS} == {s: s0[s] for s in CLEANRL_STATS}


@pytest.mark.slow  # a training run: the exhaustive tier
def test_atari_rollout_frames_reach_the_learner_through_shared_slots() -> None:
    # Overlapped: a rollout's frames live in a shared slot and travel to the learner without
    # them; its update is the update of the same rollout sent whole, bit for bit.
    frames = atari.FrameSlots(2, (16, 8, 4, 84, 84))
    taken = [atari.Rollout.empty(16, 8, (4, 84, 84), frames) for _ in range(3)]
    assert sorted(r.slot for r in taken) == [-1, 0, 1]  # a third rollout keeps its own
    private = random_rollout()
    shared = next(r for r in taken if r.slot >= 0)
    shared.obs[:] = private.obs
    for field in ("next_obs", "actions", "rewards"):
        getattr(shared, field)[:] = getattr(private, field)
    weights, out = initial_weights(), []
    args = atari.Args(update_epochs=1, learner_threads=1)
    sent = replace(shared, obs=atari.NO_FRAMES)
    for rollout in (private, sent):
        atari.learner_init(args, 4, weights, frames=frames)
        out.append(atari.learner_update(rollout, args.learning_rate, True))
    # and in a spawned learner process, as the example runs it
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=atari.learner_init,
                             initargs=(args, 4, weights, None, None, frames)) as learner:
        out.append(learner.submit(atari.learner_update, sent, args.learning_rate, True).result())
    (w0, s0), *others = out
    for w1, s1 in others:
        assert w0 is not None and w1 is not None
        for name in weights:
            np.testing.assert_array_equal(w1[name], w0[name], err_msg=name)
        assert s1["value_loss"] == s0["value_loss"]
    frames.give(shared.slot)
    assert atari.Rollout.empty(16, 8, (4, 84, 84), frames).slot == shared.slot


LEARNER_ORPHAN = """
import multiprocessing, sys
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, {examples!r})
import ppo_atari_async as atari
if __name__ == "__main__":
    learner = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                                  initializer=atari.learner_init,
                                  initargs=(atari.Args(), 4, {{k: v.detach().numpy() for k, v
                                            in atari.Agent(4).state_dict().items()}}))
    print(learner.submit(__import__("os").getpid).result(), flush=True)
    __import__("time").sleep(60)
"""


@pytest.mark.slow  # a training run: the exhaustive tier
def test_atari_learner_process_exits_when_the_actor_is_killed() -> None:
    # SIGKILL leaves the executor no chance to stop its worker: the learner sees its parent
    # gone and exits, instead of waiting for work forever with its memory.
    examples = str(Path(__file__).resolve().parent.parent / "examples")
    actor = subprocess.Popen([sys.executable, "-c", LEARNER_ORPHAN.format(examples=examples)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert actor.stdout is not None
        learner = int(actor.stdout.readline())
    finally:
        actor.kill()
        actor.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(learner, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(learner, signal.SIGKILL)
    pytest.fail(f"the learner process {learner} outlived its actor by 10 s")


def test_atari_learner_takes_the_cores_the_actor_leaves() -> None:
    # Overlapped, without --learner-threads: 1 torch thread while the actor acts, every core
    # while it waits for the update; set before each minibatch.
    torch = pytest.importorskip("torch")
    busy = multiprocessing.get_context("spawn").RawValue("i", 1)
    pace = atari.AdaptiveThreads(busy, cores=2)
    before = torch.get_num_threads()
    try:
        pace()
        assert torch.get_num_threads() == 1
        busy.value = 0
        pace()
        assert torch.get_num_threads() == 2
        busy.value = 1
        pace()
        assert torch.get_num_threads() == 1
        assert (pace.calls, pace.wide) == (3, 1)
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Hopper-v5"])
def test_continuous_strict_matches_cleanrl_with_its_defaults(env_id: str) -> None:
    # CleanRL's hyper-parameters: 1 env x 2048 steps, 10 epochs x 32 minibatches; 2 updates.
    args = mujoco.Args(env_id=env_id, total_timesteps=2 * 2048, strict=True, print_every=0)
    mine = asyncio.run(mujoco.main(args))
    theirs = training.cleanrl_continuous(args)
    assert_same_training(mine, theirs)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_atari_strict_is_cleanrl_on_the_same_envs_float_for_float() -> None:
    # CleanRL's hyper-parameters: 8 envs x 128 steps, 4 epochs x 4 minibatches; 2 updates.
    args = atari.Args(total_timesteps=2 * 8 * 128, strict=True, print_every=0)
    mine = asyncio.run(atari.main(args))
    theirs = training.cleanrl_atari(args, training.AiopoolAsEnvPool(args.env_id, 8, args.seed))
    # Game lengths differ by the reset step after a game over, which CleanRL's statistics
    # count in the next game and aiopool's in none.
    assert_same_training(mine, theirs, lengths=False)
    assert len(mine["episodes"]) > 0
    check_game_logging(mine, 8)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_atari_overlapped_with_its_defaults() -> None:
    args = atari.Args(total_timesteps=3 * 8 * 128, print_every=0)
    out = asyncio.run(atari.main(args))
    assert out["updates"] == 3 and out["global_step"] >= 3 * 8 * 128
    assert out["history"][0]["lag_weight_max"] == pytest.approx(1.0, abs=1e-4)  # no lag yet
    check_game_logging(out, 8)


def test_training_benchmark_return_at_a_budget() -> None:
    episodes = [[100, 1.0, 10], [900, 2.0, 10], [950, 4.0, 10], [980, 6.0, 10], [2000, 9.0, 10]]
    assert training.return_at(episodes, 1000) == 5.0  # those that ended in (900, 1000]
    assert training.return_at(episodes, 800) == 1.0  # none there: the last ones before
    assert math.isnan(training.return_at(episodes, 50))
