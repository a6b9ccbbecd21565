"""The docs cannot drift from the code: every ```python block of README.md and docs/ runs as a
script, except a block right below a ``<!-- not-run: the reason -->`` comment (a fragment, or
one that needs a cluster or a server); and the site builds with ``mkdocs build --strict``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import aiopool

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<lang>[\w-]*)")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
# Blocks that take more than a few seconds (torch and SB3 imports, a PPO update):
# `pytest -m "not slow"` leaves them out.
SLOW = {("docs/adapters.md", "stable_baselines3"), ("docs/rendering.md", "VecVideoRecorder"),
        ("docs/migrating.md", "PPO("), ("docs/inference.md", "torch_policy")}


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None  # the reason, if a not-run comment stands right above the block


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, dedented to their fence (a block in a list item)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(ROOT))
    found = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip() == fence and lines[j].startswith(" " * indent)),
                   len(lines))
        code = "\n".join(line[indent:] for line in lines[i + 1:end]) + "\n"
        above = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = NOT_RUN.match(above)
        found.append(Block(page, i + 1, m["lang"], code,
                           marker["reason"].strip() if marker else None))
        i = end + 1
    return found


PYTHON = [b for path in PAGES for b in blocks(path) if b.lang == "python"]
RUNNABLE = [pytest.param(b, id=f"{b.page}:{b.line}",
                         marks=[pytest.mark.slow] if any(
                             page == b.page and word in b.code for page, word in SLOW) else [])
            for b in PYTHON if b.not_run is None]


def test_the_pages_have_python_blocks_and_most_run() -> None:
    assert len(PYTHON) >= 10
    assert len(RUNNABLE) > len(PYTHON) // 2


def test_every_not_run_comment_says_why_and_stands_above_a_python_block() -> None:
    for path in PAGES:
        lines = path.read_text(encoding="utf-8").splitlines()
        marked = {b.line for b in blocks(path) if b.not_run is not None and b.lang == "python"}
        for i, line in enumerate(lines):
            m = NOT_RUN.match(line)
            if m is None:
                continue
            where = f"{path.relative_to(ROOT)}:{i + 1}"
            assert len(m["reason"].strip()) >= 10, f"{where}: say why the block cannot run"
            following = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            assert following is not None and following + 1 in marked, (
                f"{where}: a not-run comment must stand right above a ```python block")


@pytest.mark.parametrize("block", RUNNABLE)
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    """Each block is a whole script, run in a fresh interpreter in an empty directory."""
    script = tmp_path / "block.py"
    script.write_text(block.code, encoding="utf-8")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=240)
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", r.stderr)
    if r.returncode != 0 and missing and not missing[1].startswith("aiopool"):
        pytest.skip(f"needs {missing[1]}: pip install -e '.[test]'")
    assert r.returncode == 0, (f"{block.page}:{block.line} failed (exit {r.returncode}); mark "
                               "it <!-- not-run: why --> if it cannot run\n"
                               f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def _first_bash_block(path: Path) -> str:
    return next(b.code for b in blocks(path) if b.lang == "bash")


def test_getting_started_installs_with_the_readme_commands() -> None:
    """.ci/run runs README.md's first bash block; the site shows the same two commands."""
    assert (_first_bash_block(ROOT / "docs" / "getting-started.md")
            == _first_bash_block(ROOT / "README.md"))


def test_readme_links_into_the_site_resolve() -> None:
    """mkdocs checks the site's links; the README's relative links are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_readme_is_a_front_page() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    """``mkdocs build --strict``: no broken link or anchor, no missing reference, and the
    generated catalogue and API reference build (docs/hooks/generate.py)."""
    pytest.importorskip("mkdocs", reason="needs mkdocs: pip install -e '.[test]'")
    pytest.importorskip("material", reason="needs mkdocs-material: pip install -e '.[test]'")
    pytest.importorskip("mkdocstrings_handlers.python",
                        reason="needs mkdocstrings-python: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert r.returncode == 0, r.stderr[-5000:]
    catalogue = (tmp_path / "site" / "environments" / "catalogue" / "index.html").read_text()
    missing = [i for i in aiopool.list_envs() if f"<code>{i}</code>" not in catalogue]
    assert not missing, f"the catalogue lacks {missing}"
    assert (tmp_path / "site" / "reference" / "aiopool" / "index.html").exists()
