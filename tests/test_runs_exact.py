"""Run folders to the byte and the word: the line format and file mode of results, every refusal's
message and hint (which line, why it is kept, what to do), a reader that never repairs, and
locks that a forked worker does not keep."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from segtk.core import SegtkError
from segtk.storage import layout, runs
from segtk.storage.runs import RunDir, append_line, read_results

HINT_EDITED = "it ends with a newline, so it is no interrupted append: something else wrote it"
HINT_KEPT = "the lines after it hold finished results, so it is not dropped"


def test_a_record_is_one_compact_json_line_readable_by_its_owner_only_to_write(tmp_path) -> None:
    path = tmp_path / layout.RESULTS
    old = os.umask(0)
    try:
        append_line(path, {"image": "a", "miou": 0.5, "confusion": [[1, 2]]})
    finally:
        os.umask(old)
    assert path.read_bytes() == b'{"image":"a","miou":0.5,"confusion":[[1,2]]}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


@pytest.mark.parametrize(("lines", "number", "problem", "hint"), [
    ([b'{"image": "a"}', b"{oops", b'{"image": "c"}'], 2, "is not valid JSON", HINT_KEPT),
    ([b'{"image": "a"}', b"{oops"], 2, "is not valid JSON", HINT_EDITED),
    ([b'{"name": "a"}', b'{"image": "b"}'], 1, "has no 'image': not a record of this run", HINT_KEPT),
    ([b'{"image": "a"}', b'{"name": "b"}'], 2, "has no 'image': not a record of this run", HINT_EDITED),
])
def test_a_bad_line_says_which_why_it_is_kept_and_how_to_fix_it(tmp_path, lines, number, problem,
                                                                  hint) -> None:
    path = tmp_path / layout.RESULTS
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(SegtkError) as err:
        read_results(path)
    assert err.value.message.startswith(f"{path} line {number} {problem}")
    assert err.value.hint == (f"{hint}; repair or delete line {number} (e.g. sed -i '{number}d' "
                              f"{path}), then rerun with --resume")


def test_a_torn_line_after_a_bad_one_does_not_make_it_the_last(tmp_path) -> None:
    path = tmp_path / layout.RESULTS
    path.write_bytes(b'{"image": "a"}\n{oops\n{"image": "c", "mi')
    with pytest.raises(SegtkError) as err:
        read_results(path)
    assert str(err.value.hint).startswith(HINT_KEPT)  # its newline is no sign of editing here


def test_reading_never_repairs_unless_asked(tmp_path) -> None:
    path = tmp_path / layout.RESULTS
    raw = b'{"image": "a"}\n{"image": "b", "mi'
    path.write_bytes(raw)
    assert list(read_results(path)) == ["a"] and path.read_bytes() == raw
    assert list(read_results(path, repair=True)) == ["a"] and path.read_bytes() == raw[:15]


def test_results_that_are_a_folder_are_one_line_naming_the_file(tmp_path) -> None:
    path = tmp_path / layout.RESULTS
    path.mkdir()
    for act in (lambda: read_results(path), lambda: append_line(path, {"image": "a"})):
        with pytest.raises(SegtkError) as err:
            act()
        assert err.value.message in (f"cannot read {path}: Is a directory",
                                     f"cannot open {path}: Is a directory")
        assert err.value.hint == "that path is a folder where a file is needed: choose another path"


def test_a_short_write_that_cannot_be_rolled_back_says_the_line_may_be_torn(tmp_path, monkeypatch) -> None:
    path = tmp_path / layout.RESULTS
    line = (json.dumps({"image": "a"}, separators=(",", ":")) + "\n").encode()
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:4]) if len(data) == len(line) else 0)

    def ftruncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    with pytest.raises(SegtkError) as err:
        append_line(path, {"image": "a"})
    assert err.value.message == (f"cannot append to {path}: short write (4 of {len(line)} bytes); "
                                 "its last line may be torn (--resume drops it)")
    assert str(err.value.hint).endswith("; the records before are kept")


def test_a_read_only_run_refuses_to_append_as_a_bug(tmp_path) -> None:
    with RunDir(tmp_path / "r", {"t": 1}, False, kind="attack") as run:
        run.append({"image": "a"})
    reader = RunDir(tmp_path / "r", {"t": 1}, True, read_only=True, kind="attack")
    with pytest.raises(SegtkError) as err:
        reader.append({"image": "b"})
    assert (err.value.message, err.value.hint) == (f"{tmp_path / 'r'} was opened read-only",
                                                   "a bug: report it")


def test_a_forked_child_closes_the_lock_files_it_inherited(tmp_path) -> None:
    """A pool worker forked while a run holds its lock must not keep that lock's file open (the
    run would stay locked after its owner died): the child starts with no held locks."""
    with RunDir(tmp_path / "r", {"t": 1}, False, kind="attack"):
        fds = [fd for fd, _ in runs._HELD.values()]
        assert fds
        pid = os.fork()
        if pid == 0:  # the child: nothing held, every inherited lock fd closed
            closed = True
            for fd in fds:
                try:
                    os.fstat(fd)
                    closed = False
                except OSError:
                    pass
            os._exit(0 if closed and not runs._HELD else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert [fd for fd, _ in runs._HELD.values()] == fds  # the parent still holds its lock


def test_run_folder_refusals_word_for_word(tmp_path) -> None:
    def refusal(act) -> tuple[str, str | None]:
        with pytest.raises(SegtkError) as err:
            act()
        return err.value.message, err.value.hint

    out = tmp_path / "r"
    assert refusal(lambda: RunDir(out, {}, False, kind="Attack")) == (
        "bad run kind 'Attack'", "a bug: report it")
    with RunDir(out, {"budget": 8}, False, kind="bench-attacks") as run:
        run.append({"image": "a"})
    assert refusal(lambda: RunDir(out, {"budget": 8}, True, kind="attack")) == (
        f"{out} holds a `segtk bench attacks` run, not a `segtk attack` one", "choose another --out")
    assert refusal(lambda: RunDir(out, {"budget": 8}, False, kind="bench-attacks")) == (
        f"{out} already holds results",
        "pass --resume to continue that run, --overwrite to start it over, or choose another --out")
    message, hint = refusal(lambda: RunDir(out, {"budget": 9}, True, kind="bench-attacks"))
    assert message.startswith(f"{out} holds a run with other settings (budget): ")
    assert hint == ("resume with the settings run.json records (segtk's --resume reads the options "
                    "you leave out from it), or choose another --out")
    (out / "run.json").unlink()
    assert refusal(lambda: RunDir(out, {"budget": 8}, True, kind="bench-attacks")) == (
        f"{out} holds results.jsonl but no run.json, so its settings are unknown",
        "restore OUT/run.json from the run that wrote those results, or choose another --out")
    for raw, problem in ((b"{", "is not valid JSON (Expecting property name enclosed in double "
                                "quotes: line 1 column 2 (char 1))"),
                         (b"[1]", "is not a segtk run record")):
        (out / "run.json").write_bytes(raw)
        assert refusal(lambda: RunDir(out, {"budget": 8}, True, kind="bench-attacks")) == (
            f"{out / 'run.json'} {problem}",
            "restore it from a backup (its config is how --resume checks the settings), or "
            "choose another --out")
    (tmp_path / "file").write_text("x")
    assert refusal(lambda: RunDir(tmp_path / "file", {}, False, kind="attack")) == (
        f"cannot create the run folder {tmp_path / 'file'}: a file is in the way",
        "choose another --out (or move that file)")


def test_setting_changes_name_each_difference_dotted_cut_and_counted() -> None:
    from segtk.storage.runs import setting_changes

    old = {"budget": 8, "params": {"exploration": 0.2, "values": "discrete", "same": 1},
           "model": "a" * 70, "seed": 0}
    new = {"budget": 9, "params": {"exploration": 0.5, "same": 1, "extra": True},
           "model": "b", "limit": 3}
    assert setting_changes(old, new, ["budget", "params"], most=10) == [
        "budget 8 in run.json, 9 now",
        "params.exploration 0.2 in run.json, 0.5 now",
        "params.extra unset in run.json, true now",
        "params.values \"discrete\" in run.json, unset now"]
    long = setting_changes(old, new, ["model", "seed", "limit"])
    assert long == [f"model \"{'a' * 58}… in run.json, \"b\" now", "seed 0 in run.json, unset now",
                    "limit unset in run.json, 3 now"]
    assert len(long[0].split(" in run.json")[0]) == len("model ") + 60
    assert setting_changes(old, new, ["budget", "params", "model", "seed"]) == [
        "budget 8 in run.json, 9 now", "params.exploration 0.2 in run.json, 0.5 now",
        "params.extra unset in run.json, true now", "3 more"]
    assert setting_changes(old, new, ["budget"], most=1) == ["budget 8 in run.json, 9 now"]
    sixty = "c" * 58  # 60 characters as JSON: kept whole; 61 are cut to 60
    assert setting_changes({"m": sixty}, {"m": "d"}, ["m"]) == [f'm "{sixty}" in run.json, "d" now']
    assert setting_changes({"m": sixty + "c"}, {"m": "d"}, ["m"]) == [f'm "{sixty}… in run.json, "d" now']
    assert setting_changes({"out": "a"}, {"out": Path("b")}, ["out"]) == [
        'out "a" in run.json, "b" now']  # not JSON: shown as text
    assert setting_changes({"p": {"x": 1}}, {"p": 3}, ["p"]) == ['p {"x": 1} in run.json, 3 now']
    assert setting_changes({"p": {}}, {"p": {"x": None}}, ["p"]) == ["p.x unset in run.json, null now"]
    assert setting_changes({"p": {"x": None}}, {"p": {}}, ["p"]) == ["p.x null in run.json, unset now"]


def test_atomic_write_json_indents_by_two_unless_told_and_writes_no_nan(tmp_path: Path) -> None:
    value = {"a": [1, float("nan"), -float("inf")], "b": {"c": 1.5}}
    runs.atomic_write_json(tmp_path / "x.json", value)
    expected = {"a": [1, None, None], "b": {"c": 1.5}}
    assert (tmp_path / "x.json").read_text() == json.dumps(expected, indent=2) + "\n"
    runs.atomic_write_json(tmp_path / "y.json", value, indent=None)
    assert (tmp_path / "y.json").read_text() == '{"a": [1, null, null], "b": {"c": 1.5}}\n'
