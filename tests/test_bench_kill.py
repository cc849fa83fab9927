"""`bench edits` and `bench augment` killed anywhere, then continued with the advised
`--out OUT --resume`: they end with the uninterrupted run's records and table. A kill lands
before the k-th write of the run (an atomic file write's rename, or a record's append), so
every phase is hit: run.json, the edited subsets, the training epochs, model.spec, the scores
and the tables."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segtk.cli import cli
from segtk.storage import layout, runs

EDITS = ["bench", "edits", "--attributes", "color,size", "--values", "color=red",
         "--values", "size=0.5", "--limit", "2", "--executor", "inline"]
AUGMENT = ["bench", "augment", "--model", "demo", "--data", "demo", "--limit", "2",
           "--batch-size", "2", "--crop", "64x48", "--epochs", "2", "--augment", "baseline",
           "--eval-limit", "2", "--attributes", "weather", "--values", "weather=fog"]


class Interrupt(KeyboardInterrupt):
    """A stand-in for a kill: nothing in segtk may catch it."""


@contextlib.contextmanager
def killed_before_write(k: int | None, count: dict[str, int] | None = None) -> Iterator[None]:
    """Raise Interrupt before the k-th write (0-based; None: never) of what runs inside: a
    rename that ends an atomic write, or a record's append. `count["n"]` counts the writes."""
    count = {"n": 0} if count is None else count
    real_replace, real_append = os.replace, runs.append_line

    def due() -> None:
        count["n"] += 1
        if count["n"] == (k if k is not None else -1) + 1:
            raise Interrupt

    def replace(*args, **kwargs):
        due()
        return real_replace(*args, **kwargs)

    def append_line(*args, **kwargs):
        due()
        return real_append(*args, **kwargs)

    with mock.patch.object(os, "replace", replace), mock.patch.object(runs, "append_line", append_line):
        yield


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def outcome(out: Path) -> dict[str, object]:
    """What a bench run ends with: its records and those of its edited subsets, by key, and its
    table (the run folder's own path written OUT: bench augment's rows are models in it)."""

    def lines(path: Path) -> dict[str, dict]:
        text = path.read_text().replace(str(out), "OUT")
        return {json.dumps(r.get("key", r.get("name")), sort_keys=True): r
                for r in map(json.loads, text.splitlines())}

    manifests = {p.parent.name: lines(p) for p in sorted((out / layout.EDITS).glob(f"*/{layout.MANIFEST}"))}
    return {"results": lines(out / layout.RESULTS), "edits": manifests,
            "table": json.loads((out / layout.TABLE_JSON).read_text().replace(str(out), "OUT"))}


def killed_and_resumed(command: list[str], kills: list[int], out: Path) -> None:
    """Run `command` into `out`, killed before the k-th write of each try in `kills`, each try
    after the first being the advised `--out OUT --resume` once OUT holds a run; then finish."""
    for k in kills:
        with killed_before_write(k):
            result = invoke(*resume_or_start(command, out))
        assert result.exit_code in (0, 1), result.output
        assert "Traceback" not in result.output, result.output
        # whatever the kill left, run.json says what it is: the advised --resume can go on
        assert (out / layout.RUN).is_file() or not (out / layout.EDITS).exists()
        del result  # its traceback holds the run (and its lock) until dropped
    final = invoke(*resume_or_start(command, out))
    assert final.exit_code == 0, final.output


def resume_or_start(command: list[str], out: Path) -> list[str]:
    if (out / layout.RUN).is_file():
        return [*command[:2], "--out", str(out), "--resume"]
    return [*command, "--out", str(out)]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> dict[str, tuple[dict[str, object], int]]:
    """Each bench's uninterrupted run: what it ends with and how many writes it makes (made
    once: every example compares with it)."""
    pytest.importorskip("segtk_demo")
    done = {}
    for name, command in (("edits", EDITS), ("augment", AUGMENT)):
        out = tmp_path_factory.mktemp("whole") / name
        count = {"n": 0}
        with killed_before_write(None, count):
            result = invoke(*command, "--out", str(out))
        assert result.exit_code == 0, result.output
        done[name] = outcome(out), count["n"]
    return done


def kills_of(data: st.DataObject, writes: int) -> list[int]:
    """One or two kills, each before one of the run's writes (a resume writes fewer: a kill
    past its last one lets it finish)."""
    return data.draw(st.lists(st.integers(0, writes - 1), min_size=1, max_size=2), label="kills")


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bench_edits_killed_anywhere_resumes_to_the_same_records(uninterrupted, data) -> None:
    want, writes = uninterrupted["edits"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        killed_and_resumed(EDITS, kills_of(data, writes), out)
        assert outcome(out) == want


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_bench_augment_killed_anywhere_resumes_to_the_same_records(uninterrupted, data) -> None:
    want, writes = uninterrupted["augment"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        killed_and_resumed(AUGMENT, kills_of(data, writes), out)
        assert outcome(out) == want


@pytest.mark.parametrize("k", [1, 3])  # run.json is the first write; then the subsets' writes
def test_bench_edits_killed_while_building_subsets_resumes_with_only_out(uninterrupted, tmp_path,
                                                                          k) -> None:
    out = tmp_path / "run"
    with killed_before_write(k):
        assert invoke(*EDITS, "--out", str(out)).exit_code == 1
    assert (out / layout.RUN).is_file() and not (out / layout.RESULTS).exists()  # the window
    resumed = invoke("bench", "edits", "--out", str(out), "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert outcome(out) == uninterrupted["edits"][0]
