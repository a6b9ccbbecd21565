"""MkDocs hook: the pages the site makes from the code at build time, so they cannot drift.

- ``environments/catalogue.md``: every id ``aiopool.list_envs()`` gives, grouped by family, with
  its spaces and time limit (from ``aiopool.make(id).spec``), its kwargs with their kinds and
  defaults (the native module's ``env_config(id)``), the family's reference and parity
  guarantee, whether it renders (``spec.renders``), and a frame from ``docs/images/frames/``
  where one was drawn (``python docs/frames.py``).
- ``reference/<module>.md``: one page per public module that declares ``__all__`` (the package
  and its subpackages; a module whose ``__all__`` its package re-exports whole is left to the
  package's page), rendered by mkdocstrings from the docstrings; the nav lists them under
  "API reference".

Needs aiopool installed (``pip install -e ".[docs]"``).
"""

from __future__ import annotations

import ast
import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.generate")

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "aiopool"
CATALOGUE = "environments/catalogue.md"
FRAMES = "images/frames"

# What each family is checked against, as the parity tests state it (README / DESIGN.md §4).
FAMILIES: dict[str, dict[str, str]] = {
    "classic_control": {
        "title": "Classic control",
        "reference": "gymnasium 1.4",
        "parity": "**bit for bit**: observations, rewards, terminated, truncated, through "
                  "autoresets, in every autoreset mode",
        "test": "tests/test_parity_classic_control.py",
        "frames": "gymnasium's own pygame drawing of the env's state "
                  "(`pip install -e \".[render]\"`)",
    },
    "toy_text": {
        "title": "Toy text",
        "reference": "gymnasium 1.4",
        "parity": "**bit for bit**, seeds included: observations, rewards, terminated, "
                  "truncated and `info[\"prob\"]` (Taxi's `action_mask` too), with every kwarg, "
                  "through autoresets, in every autoreset mode",
        "test": "tests/test_parity_classic_control.py",
        "frames": "gymnasium's own pygame drawing of the env's state "
                  "(`pip install -e \".[render]\"`)",
    },
    "mujoco": {
        "title": "MuJoCo",
        "reference": "gymnasium 1.4 on MuJoCo 3.17.0",
        "parity": "**bit for bit**: observations (and with them qpos/qvel), rewards, terminated, "
                  "truncated and every info value with its dtype, from the same seeds, through "
                  "autoresets, with default and non-default kwargs",
        "test": "tests/test_parity_mujoco.py",
        "frames": "gymnasium's own `MujocoRenderer` (EGL where `MUJOCO_GL` is unset), with "
                  "gymnasium's rendering kwargs (`width`, `height`, `camera_id`, ...)",
    },
    "atari": {
        "title": "Atari",
        "reference": "ale-py 0.12.1 `AtariVectorEnv`",
        "parity": "**bit for bit** at every step: observations, rewards, terminated, truncated, "
                  "lives and frame numbers, in grayscale and RGB, with and without noop resets, "
                  "episodic life, sticky actions and the other options",
        "test": "tests/test_parity_atari.py",
        "frames": "ale-py's `env.render()`: the last emulated screen in colour, drawn in C++ "
                  "with the GIL released",
    },
    "box2d": {
        "title": "Box2D",
        "reference": "gymnasium 1.4 with `box2d` 2.3.10",
        "parity": "**bit for bit**: observations, rewards, terminated, truncated, through "
                  "autoresets, in every autoreset mode, with every kwarg (LunarLander's "
                  "`continuous`, `gravity`, `enable_wind`, `wind_power`, `turbulence_power`; "
                  "BipedalWalker's `hardcore`; CarRacing's `continuous`, `lap_complete_percent`, "
                  "`domain_randomize`), landings, crashes, falls, finished laps and cars off the "
                  "field included; CarRacing's observation (its 96×96 frame) byte for byte too",
        "test": "tests/test_parity_classic_control.py",
        "frames": "gymnasium's own pygame drawing of the env's state, LunarLander's engine "
                  "particles and BipedalWalker's terrain, clouds and lidar included; "
                  "CarRacing's frames in C++ with copies of pygame's rasterisers "
                  "(`pip install -e \".[render]\"`)",
    },
    "dmc": {
        "title": "DeepMind Control Suite",
        "reference": "dm_control 1.0.50 on MuJoCo 3.17.0",
        "parity": "**bit for bit**: the observation dict (keys in dm_control's order, dtypes, "
                  "values), rewards, and episode ends (LAST with discount 1 is a truncation, "
                  "discount 0 a termination), from the same `RandomState` seeds, through resets, "
                  "in every autoreset mode, with `time_limit`, `n_sub_steps` and task kwargs",
        "test": "tests/test_parity_dmc.py",
        "frames": "dm_control's own `physics.render` of each env's model and data (EGL where "
                  "`MUJOCO_GL` is unset), with its `width`, `height` and `camera_id` (a camera's "
                  "name too)",
    },
    "minigrid": {
        "title": "MiniGrid",
        "reference": "minigrid 3.2.0",
        "parity": "**bit for bit**, seed for seed: layouts, placements and missions from the same "
                  "seeds, the observation's direction, 7×7×3 image and mission string, rewards, "
                  "terminated and truncated (minigrid's own `max_steps`), through autoresets, in "
                  "every autoreset mode",
        "test": "tests/test_parity_minigrid.py",
        "frames": "minigrid's own tile renderer drawing each env's grid, with its `tile_size`, "
                  "`highlight` and `agent_pov`",
    },
    "procgen": {
        "title": "Procgen",
        "reference": "procgen 0.10.7's `ProcgenGym3Env` (its own library, fetched from PyPI on "
                     "first use)",
        "parity": "**equal**, the games being procgen's own library: frames, rewards, episode "
                  "ends and `level_seed` / `prev_level_seed` / `prev_level_complete` from the "
                  "same seeds, through level ends, resets and re-seeds, with every option",
        "test": "tests/test_parity_procgen.py",
        "frames": "procgen's 512×512 `info[\"rgb\"]` frames, drawn by its library",
    },
}
# Envs with no reference implementation.
OWN_ENVS = {
    "Counting-v0": "a deterministic env for testing pools and pipelines: obs = `[events, "
                   "episode, elapsed, last_action]`, reward = action",
}


# -- the environment catalogue -------------------------------------------------------------

def _space(space: Any) -> str:
    name = type(space).__name__
    if name == "Discrete":
        return f"`Discrete({int(space.n)})`"
    if name in ("Tuple", "Dict"):
        items = (space.spaces.items() if name == "Dict" else
                 ((None, part) for part in space.spaces))
        inner = ", ".join(f"{key}: {_space(part)}" if key else _space(part)
                          for key, part in items)
        return f"{name}({inner.replace('`', '')})".join("``")
    if name == "Text":
        return f"`Text(max_length={int(space.max_length)})`"
    low, high = np.asarray(space.low), np.asarray(space.high)
    shape = tuple(space.shape)
    if low.size and low.min() == low.max() and high.min() == high.max():
        return f"`Box({low.flat[0]:g}, {high.flat[0]:g}, {shape}, {space.dtype})`"
    return f"`Box({shape}, {space.dtype})`"


def _value(kind: str, default: Any) -> str:
    """A default as ``make`` takes it (the registry keeps numbers as floats)."""
    from aiopool import registry

    return f"`{registry._default(kind, default)!r}`"


def _kwargs_table(entries: list[tuple[str, list[tuple[str, str, Any]]]]) -> list[str]:
    """One table for ids that take the same kwargs (names and kinds): a default that differs
    between the ids is given per id."""
    ids = [env_id for env_id, _ in entries]
    keys = entries[0][1]
    if not keys:
        return ["No kwargs.", ""]
    lines = ["| kwarg | kind | default |", "|---|---|---|"]
    for i, (name, kind, _) in enumerate(keys):
        defaults = {env_id: _value(kind, config[i][2]) for env_id, config in entries}
        if len(set(defaults.values())) == 1:
            default = defaults[ids[0]]
        else:
            default = f"per id ({defaults[ids[0]]} for `{ids[0]}`)"
        lines.append(f"| `{name}` | {kind} | {default} |")
    return [*lines, ""]


def catalogue() -> str:
    import aiopool
    from aiopool import registry

    by_family: dict[str, list[tuple[str, Any, list[tuple[str, str, Any]]]]] = defaultdict(list)
    for env_id in aiopool.list_envs():
        with aiopool.make(env_id, num_envs=1, num_threads=1) as pool:
            spec = pool.spec
        keys, _ = registry._module_for(env_id).env_config(env_id)
        family = registry.family_of(env_id)
        # set by make
        hidden = (family.render_config | family.prepared) if family is not None else frozenset()
        by_family[spec.family or ""].append((env_id, spec, [k for k in keys
                                                             if k[0] not in hidden]))

    frames_dir = Path(__file__).resolve().parents[1] / FRAMES
    total = sum(len(v) for v in by_family.values())
    out = [
        "# Environment catalogue",
        "",
        f"Every id `aiopool.list_envs()` gives in this build ({total} ids), generated from the "
        "registry when the site is built (`docs/hooks/generate.py`): each id's spaces and time "
        "limit as `aiopool.make(id).spec` gives them, its constructor kwargs with their kinds "
        "and defaults (the native module's `env_config(id)`), and whether it renders "
        "(`spec.renders`, with `render_mode=\"rgb_array\"`). What each family's kwargs mean is "
        "on [Environments](index.md); how frames are made, on [Rendering](../rendering.md).",
        "",
    ]
    unavailable = registry.unavailable_families()
    if unavailable:
        out += ["!!! warning \"Families this build cannot make\"", ""]
        out += [f"    - {title}: {why}" for title, why in unavailable.items()]
        out.append("")
    for name, envs in by_family.items():
        facts = FAMILIES.get(name, {"title": name or "other", "reference": "—", "parity": "—",
                                    "test": "", "frames": ""})
        out += [f"## {facts['title']}", ""]
        out += [f"- **Reference**: {facts['reference']}.",
                f"- **Parity**: {facts['parity']}" + (f" (`{facts['test']}`)." if facts["test"]
                                                      else ".")]
        own = [env_id for env_id, _, _ in envs if env_id in OWN_ENVS]
        out += [f"- `{env_id}` has no reference: {OWN_ENVS[env_id]}." for env_id in own]
        renders = [spec.renders for _, spec, _ in envs]
        if any(renders):
            out.append(f"- **Frames**: {facts['frames']}.")
        out.append("")
        shown = [env_id for env_id, _, _ in envs if (frames_dir / f"{env_id}.png").exists()]
        if shown:
            out += [" ".join(f"![{env_id}](../{FRAMES}/{env_id}.png){{ width=\"160\" }}"
                             for env_id in shown), "",
                    "*" + ", ".join(f"`{env_id}`" for env_id in shown) + ": a frame after 40 "
                    "random steps (`python docs/frames.py`).*", ""]
        out += ["| id | observation | action | time limit | info extras | renders |",
                "|---|---|---|---|---|---|"]
        for env_id, spec, _ in envs:
            extras = ", ".join(f"`{f.name}`" for f in spec.info) or "—"
            limit = f"{spec.max_episode_steps:,} steps" if spec.max_episode_steps else "none"
            if not spec.max_episode_steps and "max_num_frames_per_episode" in spec.config:
                limit = f"{spec.config['max_num_frames_per_episode']:,} frames"
            if env_id in OWN_ENVS:
                limit += " (no reference)"
            out.append(f"| `{env_id}` | {_space(spec.observation_space)} | "
                       f"{_space(spec.action_space)} | {limit} | {extras} | "
                       f"{'yes' if spec.renders else 'no'} |")
        out += ["", f"### {facts['title']} kwargs", ""]
        groups: dict[tuple[tuple[str, str], ...], list[tuple[str, list[Any]]]] = defaultdict(list)
        for env_id, _, keys in envs:
            groups[tuple((n, k) for n, k, _ in keys)].append((env_id, keys))
        for entries in groups.values():
            if len(groups) > 1:
                out += [", ".join(f"`{env_id}`" for env_id, _ in entries) + ":", ""]
            out += _kwargs_table(entries)
    return "\n".join(out) + "\n"


# -- the API reference ---------------------------------------------------------------------

def _all_of(path: Path) -> list[str] | None:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return None


def reference_modules() -> list[str]:
    """The public modules that declare ``__all__``, the package first; a module whose names
    its package's ``__all__`` already holds is documented on the package's page."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts):
            continue
        names = _all_of(path)
        if names is not None:
            found[".".join(parts)] = names
    kept = []
    for module, names in found.items():
        parent = module.rpartition(".")[0]
        if _is_plain_module(module) and parent in found and set(names) <= set(found[parent]):
            continue
        kept.append(module)
    return sorted(kept, key=lambda m: (m != "aiopool", m))


def _is_plain_module(module: str) -> bool:
    return (ROOT / (module.replace(".", "/") + ".py")).exists()


def reference_page(module: str) -> str:
    return (f"# `{module}`\n\n::: {module}\n"
            "    options:\n"
            "      show_root_heading: false\n"
            "      show_root_toc_entry: false\n")


def reference_index(modules: list[str]) -> str:
    lines = ["# API reference", "",
             "Generated from the docstrings of the public names: `aiopool.__all__` and the "
             "`__all__` of each public subpackage and module (`docs/hooks/generate.py` finds "
             "them). The contract these names keep is on [The async API](../async-api.md).", ""]
    lines += [f"- [`{m}`]({m}.md)" for m in modules]
    return "\n".join(lines) + "\n"


# -- MkDocs events -------------------------------------------------------------------------

_MODULES: list[str] = []


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """The reference pages join the nav under the entry that names ``reference/index.md``."""
    _MODULES[:] = reference_modules()
    pages = [{"Overview": "reference/index.md"},
             *({m: f"reference/{m}.md"} for m in _MODULES)]
    nav = config.nav or []
    for i, entry in enumerate(nav):
        if isinstance(entry, dict):
            (title, target), = entry.items()
            if target == "reference/index.md":
                nav[i] = {title: pages}
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    files.append(File.generated(config, CATALOGUE, content=catalogue()))
    files.append(File.generated(config, "reference/index.md", content=reference_index(_MODULES)))
    for module in _MODULES:
        files.append(File.generated(config, f"reference/{module}.md",
                                    content=reference_page(module)))
    return files
