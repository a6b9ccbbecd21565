"""The registry finds native families only through their declarations (_native/families.py):
a family declared there is listed, made and named in errors, and its properties reach the
pools' specs; the declarations agree with what the modules register and what C++ enforces."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pytest

import aiopool
from aiopool import registry
from aiopool._native import _core
from aiopool._native.families import FAMILIES, NativeFamily


def _only(monkeypatch: pytest.MonkeyPatch, *extra: NativeFamily) -> None:
    """The registry as a fresh process with ``extra`` declared after the built-in families."""
    monkeypatch.setattr(registry, "FAMILIES", (*FAMILIES, *extra))
    monkeypatch.setattr(registry, "_loaded", {"_core": _core})
    monkeypatch.setattr(registry, "_unavailable", {})


def _counting_as(env_id: str) -> ModuleType:
    """A stand-in extension module that registers ``env_id``: Counting-v0 under another id."""
    def pool(_: str, *args: Any) -> _core.Pool:
        return _core.Pool("Counting-v0", *args)

    return cast(ModuleType, SimpleNamespace(
        list_envs=lambda: [env_id], env_config=lambda _: _core.env_config("Counting-v0"),
        Pool=pool))


def test_a_family_declared_once_is_listed_made_and_reaches_the_spec(
        monkeypatch: pytest.MonkeyPatch) -> None:
    before = aiopool.list_envs()
    puzzle = NativeFamily(name="puzzle", title="puzzle", module="_puzzle",
                          ids=frozenset({"Puzzle-v0"}), rejects_nan_actions=False)
    monkeypatch.setitem(sys.modules, "aiopool._native._puzzle", _counting_as("Puzzle-v0"))
    _only(monkeypatch, puzzle)
    assert aiopool.list_envs() == [*before, "Puzzle-v0"]
    assert registry.family_of("Puzzle-v0") is puzzle
    with aiopool.make("Puzzle-v0", num_envs=2) as pool:
        assert pool.backend == "threads"
        assert (pool.spec.id, pool.spec.family, pool.spec.rejects_nan_actions) == (
            "Puzzle-v0", "puzzle", False)
        pool.async_reset()
        assert sorted(pool.recv_blocking(timeout=5).env_id.tolist()) == [0, 1]
    with aiopool.make("CartPole-v1") as pool:
        assert (pool.spec.family, pool.spec.rejects_nan_actions) == ("classic_control", True)


def test_an_id_of_a_family_this_build_cannot_load_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_simulator() -> None:
        raise ImportError("puzzles need libpuzzle==1.0; pip install libpuzzle==1.0")

    before = aiopool.list_envs()
    listed = NativeFamily(name="puzzle", title="puzzle", module="_puzzle",
                          ids=frozenset({"Puzzle-v0"}), preload=no_simulator)
    patterned = NativeFamily(name="board", title="board game", module="_no_such_module",
                             pattern=r"Board[A-Z]\w*-v1", not_built="built without boards")
    _only(monkeypatch, listed, patterned)
    with pytest.raises(ValueError, match=r"Puzzle-v0 is one of aiopool's puzzle envs, which are "
                                         r"unavailable here: puzzles need libpuzzle==1\.0"):
        aiopool.make("Puzzle-v0")
    with pytest.raises(ValueError, match="BoardChess-v1 is one of aiopool's board game envs, "
                                         "which are unavailable here: built without boards"):
        aiopool.make("BoardChess-v1")
    assert registry.unavailable_families() == {
        "puzzle": "puzzles need libpuzzle==1.0; pip install libpuzzle==1.0",
        "board game": "built without boards"}
    assert aiopool.list_envs() == before
    assert registry.family_of("BoardGo-v1") is patterned
    with pytest.raises(ValueError, match=r"unknown env id 'Boardgo-v1'"):
        aiopool.make("Boardgo-v1")


def test_each_family_declares_the_ids_its_module_registers() -> None:
    modules = {m.__name__.rsplit(".", 1)[1]: m for m in registry._modules()}
    listed: list[str] = []
    for family in FAMILIES:
        if family.module not in modules:
            continue
        ids = modules[family.module].list_envs()
        listed += ids
        assert family.ids <= set(ids), family.title
        for env_id in ids:
            assert registry.family_of(env_id) is family, env_id
            # What make() says of the id when the module cannot load: its own family, or
            # (for a family that declares nothing, as _core always loads) none.
            declared = registry._declared(env_id)
            assert declared is (family if family.ids or family.pattern else None), env_id
    assert aiopool.list_envs() == listed


@pytest.mark.slow  # every env (5 s): the exhaustive tier
def test_the_specs_rejects_nan_actions_is_what_send_enforces() -> None:
    # Each family's ids, at most 12 (Atari's 104 games load a ROM each and are all discrete).
    modules = registry._modules()
    for env_id in [i for module in modules for i in module.list_envs()[:12]]:
        with aiopool.make(env_id, num_envs=1, num_threads=1) as pool:
            family = registry.family_of(env_id)
            assert family is not None and pool.spec.family == family.name
            assert pool.spec.rejects_nan_actions == family.rejects_nan_actions
            space = pool.single_action_space
            if not isinstance(space, gym.spaces.Box):
                continue
            pool.async_reset()
            pool.recv_blocking(timeout=30)
            nan = np.full((1, *space.shape), np.nan, dtype=space.dtype)
            if pool.spec.rejects_nan_actions:
                with pytest.raises(ValueError, match="must not be NaN"):
                    pool.send(nan)
            else:  # the simulator takes it, as gymnasium passes it
                pool.send(nan)
                pool.recv_blocking(timeout=30)
            for inf in (np.inf, -np.inf):  # every family takes it, as gymnasium's envs do
                pool.send(np.full((1, *space.shape), inf, dtype=space.dtype))
                pool.recv_blocking(timeout=30)
