"""``xla()``: env steps inside ``jax.jit`` / ``lax.scan``, on the EnvPool drop-in
(``aiopool.envpool``) and on aiopool's own pools (``aiopool.jax.xla``). Every jitted result is
compared with the Python API of a same-seed pool stepped with the same actions."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import aiopool  # noqa: E402
import aiopool.envpool as envpool  # noqa: E402
import aiopool.jax as aiojax  # noqa: E402

JaxRuntimeError = jax.errors.JaxRuntimeError


@pytest.fixture(autouse=True, scope="module")
def x64() -> Any:
    """64-bit jax arrays, so that float64 observations compare bit for bit. Set globally, not
    with ``jax.enable_x64()``: that context is the calling thread's, and XLA may run a
    callback on another thread."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def plain(tree: Any) -> Any:
    """A Python API result with its info dicts as plain dicts (as jax's pytrees know them)."""
    if isinstance(tree, dict):
        return {k: plain(v) for k, v in tree.items()}
    if type(tree) is tuple:
        return tuple(plain(v) for v in tree)
    return tree


def assert_same(python: Any, jitted: Any, where: str) -> None:
    """Equal trees, leaf for leaf, bit for bit (same dtypes: x64 is on)."""
    want, want_tree = jax.tree.flatten(plain(python))
    got, got_tree = jax.tree.flatten(plain(jitted))
    assert want_tree == got_tree, f"{where}: {want_tree} != {got_tree}"
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        w, g = np.asarray(w), np.asarray(g)
        assert w.dtype == g.dtype, f"{where}: leaf {i}: {w.dtype} != {g.dtype}"
        assert w.shape == g.shape, f"{where}: leaf {i}: {w.shape} != {g.shape}"
        assert w.tobytes() == g.tobytes(), f"{where}: leaf {i}: {w} != {g}"


def by_env_id(batch: Any) -> Any:
    """A batch's rows in env_id order."""
    order = np.argsort(np.asarray(batch.env_id))
    return jax.tree.map(lambda x: np.asarray(x)[order], batch)


def at(tree: Any, t: int) -> Any:
    return jax.tree.map(lambda x: np.asarray(x[t]), tree)


def scan_steps(step: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """A jitted ``lax.scan`` of ``step`` over ``actions`` (one row per step)."""

    @jax.jit
    def rollout(handle: Any, actions: Any) -> Any:
        def body(handle: Any, action: Any) -> Any:
            return step(handle, action)

        return jax.lax.scan(body, handle, actions)

    return rollout


# -- the mechanism ------------------------------------------------------------------------

def counting(num_envs: int) -> aiopool.Pool:
    """A Counting-v0 pool, reset and received: obs = [events, episode, elapsed, action]."""
    pool = aiopool.make("Counting-v0", num_envs=num_envs, num_threads=1, episode_length=1000)
    pool.async_reset()
    pool.recv_blocking()
    return pool


def test_scan_of_t_steps_makes_t_env_steps_in_order() -> None:
    pool = counting(3)
    handle, _, _, step = aiojax.xla(pool)
    actions = np.arange(3 * 7, dtype=np.int32).reshape(7, 3)
    _, batches = scan_steps(step)(handle, actions)
    obs = np.asarray(batches.obs)  # [events, episode, elapsed, last_action]
    env_id = np.asarray(batches.env_id)
    for t in range(7):
        order = np.argsort(env_id[t])
        assert obs[t][order][:, 2].tolist() == [t + 1] * 3  # elapsed 1 ... T
        assert obs[t][order][:, 3].tolist() == actions[t].tolist()  # this step's action
    assert np.asarray(batches.info["elapsed_step"])[-1].tolist() == [7, 7, 7]
    # The same compiled function run again steps again; a Python receive then finds nothing.
    _, again = scan_steps(step)(handle, actions)
    assert np.asarray(again.info["elapsed_step"])[-1].tolist() == [14, 14, 14]
    assert pool.try_recv() is None
    pool.close()


def test_unused_send_still_steps() -> None:
    pool = counting(2)
    handle, _, send, _ = aiojax.xla(pool)
    jax.jit(lambda h: send(h, jnp.ones(2, jnp.int32)))(handle)  # result not used by anyone
    batch = pool.recv_blocking(timeout=10)
    assert np.array(batch.info["elapsed_step"]).tolist() == [1, 1]
    pool.close()


def test_fori_while_cond_and_eager() -> None:
    pool = counting(2)
    handle, recv, send, step = aiojax.xla(pool)
    a = jnp.ones(2, jnp.int32)

    def elapsed(h: Any) -> Any:
        h, batch = step(h, a)
        return h, batch.info["elapsed_step"].max()

    h = jax.jit(lambda h: jax.lax.fori_loop(0, 3, lambda i, h: elapsed(h)[0], h))(handle)
    h, e = jax.jit(lambda h: jax.lax.while_loop(lambda c: c[1] < 6, lambda c: elapsed(c[0]),
                                                (h, jnp.int32(0))))(h)
    assert int(e) == 6
    h, e = jax.jit(lambda h, p: jax.lax.cond(p, elapsed, lambda h: (h, jnp.int32(-1)), h))(
        h, True)
    assert int(e) == 7
    h, e = elapsed(h)  # eager
    assert int(e) == 8
    h, batch = recv(send(h, a))  # eager send, then recv
    assert np.asarray(batch.info["elapsed_step"]).tolist() == [9, 9]
    pool.close()


@pytest.mark.parametrize(("env_id", "autoreset"), [
    ("CartPole-v1", "next_step"), ("CartPole-v1", "same_step"),
    ("dmc/cartpole-balance", "same_step")])
def test_own_pool_equals_recv_blocking_loop(env_id: str, autoreset: str) -> None:
    """Every field, the split Dict observations and same_step's final_obs / final_info too."""
    kw: dict[str, Any] = {"num_envs": 4, "num_threads": 1, "seed": 3, "autoreset": autoreset}
    pool, ref = aiopool.make(env_id, **kw), aiopool.make(env_id, **kw)
    for p in (pool, ref):
        p.async_reset()
        p.recv_blocking()
    handle, _, _, step = aiojax.xla(pool)
    space = pool.single_action_space
    actions = policy(pool.spec, 4, 40)
    _, batches = scan_steps(step)(handle, actions)
    for t in range(40):
        ref.send(actions[t].astype(np.int64 if hasattr(space, "n") else space.dtype))
        b = ref.recv_blocking()
        got = at(batches, t)
        want = aiojax.XlaBatch(b.obs, b.reward, b.terminated, b.truncated, b.env_id,
                               dict(b.info))
        assert_same(by_env_id(want), by_env_id(got), f"step {t}")
    pool.close()
    ref.close()


# -- parity: the drop-in's jitted rollout against its Python step loop -----------------------

CASES: list[tuple[str, dict[str, Any], int]] = [
    ("CartPole-v1", {}, 60),
    ("FrozenLake-v1", {}, 30),
    ("Pong-v5", {"episodic_life": True, "reward_clip": True}, 40),
    ("Breakout-v5", {"gray_scale": False, "episodic_life": True,
                     "zero_discount_on_life_loss": True}, 40),
    ("Ant-v5", {}, 20),
    ("CheetahRun-v1", {}, 20),
]


def policy(spec: Any, num_envs: int, steps: int) -> np.ndarray:
    """Fixed actions: one row of ``num_envs`` per step, varied per env and step."""
    rng = np.random.default_rng(0)
    space = spec.action_space
    if hasattr(space, "n"):
        return rng.integers(0, int(space.n), (steps, num_envs)).astype(np.int32)
    low, high = np.asarray(space.low), np.asarray(space.high)
    return rng.uniform(low, high, (steps, num_envs, *space.shape)).astype(space.dtype)


@pytest.mark.parametrize("env_type", ["gymnasium", "dm"])
@pytest.mark.parametrize(("task", "kwargs", "steps"), CASES, ids=[c[0] for c in CASES])
def test_sync_rollout_equals_python_steps(task: str, kwargs: dict[str, Any], steps: int,
                                          env_type: str) -> None:
    kw = {"num_envs": 3, "seed": 7, **kwargs}
    env, ref = envpool.make(task, env_type, **kw), envpool.make(task, env_type, **kw)
    env.reset()
    ref.reset()
    actions = policy(env.spec, 3, steps)
    handle, _, _, step = env.xla()
    _, states = scan_steps(step)(handle, actions)
    for t in range(steps):
        assert_same(ref.step(actions[t]), at(states, t), f"{task} step {t}")
    env.close()
    ref.close()


@pytest.mark.parametrize(("task", "kwargs", "steps"), CASES, ids=[c[0] for c in CASES])
def test_async_rollout_equals_python_steps(task: str, kwargs: dict[str, Any],
                                           steps: int) -> None:
    """batch_size < num_envs, with env_id in send: each env's rows equal the Python loop's
    rows of that env (the envs that finish first may differ from run to run)."""
    kw = {"num_envs": 4, "batch_size": 2, "num_threads": 1, "seed": 7, **kwargs}
    env, ref = envpool.make(task, "gymnasium", **kw), envpool.make(task, "gymnasium", **kw)
    actions = policy(env.spec, 4, steps)
    handle, recv, send, _ = env.xla()

    @jax.jit
    def rollout(handle: Any, env_id: Any) -> Any:
        def body(carry: Any, t: Any) -> Any:
            handle, env_id = carry
            handle = send(handle, jnp.asarray(actions)[t, env_id], env_id)
            handle, state = recv(handle)
            return (handle, state[4]["env_id"]), state

        return jax.lax.scan(body, (handle, env_id), jnp.arange(steps))

    def rows_by_env(states: Any, n: int) -> dict[int, list[Any]]:
        out: dict[int, list[Any]] = {}
        for t in range(n):
            s = plain(at(states, t))
            for r, i in enumerate(np.asarray(s[4]["env_id"]).tolist()):
                out.setdefault(i, []).append(jax.tree.map(lambda x, r=r: np.asarray(x)[r], s))
        return out

    env.async_reset()
    first = env.recv()
    _, states = rollout(handle, first[4]["env_id"])
    ref.async_reset()
    s = ref.recv()
    python = [plain(s)]
    for t in range(steps):
        ids = s[4]["env_id"]
        ref.send(actions[t, ids], ids)
        s = ref.recv()
        python.append(plain(s))
    got = rows_by_env(states, steps)
    want: dict[int, list[Any]] = {}
    for s in python[1:]:
        for r, i in enumerate(np.asarray(s[4]["env_id"]).tolist()):
            want.setdefault(i, []).append(jax.tree.map(lambda x, r=r: np.asarray(x)[r], s))
    for i in range(4):
        k = min(len(got.get(i, [])), len(want.get(i, [])))
        assert k >= steps // 4, f"env {i}: {k} rows only"
        for j in range(k):
            assert_same(want[i][j], got[i][j], f"{task} env {i} row {j}")
    env.close()
    ref.close()


def test_python_and_jitted_calls_interleave() -> None:
    """Python reset, a jitted rollout, Python steps, a jitted rollout: the Python loop's rows
    (Atari's episodic-life bookkeeping goes on across the boundaries)."""
    kw = {"num_envs": 2, "seed": 1, "episodic_life": True, "reward_clip": True}
    env, ref = envpool.make("Breakout-v5", "gymnasium", **kw), envpool.make(
        "Breakout-v5", "gymnasium", **kw)
    actions = policy(env.spec, 2, 4 * 25)
    handle, _, _, step = env.xla()
    rollout = scan_steps(step)
    assert_same(ref.reset(), env.reset(), "reset")
    t = 0
    for _ in range(2):
        _, states = rollout(handle, actions[t:t + 25])
        for k in range(25):
            assert_same(ref.step(actions[t]), at(states, k), f"jitted step {t}")
            t += 1
        for _ in range(25):
            assert_same(ref.step(actions[t]), env.step(actions[t]), f"Python step {t}")
            t += 1
    env.close()
    ref.close()


# -- errors -------------------------------------------------------------------------------

def cartpole(**kw: Any) -> Any:
    env = envpool.make("CartPole-v1", "gymnasium", num_envs=2, **kw)
    env.reset()
    return env


def test_closed_pool_is_an_error() -> None:
    env = cartpole()
    handle, _, _, step = env.xla()
    f = jax.jit(lambda h: step(h, jnp.zeros(2, jnp.int32)))
    f(handle)
    env.close()
    with pytest.raises(JaxRuntimeError, match="closed"):
        jax.block_until_ready(f(handle))


def test_recv_with_nothing_in_flight_is_an_error() -> None:
    env = cartpole()
    handle, recv, _, _ = env.xla()
    with pytest.raises(JaxRuntimeError, match="in flight"):
        jax.block_until_ready(jax.jit(recv)(handle))
    env.close()


def test_wrong_action_shape_is_an_error_and_the_env_goes_on() -> None:
    env = cartpole()
    handle, _, _, step = env.xla()
    with pytest.raises(JaxRuntimeError, match="action has shape"):
        jax.block_until_ready(jax.jit(lambda h: step(h, jnp.zeros(3, jnp.int32)))(handle))
    _, state = jax.jit(lambda h: step(h, jnp.zeros(2, jnp.int32)))(handle)
    assert np.asarray(state[4]["elapsed_step"]).tolist() == [1, 1]
    env.close()


def test_out_of_range_action_is_an_error() -> None:
    env = cartpole()
    handle, _, _, step = env.xla()
    with pytest.raises(JaxRuntimeError, match="expected 0 <= action < 2"):
        jax.block_until_ready(jax.jit(lambda h: step(h, jnp.full(2, 5, jnp.int32)))(handle))
    env.close()


def test_vmap_and_grad_are_refused() -> None:
    env = envpool.make("Pendulum-v1", "gymnasium", num_envs=2)
    env.reset()
    handle, _, send, step = env.xla()
    with pytest.raises(ValueError, match="vmap"):
        jax.vmap(lambda a: step(handle, a)[1][1])(jnp.zeros((3, 2, 1)))
    with pytest.raises(ValueError, match="gradient"):
        jax.grad(lambda a: step(handle, a)[1][1].sum())(jnp.zeros((2, 1)))
    with pytest.raises(ValueError, match="gradient"):
        jax.jvp(lambda a: send(handle, a), (jnp.zeros((2, 1)),), (jnp.ones((2, 1)),))
    env.close()


def test_two_pools_do_not_cross_and_xla_twice_works() -> None:
    a, b = cartpole(seed=1), envpool.make("CartPole-v1", "gymnasium", num_envs=3, seed=2)
    b.reset()
    ha, _, _, step_a = a.xla()
    hb, _, _, step_b = b.xla()
    _, _, _, step_b2 = b.xla()
    assert not np.array_equal(ha, hb)

    @jax.jit
    def both(ha: Any, hb: Any) -> Any:
        ha, sa = step_a(ha, jnp.zeros(2, jnp.int32))
        hb, sb = step_b(hb, jnp.zeros(3, jnp.int32))
        _, sb2 = step_b2(hb, jnp.zeros(3, jnp.int32))
        return sa[4]["elapsed_step"], sb[4]["elapsed_step"], sb2[4]["elapsed_step"]

    ea, eb, eb2 = both(ha, hb)
    assert np.asarray(ea).tolist() == [1, 1]
    assert np.asarray(eb).tolist() == [1, 1, 1]
    assert np.asarray(eb2).tolist() == [2, 2, 2]
    a.close()
    b.close()


# -- the native path ----------------------------------------------------------------------

needs_ffi = pytest.mark.skipif(not aiojax.built_with_ffi(), reason="aiopool was built without "
                               "jaxlib's FFI headers: rebuild with jaxlib installed")


@needs_ffi
def test_native_handlers_run_the_steps_with_no_python_call() -> None:
    pool = counting(2)
    handle, _, _, step = aiojax.xla(pool)
    f = jax.jit(lambda h: step(h, jnp.ones(2, jnp.int32)))
    text = f.lower(handle).as_text()
    assert "aiopool_core_send" in text and "aiopool_core_recv" in text
    assert "callback" not in text.lower()
    python_calls = []
    pool.recv_blocking = lambda *a, **k: python_calls.append(a)  # type: ignore[method-assign]
    pool.send = lambda *a, **k: python_calls.append(a)  # type: ignore[method-assign]
    _, batch = f(handle)
    assert np.asarray(batch.info["elapsed_step"]).tolist() == [1, 1]
    assert python_calls == []
    pool.close()


@needs_ffi
def test_a_destroyed_pool_is_an_error_not_a_use_after_free() -> None:
    pool = counting(2)
    handle, _, _, step = aiojax.xla(pool)
    f = jax.jit(lambda h: step(h, jnp.ones(2, jnp.int32)))
    f(handle)
    del pool
    gc.collect()
    with pytest.raises(JaxRuntimeError, match="closed"):
        jax.block_until_ready(f(handle))


def test_a_close_from_another_thread_ends_a_waiting_receive() -> None:
    """A jitted receive waiting for steps that never finish returns an error at close."""
    pool = aiopool.make("Counting-v0", num_envs=2, num_threads=1, step_ns=1_000_000_000)
    pool.async_reset()
    pool.recv_blocking()
    handle, _, _, step = aiojax.xla(pool)
    f = jax.jit(lambda h: step(h, jnp.ones(2, jnp.int32)))
    timer = threading.Timer(0.3, pool.close)
    timer.start()
    t0 = time.monotonic()
    with pytest.raises(JaxRuntimeError, match="closed"):
        jax.block_until_ready(f(handle))
    assert time.monotonic() - t0 < 10
    timer.join()


@needs_ffi
@pytest.mark.parametrize("kwargs", [{}, {"episodic_life": True}, {"gray_scale": False}])
def test_atari_runs_natively(kwargs: dict[str, Any]) -> None:
    """The drop-in's Atari rows (frame stack, RGB channels first, per-life bookkeeping) are
    computed in the graph, the bookkeeping's bytes read and written by the handlers."""
    env = envpool.make("Pong-v5", "gymnasium", num_envs=1, **kwargs)
    env.reset()
    handle, _, _, step = env.xla()
    text = jax.jit(lambda h: step(h, jnp.zeros(1, jnp.int32))).lower(handle).as_text()
    assert "aiopool_atari_recv" in text and "callback" not in text.lower()
    assert ("aiopool_atari_state_get" in text) == bool(kwargs.get("episodic_life"))
    env.close()


def test_an_env_error_arrives_with_its_message() -> None:
    """A Python env in worker processes (the process backend: xla() over io_callback) that
    raises: the jitted receive fails with the EnvError's message, and the pool goes on."""
    from test_process_backend import Flaky

    with aiopool.make(Flaky, num_envs=2, batch_size=2, num_workers=1, fail_at=3,
                      episode_length=100) as pool:
        pool.async_reset()
        pool.recv_blocking()
        handle, _, _, step = aiojax.xla(pool)
        f = jax.jit(lambda h: step(h, jnp.ones(2, jnp.int64)))
        handle, _ = f(handle)
        handle, _ = f(handle)
        with pytest.raises(JaxRuntimeError, match="boom at step 3"):
            jax.block_until_ready(f(handle))
        _, batch = f(handle)  # the failed envs reset on their next send
        assert np.asarray(batch.info["elapsed_step"]).tolist() == [0, 0]


def test_python_and_jitted_receives_interleave_on_a_pool() -> None:
    kw: dict[str, Any] = {"num_envs": 2, "num_threads": 1, "episode_length": 1000}
    pool = aiopool.make("Counting-v0", **kw)
    pool.async_reset()
    pool.recv_blocking()
    handle, recv, send, _ = aiojax.xla(pool)
    a = jnp.ones(2, jnp.int64)
    handle = jax.jit(send)(handle, a)
    assert np.sort(pool.recv_blocking().info["elapsed_step"]).tolist() == [1, 1]
    pool.send(np.ones(2, np.int64))
    handle, batch = jax.jit(recv)(handle)
    assert np.sort(np.asarray(batch.info["elapsed_step"])).tolist() == [2, 2]
    pool.close()


def test_without_the_native_handlers_xla_falls_back_with_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a build without jaxlib: io_callbacks of the Python API, the same rows."""
    monkeypatch.setattr(aiojax, "native_handlers", lambda native: False)
    monkeypatch.setattr(aiojax, "built_with_ffi", lambda: False)
    env, ref = cartpole(seed=3), cartpole(seed=3)
    with pytest.warns(RuntimeWarning, match="rebuild aiopool where jaxlib is importable"):
        handle, _, _, step = env.xla()
    actions = policy(env.spec, 2, 20)
    rollout = scan_steps(step)
    assert "callback" in rollout.lower(handle, actions).as_text().lower()
    _, states = rollout(handle, actions)
    for t in range(20):
        assert_same(ref.step(actions[t]), at(states, t), f"step {t}")
    pool = counting(2)
    with pytest.warns(RuntimeWarning, match="rebuild aiopool"):
        handle, _, _, step = aiojax.xla(pool)
    _, batch = jax.jit(lambda h: step(h, jnp.ones(2, jnp.int64)))(handle)
    assert np.asarray(batch.info["elapsed_step"]).tolist() == [1, 1]
    for p in (env, ref, pool):
        p.close()
