"""The docs run: every shell block of README.md and docs/*.md marked `<!-- docs-test: run … -->`
runs as printed, and every Python block runs (a page's Python blocks share one namespace, in
order, like a reader following the page).

Markers, on the line before a fenced block:
  `<!-- docs-test: run -->`         run it (bash, `set -e`), in a scratch folder
  `<!-- docs-test: run shared -->`  needs ../shared (skips where absent, fails in CI)
  `<!-- docs-test: run edit -->`    needs the `edit` extra (OpenCV)
  `<!-- docs-test: run long -->`    only with SEGTK_LONG_DOCS=1 (the benchmarks behind the
                                    published numbers: minutes to hours of CPU)
  `<!-- docs-test: skip (why) -->`  never run (installs, long benchmarks); the reason is required
The scratch folder links the repository's `models`, `scripts` and `bench` and has `../shared`
next to it, so commands run exactly as a user at the repository root types them, but write
their `runs/` somewhere disposable.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from segtk.core import missing_modules
from segtk.testing.env import SHARED

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"(?:<!-- docs-test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<body>.*?)```",
                   re.S)
MODES = {"run", "skip", "shared", "edit", "long"}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    mark: str
    body: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start("lang")) + 1
            found.append(Block(page, line, m["lang"], (m["mark"] or "").strip(), m["body"]))
    return found


def runnable(lang: str) -> list[Block]:
    return [b for b in blocks() if b.lang == lang and b.mark.startswith("run")]


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A folder that looks like the repository root to a command: models/, scripts/, bench/
    linked, ../shared beside it."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("models", "scripts", "bench"):
        (work / name).symlink_to(ROOT / name)
    if SHARED.exists():
        (tmp_path / "shared").symlink_to(SHARED)
    return work


def needs(block: Block) -> None:
    words = set(block.mark.split())
    if "shared" in words and not SHARED.exists():
        if os.environ.get("SEGTK_REQUIRE_SHARED") == "1":
            pytest.fail(f"SEGTK_REQUIRE_SHARED=1 but {SHARED} is absent ({block.id})")
        pytest.skip(f"{block.id} needs ../shared")
    if "edit" in words and missing_modules(("cv2",)):
        pytest.skip(f"{block.id} needs the edit extra (pip install -r extras/edit.txt)")


def env() -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "OMP_NUM_THREADS": "1", "PATH": bin_dir + os.pathsep + os.environ["PATH"]}


@pytest.mark.parametrize("block", runnable("bash"), ids=lambda b: b.id)
def test_shell_block_runs_as_printed(block: Block, scratch: Path) -> None:
    if "long" in block.mark.split() and os.environ.get("SEGTK_LONG_DOCS") != "1":
        pytest.skip(f"{block.id} is a long benchmark (SEGTK_LONG_DOCS=1 runs it)")
    needs(block)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", block.body], cwd=scratch, env=env(),
                         capture_output=True, text=True, timeout=None if "long" in block.mark else 900)
    assert out.returncode == 0, f"{block.id} failed:\n{block.body}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"


def python_pages() -> list[Path]:
    return sorted({b.page for b in blocks() if b.lang == "python" and not b.mark.startswith("skip")})


@pytest.mark.parametrize("page", python_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(page: Path, scratch: Path) -> None:
    code = [b for b in blocks() if b.page == page and b.lang == "python" and not b.mark.startswith("skip")]
    for block in code:
        needs(block)
    script = "\n".join(f"# --- {b.id}\n{b.body}" for b in code)
    out = subprocess.run([sys.executable, "-c", script], cwd=scratch, env=env(), capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, f"{page.name}'s Python blocks failed:\n{out.stderr[-3000:]}"


def test_every_marker_is_known_and_every_skip_says_why() -> None:
    bad = []
    for b in blocks():
        if not b.mark:
            continue
        words = b.mark.split()
        if words[0] not in ("run", "skip") or not set(words[1:]) <= MODES and words[0] == "run":
            bad.append(f"{b.id}: unknown marker {b.mark!r}")
        if words[0] == "skip" and not re.search(r"\(.+\)", b.mark):
            bad.append(f"{b.id}: a skip needs its reason in parentheses")
    assert not bad, "\n".join(bad)


def test_the_readme_starts_with_the_two_set_up_commands_and_ci_runs_the_second() -> None:
    """The README's first block holds exactly two commands: the main job on the bundled demo,
    and the test command, which .ci/run calls as printed."""
    first = next(b for b in blocks() if b.page.name == "README.md")
    lines = [line for line in first.body.splitlines() if line.strip()]
    assert len(lines) == 2 and lines[0].endswith("segtk attack --plugin dla"), lines
    assert lines[1] in (ROOT / ".ci" / "run").read_text().splitlines(), \
        f".ci/run must call the README's test command as printed: {lines[1]}"


def test_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for page in re.findall(r"\]\((docs/[a-z-]+\.md)\)", text):
        assert (ROOT / page).exists(), page


def commits_of_this_repository(tokens: set[str]) -> set[str]:
    """The tokens that name a commit of this repository (none where git is unavailable)."""
    found = set()
    for token in tokens:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                              f"{token}^{{commit}}"], capture_output=True, text=True)
        if out.returncode == 0:
            found.add(token)
    return found


def test_docs_name_no_issue_commit_or_machine_path() -> None:
    """Development history stays in commits and notes: no issue, no commit of this repository
    to compare against, no path of a particular machine in what users read (the docs, the
    plugins' and models' READMEs)."""
    pages = [*PAGES, *sorted(ROOT.glob("plugins/*/*/README.md")), *sorted(ROOT.glob("models/*/README.md"))]
    bad: list[str] = []
    hexes: dict[str, str] = {}
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            where = f"{page.relative_to(ROOT)}:{number}: {line.strip()[:120]}"
            if re.search(r"\bissues?\b|#\d{2,}\b|/root/|/home/\w|/work/|/Users/\w", line):
                bad.append(where)
            for token in re.findall(r"\b[0-9a-f]{7,40}\b", line):
                hexes.setdefault(token, where)
    bad += [hexes[token] for token in commits_of_this_repository(set(hexes))]
    assert not bad, "\n".join(bad)


def test_the_main_job_of_the_first_set_up_command_runs(scratch: Path) -> None:
    """`segtk attack --plugin dla` as printed (after its install): the demo model on the bundled
    images, the clean and adversarial mIoU in its table."""
    first = next(b for b in blocks() if b.page.name == "README.md")
    command = first.body.splitlines()[0].split("&&")[-1].strip()
    out = subprocess.run(["bash", "-c", command], cwd=scratch, env=env(), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (scratch / "runs" / "attack-dla" / "results.jsonl").exists()
    assert "mIoU" in out.stdout


def test_the_readme_python_block_is_the_tested_snippet() -> None:
    """The README's Python block is tests/snippets/python_api.py, which
    tests/test_python_api.py runs and compares with the CLI's numbers."""
    readme = [b.body for b in blocks() if b.page.name == "README.md" and b.lang == "python"]
    assert readme == [(ROOT / "tests" / "snippets" / "python_api.py").read_text()]
