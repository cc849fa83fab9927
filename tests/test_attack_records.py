"""`segtk attack`'s results.jsonl as typed records: a real job's lines read back and write the
same bytes, a run written before a field existed resumes, and a line without a key is one
error naming the file, the image and the key."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from segtk.cli import cli
from segtk.core import Dataset, Item, SegtkError, to_tensor
from segtk.jobs.attack import AttackRecord, attack_dataset
from segtk.storage import layout
from segtk.storage.runs import RunDir, read_results
from segtk.testing import TinySegmenter, toy_batch
from segtk_dla import DLA


def dataset(n: int) -> Dataset:
    """`n` 8-bit images labelled by the tiny model (the attack has something to break)."""
    images = np.round(toy_batch(n, 9, 11, seed=2)[0].permute(0, 2, 3, 1).numpy() * 255).astype(np.uint8)
    labels = TinySegmenter().predict(to_tensor(list(images))).numpy()
    items = [Item(f"img{i}", images[i], labels[i]) for i in range(n)]
    return Dataset("toy", list(TinySegmenter().classes), [(it.name, loader(it)) for it in items])


def loader(item: Item) -> Callable[[], Item]:
    return lambda: item


# results.jsonl's keys in the order segtk has written them since its first release (the line
# format other tools parse); "stopped" follows only where a time limit stopped the attack.
KEYS = ["image", "clean_miou", "adv_miou", "clean_pacc", "adv_pacc", "queries", "linf",
        "attack_proxy", "history", "clean_confusion", "adv_confusion"]


def lines(out: Path) -> list[bytes]:
    return (out / layout.RESULTS).read_bytes().splitlines(keepends=True)


def rewritten(line: bytes) -> bytes:
    """The line as its record writes it back (what `segtk attack` appends)."""
    record = AttackRecord.from_json(json.loads(line))
    return (json.dumps(record.to_json(), separators=(",", ":")) + "\n").encode()


def test_a_real_jobs_lines_read_back_and_write_the_same_bytes(tmp_path, monkeypatch) -> None:
    from segtk.core import _segmenter as segmenter_module
    ticks = iter(range(1, 10_000))
    monkeypatch.setattr(segmenter_module, "monotonic", lambda: float(next(ticks)))
    with RunDir(tmp_path / "timed", {"t": 1}, False, kind="attack") as run:  # stopped: time
        attack_dataset(DLA(budget=6, time_limit=2.5), TinySegmenter(), dataset(n=2), run,
                       batch_size=1)
    with RunDir(tmp_path / "whole", {"t": 1}, False, kind="attack") as run:  # no stopped key
        summary = attack_dataset(DLA(budget=6), TinySegmenter(), dataset(n=2), run)
    timed, whole = lines(tmp_path / "timed"), lines(tmp_path / "whole")
    assert [list(json.loads(line)) for line in timed] == [[*KEYS, "stopped"]] * 2
    assert [json.loads(line)["stopped"] for line in timed] == ["time"] * 2
    assert [list(json.loads(line)) for line in whole] == [KEYS] * 2
    for line in timed + whole:
        assert rewritten(line) == line
    assert [r.to_json() for r in summary.records] == [json.loads(line) for line in whole]
    assert summary.records[0].image == "img0" and summary.records[0].stopped is None


def test_a_run_written_before_time_limits_resumes_and_keeps_its_lines(tmp_path) -> None:
    """A hand-written line of the oldest format (no `stopped`, and a key this segtk does not
    know) is kept byte for byte, counted in the summary, and the run continues after it."""
    data = dataset(n=3)
    with RunDir(tmp_path / "whole", {"t": 1}, False, kind="attack") as run:
        whole = attack_dataset(DLA(budget=6), TinySegmenter(), data, run, batch_size=1)
    first = json.loads(lines(tmp_path / "whole")[0])
    old = {k: first[k] for k in KEYS}
    old_line = (json.dumps({**old, "note": "kept"}) + "\n").encode()  # spaces: not our writer's
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / layout.RESULTS).write_bytes(old_line)
    (tmp_path / "old" / layout.RUN).write_text(json.dumps({"kind": "attack", "config": {"t": 1}}))
    seen: list[AttackRecord] = []
    with RunDir(tmp_path / "old", {"t": 1}, True, kind="attack") as run:
        resumed = attack_dataset(DLA(budget=6), TinySegmenter(), data, run, batch_size=1,
                                 on_image=seen.append)
    assert lines(tmp_path / "old") == [old_line, *lines(tmp_path / "whole")[1:]]
    assert resumed.table == whole.table
    assert seen[0].image == "img0" and seen[0].stopped is None and seen[0].extra == {"note": "kept"}


def test_a_line_without_a_key_is_one_error_naming_the_file_the_image_and_the_key(tmp_path) -> None:
    with RunDir(tmp_path / "r", {"t": 1}, False, kind="attack") as run:
        attack_dataset(DLA(budget=6), TinySegmenter(), dataset(n=2), run)
    path = tmp_path / "r" / layout.RESULTS
    broken = [json.loads(line) for line in lines(tmp_path / "r")]
    del broken[1]["adv_confusion"]
    path.write_text("".join(json.dumps(r) + "\n" for r in broken))
    message = f"{path}, img1: a segtk attack record without adv_confusion"
    with pytest.raises(SegtkError) as err:
        AttackRecord.keyed(read_results(path), path)
    assert err.value.message == message
    with pytest.raises(SegtkError) as resumed, \
            RunDir(tmp_path / "r", {"t": 1}, True, kind="attack") as run:
        attack_dataset(DLA(budget=6), TinySegmenter(), dataset(n=2), run)
    assert resumed.value.message == message
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "r")])
    assert report.exit_code == 1
    assert message in report.output
