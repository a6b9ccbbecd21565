"""The dm_env adapter: batched TimeSteps whose step types, discounts, rewards and observations
follow gymnasium's next-step autoreset vector env step for step."""

from __future__ import annotations

from contextlib import closing
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

dm_env = pytest.importorskip("dm_env", reason="needs dm-env: pip install -e '.[test]'")
from absl.testing import absltest  # noqa: E402
from dm_env import specs, test_utils  # noqa: E402

import aiopool  # noqa: E402
from aiopool.adapters.dm_env import DmEnvironment, make_dm  # noqa: E402

NUM_ENVS = 4
FIRST, MID, LAST = (int(t) for t in dm_env.StepType)


@pytest.mark.parametrize(("env_id", "limit"), [("CartPole-v1", 30), ("Pendulum-v1", None),
                                               ("MountainCarContinuous-v0", 60),
                                               ("FrozenLake-v1", None), ("Taxi-v4", 40),
                                               ("LunarLanderContinuous-v3", 80),
                                               # gymnasium's CarRacing draws with pygame: 9 s
                                               pytest.param("CarRacing-v3", 60,
                                                            marks=pytest.mark.slow)])
def test_timesteps_follow_gymnasium_step_by_step(env_id: str, limit: int | None) -> None:
    kw: dict[str, Any] = {} if limit is None else {"max_episode_steps": limit}
    ref = gym.make_vec(env_id, NUM_ENVS, vectorization_mode="sync", **kw)
    with closing(ref), make_dm(env_id, NUM_ENVS, num_threads=2, **kw) as env:
        space = ref.action_space
        space.seed(0)
        obs_ref, _ = ref.reset(seed=21)
        ts = env.reset(seed=21)
        assert ts.step_type.tolist() == [FIRST] * NUM_ENVS and ts.first().all()
        assert ts.reward.tolist() == [0.0] * NUM_ENVS and ts.discount.tolist() == [1.0] * 4
        assert ts.observation.tobytes() == obs_ref.tobytes()
        ended_before = np.zeros(NUM_ENVS, dtype=bool)
        seen = {"terminated": 0, "truncated": 0, "first": 0}
        for t in range(250):
            actions = space.sample()
            obs_ref, r_ref, term, trunc, _ = ref.step(actions)
            ts = env.step(actions)
            assert ts.observation.tobytes() == obs_ref.tobytes(), f"step {t}"
            assert ts.reward.tobytes() == r_ref.tobytes(), f"step {t}"
            expected = np.where(ended_before, FIRST, np.where(term | trunc, LAST, MID))
            assert ts.step_type.tolist() == expected.tolist(), f"step {t}"
            assert ts.discount.tolist() == np.where(term, 0.0, 1.0).tolist(), f"step {t}"
            for name, spec in (("observation", env.observation_spec()),
                               ("reward", env.reward_spec()), ("discount", env.discount_spec())):
                spec.validate(getattr(ts, name))
            seen["terminated"] += int(term.sum())
            seen["truncated"] += int((trunc & ~term).sum())
            seen["first"] += int(ended_before.sum())
            ended_before = term | trunc
        wanted = {"terminated"} if env_id in ("CartPole-v1", "FrozenLake-v1") else set()
        wanted |= {"truncated", "first"} if limit else set()
        assert all(seen[k] > 0 for k in wanted), seen


def test_specs() -> None:
    with make_dm("CartPole-v1", 3) as env:
        obs = env.observation_spec()
        assert isinstance(obs, specs.BoundedArray) and obs.shape == (3, 4)
        assert obs.dtype == np.float32 and obs.maximum[0, 0] == np.float32(4.8)
        act = env.action_spec()
        assert act.shape == (3,) and act.dtype == np.int64
        assert (int(act.minimum), int(act.maximum)) == (0, 1)
        single = env.single_action_spec()
        assert isinstance(single, specs.DiscreteArray) and single.num_values == 2
        assert env.single_observation_spec().shape == (4,)
        assert env.reward_spec() == specs.Array((3,), np.float64, name="reward")
        assert env.discount_spec().shape == (3,) and float(env.discount_spec().maximum) == 1.0
        act.validate(np.array([0, 1, 1]))
        with pytest.raises(ValueError):
            act.validate(np.array([0, 2, 1]))
    with make_dm("Pendulum-v1", 2) as env:
        act = env.action_spec()
        assert act.shape == (2, 1) and act.dtype == np.float32
        assert act.minimum.tolist() == [[-2.0], [-2.0]]


def test_is_an_environment_and_refuses_bad_input() -> None:
    env = make_dm("CartPole-v1", 2, num_threads=1, seed=5)
    assert isinstance(env, DmEnvironment) and isinstance(env, dm_env.Environment)
    first = env.step(np.zeros(2, dtype=np.int64))  # dm_env: a fresh env's step starts episodes
    assert first.first().all()
    assert env.reset(seed=5).observation.tobytes() == first.observation.tobytes()
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(2,\)"):
        env.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="dtype float64, expected integers"):
        env.step(np.zeros(2))
    ts = env.step(np.zeros(2, dtype=np.int64))  # still usable
    assert ts.mid().all()
    assert env.reset(seed=5).observation.tobytes() == first.observation.tobytes()
    env.close()
    with pytest.raises(aiopool.PoolClosed):
        env.step(np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize("env_id", ["dmc/cartpole-balance", "Pendulum-v1"])
def test_one_env_takes_a_scalar_for_a_one_number_action(env_id: str) -> None:
    """dm_control's ``env.step(0.1)`` works where the action spec is (1,): so does this."""
    with make_dm(env_id, seed=3) as a, make_dm(env_id, seed=3) as b:
        a.reset(), b.reset()
        for x in (0.1, -0.4, 0.7):
            ta, tb = a.step(x), b.step(np.array([x]))
            assert (ta.reward, ta.step_type) == (tb.reward, tb.step_type)
            np.testing.assert_array_equal(_flat(ta.observation), _flat(tb.observation))
        with pytest.raises(ValueError, match="shape"):
            a.step(np.zeros(2))


def _flat(obs: object) -> np.ndarray:
    values = obs.values() if isinstance(obs, dict) else [obs]
    return np.concatenate([np.ravel(v) for v in values])


def test_batched_needs_several_envs_or_asks_for_it() -> None:
    with pytest.raises(ValueError, match="batched=False needs num_envs=1"):
        make_dm("CartPole-v1", 2, batched=False)
    with make_dm("CartPole-v1", 1, batched=True) as env:
        ts = env.reset()
        assert ts.step_type.shape == (1,) and ts.observation.shape == (1, 4)


def test_one_env_timesteps_follow_gymnasium() -> None:
    """Unbatched: scalar step types, None reward and discount on FIRST, gymnasium's values."""
    ref = gym.make("CartPole-v1", max_episode_steps=40)
    with closing(ref), make_dm("CartPole-v1", seed=3, max_episode_steps=40) as env:
        ts = env.reset()
        obs_ref, _ = ref.reset(seed=3)
        assert ts.step_type is dm_env.StepType.FIRST and ts.reward is None
        assert ts.discount is None and ts.observation.tobytes() == obs_ref.tobytes()
        rng = np.random.default_rng(0)
        lasts = 0
        for t in range(300):
            a = int(rng.integers(2))
            ts = env.step(a)
            if ts.first():
                obs_ref, _ = ref.reset()
                assert ts.reward is None and ts.discount is None
            else:
                obs_ref, r, term, trunc, _ = ref.step(a)
                assert ts.reward == r and ts.discount == (0.0 if term else 1.0), f"step {t}"
                assert ts.last() == (term or trunc), f"step {t}"
                lasts += int(ts.last())
            assert ts.observation.tobytes() == obs_ref.tobytes(), f"step {t}"
        assert lasts > 2


class _Conformance(test_utils.EnvironmentTestMixin):
    """dm_env's own conformance tests, with an action sequence that ends episodes."""

    env_id = ""
    backend = "threads"
    kwargs: dict[str, Any] = {}  # noqa: RUF012

    def make_object_under_test(self) -> DmEnvironment:
        return make_dm(self.env_id, num_threads=1, seed=0, backend=self.backend, **self.kwargs)

    def make_action_sequence(self) -> Any:
        spec = self.environment.action_spec()
        rng = np.random.default_rng(0)
        for _ in range(300):
            if isinstance(spec, specs.DiscreteArray):
                yield np.int64(rng.integers(spec.num_values))
            else:
                yield rng.uniform(spec.minimum, spec.maximum).astype(spec.dtype)


class TestCartPoleConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "CartPole-v1"


class TestHopperConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "Hopper-v5"


class TestBlackjackConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "Blackjack-v1"  # a Tuple observation: a tuple of specs and of values


@pytest.mark.slow  # 30 s: ~1,000 frames through llvmpipe's 4096² shadow map
class TestHopperStatePixelsConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "Hopper-v5"  # a Dict of float64 states and uint8 frames, both stacked
    kwargs = {"obs_type": "state+pixels", "width": 12, "height": 10, "frame_stack": 2,  # noqa: RUF012
              "max_episode_steps": 40}


def _one_task_per_control_suite_domain() -> dict[str, str]:
    tasks: dict[str, str] = {}
    for env_id in sorted(i for i in aiopool.list_envs() if i.startswith("dmc/")):
        tasks.setdefault(env_id.removeprefix("dmc/").split("-")[0], env_id)
    return tasks


# Every Control Suite domain (one task each, the first by name): Dict observations as
# OrderedDicts in dm_control's key order, matrices among them (stacker's arm_pos), scalars
# (finger's dist_to_target), per-env models (lqr's springs, stacker's target), episodes that end
# at a 0.5 s limit or early (a PhysicsError from dm_env's unbounded random actions).
for _domain, _env_id in _one_task_per_control_suite_domain().items():
    _name = f"TestControlSuite_{_domain}_ConformsToDmEnv"
    globals()[_name] = type(_name, (_Conformance, absltest.TestCase),
                            {"env_id": _env_id, "kwargs": {"time_limit": 0.5}})


class TestControlSuiteTwoPolesConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "dmc/cartpole-two_poles"  # a model dm_control builds in Python
    kwargs = {"time_limit": 0.5}  # noqa: RUF012


class TestCartPoleInWorkerProcessesConformsToDmEnv(_Conformance, absltest.TestCase):
    env_id = "CartPole-v1"
    backend = "processes"  # gymnasium's Python CartPole through the process backend


@pytest.mark.parametrize("env_id", sorted(_one_task_per_control_suite_domain().values()))
def test_control_suite_specs_are_dm_control_s(env_id: str) -> None:
    """One task of each domain: the observation spec is dm_control's (an OrderedDict of
    unbounded ``Array``s named by their keys), the action spec too (an unnamed
    ``BoundedArray`` of the actuators' control ranges)."""
    from dm_control import suite

    domain, task = env_id.removeprefix("dmc/").split("-", 1)
    ref = suite.load(domain, task, task_kwargs={"random": 0})
    with make_dm(env_id, num_threads=1) as env:
        ours, theirs = env.observation_spec(), ref.observation_spec()
        assert list(ours) == list(theirs)
        for key, spec in theirs.items():
            assert (type(ours[key]), ours[key].name) == (type(spec), spec.name), key
            assert (ours[key].shape, ours[key].dtype) == (spec.shape, spec.dtype), key
        act, ref_act = env.action_spec(), ref.action_spec()
        assert (type(act), act.name, act.shape, act.dtype) == (type(ref_act), ref_act.name,
                                                               ref_act.shape, ref_act.dtype)
        assert np.array_equal(act.minimum, ref_act.minimum)
        assert np.array_equal(act.maximum, ref_act.maximum)
    ref.close()


def test_control_suite_flat_observation_is_dm_control_s() -> None:
    """``flat_observation=True``: dm_control's ``OrderedDict(observations=...)`` and its spec
    (the adapter gave the pool's bare array), equal value for value."""
    from dm_control import suite

    ref = suite.load("cheetah", "run", task_kwargs={"random": 3},
                     environment_kwargs={"flat_observation": True})
    with make_dm("dmc/cheetah-run", seed=3, flat_observation=True) as env:
        assert repr(env.observation_spec()) == repr(ref.observation_spec())
        with make_dm("dmc/cheetah-run", 2, seed=3, flat_observation=True) as batched:
            spec = batched.observation_spec()
            assert list(spec) == ["observations"] and spec["observations"].shape == (2, 17)
            assert list(batched.reset().observation) == ["observations"]
        ours, theirs = env.reset(), ref.reset()
        rng = np.random.default_rng(0)
        for _ in range(30):
            assert list(ours.observation) == ["observations"]
            np.testing.assert_array_equal(ours.observation["observations"],
                                          theirs.observation["observations"])
            assert (ours.reward, ours.discount) == (theirs.reward, theirs.discount)
            action = rng.uniform(-1, 1, 6)
            ours, theirs = env.step(action), ref.step(action)
        assert type(ours.reward) is type(theirs.reward) is float
        assert type(ours.discount) is type(theirs.discount) is float
    ref.close()


def test_control_suite_physics_error_is_raised_as_dm_control_s() -> None:
    """A NaN action: dm_control raises ``PhysicsError``; so does one env of ``make_dm`` (the
    pool ends that env's episode: the step returned a LAST with reward 0 and discount 1, a
    time limit to the eye). The next step starts a new episode."""
    from dm_control import suite
    from dm_control.rl.control import PhysicsError

    ref = suite.load("cheetah", "run", task_kwargs={"random": 1})
    ref.reset()
    with pytest.raises(PhysicsError) as theirs:
        ref.step(np.full(6, np.nan))
    with make_dm("dmc/cheetah-run", seed=1) as env:
        env.reset()
        with pytest.raises(PhysicsError) as ours:
            env.step(np.full(6, np.nan))
        assert str(ours.value) == str(theirs.value)
        assert "mjWARN_BADCTRL" in env.env_error()
        assert env.step(np.zeros(6)).first()
        assert env.step(np.zeros(6)).mid()
    with make_dm("dmc/cheetah-run", seed=1, time_limit=0.03) as env:  # 3 steps: a real limit
        env.reset()
        assert [env.step(np.zeros(6)).step_type for _ in range(3)][-1] == dm_env.StepType.LAST
    ref.close()


def test_control_suite_pixels_spec_is_pixels_wrapper_s_and_no_physics() -> None:
    """Pixel observations' spec is ``pixels.Wrapper``'s unbounded ``Array``; ``render()`` gives
    the frame; ``env.physics`` says what aiopool offers instead (dm_control code reaches for
    it)."""
    from dm_control import suite
    from dm_control.suite.wrappers import pixels

    ref = pixels.Wrapper(suite.load("cheetah", "run", task_kwargs={"random": 0}),
                         render_kwargs={"height": 24, "width": 32, "camera_id": 0})
    with make_dm("dmc/cheetah-run", obs_type="pixels", height=24, width=32, camera_id=0,
                 render_mode="rgb_array") as env:
        assert repr(env.observation_spec()) == repr(ref.observation_spec())
        ts = env.reset()
        np.testing.assert_array_equal(env.render(), ts.observation["pixels"])
        np.testing.assert_array_equal(ts.observation["pixels"], ref.reset().observation["pixels"])
        with pytest.raises(AttributeError, match="no dm_control Physics or Task"):
            env.physics  # noqa: B018
        with pytest.raises(AttributeError, match="object has no attribute 'phisics'"):
            env.phisics  # type: ignore[attr-defined]  # noqa: B018
    ref.close()


def test_one_env_takes_the_action_shapes_dm_control_takes() -> None:
    """dm_control copies an action into the spec's shape (np.copyto): a policy's (1, 6) steps
    walker's (6,), so does a number (broadcast), a (2, 3) or (6, 1) one is refused (the
    (2, 3) was reshaped and stepped)."""
    from dm_control import suite

    ref = suite.load("walker", "walk", task_kwargs={"random": 0})
    ref.reset()
    with make_dm("dmc/walker-walk", seed=0) as env:
        env.reset()
        for bad in (np.zeros((2, 3)), np.zeros((6, 1))):
            with pytest.raises(ValueError, match=r"action has shape .*, expected \(6,\)"):
                env.step(bad)
            with pytest.raises(ValueError):
                ref.step(bad)
        for action in (np.full((1, 6), 0.3), 0.2, np.full(1, -0.1)):
            ours, theirs = env.step(action), ref.step(action)
            assert ours.mid() and ours.reward == theirs.reward
            np.testing.assert_array_equal(ours.observation["orientations"],
                                          theirs.observation["orientations"])
    ref.close()
    with pytest.raises(ValueError, match="life_loss_info ends no episode"):
        make_dm("Breakout-v5", life_loss_info=True)
