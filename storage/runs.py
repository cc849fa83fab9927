"""Run directories: run.json, results appended a whole line at a time, a lock, and resume.

Guarantees (tests/test_runs.py, tests/test_runs_faults.py):
- `append` writes a whole line or raises (the file is cut back to its previous size), so the
  records a run reports are exactly the lines the file holds.
- `--resume` drops only a torn last line (one without its newline: all an interrupted append can
  leave). Any other bad line is an error naming the file and line; nothing after it is lost.
- One process at a time: a run holds an exclusive lock on OUT/.lock for its life.
  (RunDirs of one process on one folder share it.)
- Opening a run for writing removes the temp files interrupted atomic writes left in it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

import numpy as np

from segtk.core import SegtkError, atomic_write_bytes
from segtk.core._data import is_temp
from segtk.storage import layout
from segtk.storage.os_errors import os_error
from segtk.storage.provenance import git_commit, spec_file_hashes, versions, weights_change

__all__ = ["Records", "RunDir", "RunLock", "append_line",
           "read_results", "load_run_file", "run_record", "command_of", "make_run_dir",
           "remove_temp_files",
           "versions", "atomic_write_json", "finite_json"]

KIND_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def finite_json(value: Any) -> Any:
    """`value` with NaN and ±inf floats (numpy ones too) as None: JSON has no such numbers."""
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    return value


def atomic_write_json(path: str | Path, value: Any, indent: int | None = 2) -> None:
    """Strict JSON (no NaN/Infinity, which other readers reject), written atomically."""
    text = json.dumps(finite_json(value), indent=indent, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode())


class Records(Protocol):
    """What a job appends its records to and resumes from: a RunDir, or the Python API's
    in-memory run (`segtk.api.results.MemoryRun`, whose `path` is None: it writes no files)."""

    @property
    def path(self) -> Path | None: ...

    def done(self, key: str = "image") -> dict[str, dict[str, Any]]: ...

    def append(self, record: dict[str, Any]) -> None: ...

class RunDir:
    """A run's output folder. `config` must match on resume, so results never mix runs.

    `kind` names the command that made it ("attack", "bench-attacks", "edit", "bench-edits",
    "train", "bench-augment"; a plugin's command its own): run.json records it, `segtk report`
    reads it, and a folder holding a run of another kind is refused. A run.json written before
    kinds were recorded is taken on --resume and gets its kind.
    `may_differ` names config keys a resume may change because every record carries that
    setting in its key (e.g. a benchmark's attack list: adding an attack reuses the others).
    `read_only` looks at a run another process may be writing (no lock, no repair, no writes).
    Close it (or use it as a context manager) to release the lock.

    Subclasses name their results files (`RESULTS`, which --resume keeps) and what they hold.
    """

    RESULTS: ClassVar[tuple[str, ...]] = (layout.RESULTS,)
    HOLDS: ClassVar[str] = "results"
    # Settings added after runs were made, and the value a run.json without them used.
    ABSENT: ClassVar[dict[str, Any]] = {"device": "cpu"}

    def __init__(self, path: str | Path, config: dict[str, Any], resume: bool,
                 may_differ: tuple[str, ...] = (), read_only: bool = False, *, kind: str) -> None:
        if not KIND_PATTERN.fullmatch(kind):
            raise SegtkError(f"bad run kind {kind!r}", hint="a bug: report it")
        self.path = Path(path)
        self.config = config
        self.kind = kind
        self.read_only = read_only
        self._lock: RunLock | None = None
        if not read_only:
            make_run_dir(self.path)
            self._lock = RunLock(self.path)
        try:
            old_kind = (load_run_file(self.path / layout.RUN) or {}).get("kind")
            if old_kind is not None and old_kind != kind:  # first: it says more than the rest
                raise SegtkError(f"{self.path} holds a `segtk {command_of(old_kind)}` run, "
                                 f"not a `segtk {command_of(kind)}` one",
                                 hint="choose another --out")
            old = check_run(self.path, self.RESULTS, resume or read_only, self.HOLDS)
            old_config = (old or {}).get("config", {})
            diff = sorted(k for k in set(old_config) | set(config)
                          if old_config.get(k, self.ABSENT.get(k)) != config.get(k, self.ABSENT.get(k))
                          and k not in may_differ)
            if old is not None and (resume or read_only) and diff:
                raise SegtkError(
                    f"{self.path} holds a run with other settings ({', '.join(diff)}): "
                    + "; ".join(setting_changes(old_config, config, diff)),
                    hint=f"resume with the settings {layout.RUN} records (segtk's --resume reads the "
                         "options you leave out from it), or choose another --out",
                )
            if old is not None and resume and not read_only:  # before run.json is rewritten
                check_weights(self.path, old, config)
            if not read_only:
                remove_temp_files(self.path)
                self.write_run_file()
        except BaseException:
            self.close()
            raise

    def write_run_file(self, summary: dict[str, Any] | None = None) -> None:
        """run.json: the command, versions, kind and config (see `run_record`), plus `summary`."""
        record = run_record(self.config, self.kind)
        if summary is not None:
            record["summary"] = summary
        write_run_file(self.path, record)

    def done(self, key: str = "image") -> dict[str, dict[str, Any]]:
        """Finished records (the first RESULTS file) by `key`. A torn last line (a crash
        mid-write) is dropped."""
        return read_results(self.path / self.RESULTS[0], key=key, repair=not self.read_only)

    def append(self, record: dict[str, Any]) -> None:
        """One whole line per record in the first RESULTS file, fsync'd (see `append_line`)."""
        if self.read_only:
            raise SegtkError(f"{self.path} was opened read-only", hint="a bug: report it")
        append_line(self.path / self.RESULTS[0], record)

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # at interpreter exit; the kernel drops the lock anyway
            pass


class RunLock:
    """An exclusive, non-blocking flock on DIR/.lock, holding the owner's pid.

    It keeps other processes out; in one process, RunDirs on the same folder share it (a
    notebook or test reopening a run is no second writer). The kernel drops it when the last
    descriptor of its open file is closed: the fd is close-on-exec (Python's default), and a
    forked child (a pool worker) closes its inherited copy at once (`_forget_inherited_locks`),
    so the lock lives exactly as long as the run's own process and a killed run leaves none.
    """

    def __init__(self, directory: Path) -> None:
        path = directory / layout.LOCK
        self.key: tuple[int, int] | None = None
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            stat = os.fstat(fd)
        except OSError as exc:
            raise os_error(exc, f"cannot create {path}") from exc
        key = (stat.st_dev, stat.st_ino)
        if key in _HELD:  # this process holds it already
            os.close(fd)
            _HELD[key][1] += 1
            self.key = key
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise SegtkError(
                f"{directory} is in use by process {holder or '(unknown)'}",
                hint="wait for that run to finish (or stop it), or choose another --out",
            ) from None
        try:  # the pid is only for the message above: a full disk must not fail here
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        _HELD[key] = [fd, 1]
        self.key = key

    def release(self) -> None:
        key, self.key = self.key, None
        if key is None or key not in _HELD:  # released, or a forked child's (closed at fork)
            return
        entry = _HELD[key]
        entry[1] -= 1
        if entry[1] == 0:
            os.close(entry[0])  # closing the file releases the flock
            del _HELD[key]


_HELD: dict[tuple[int, int], list[int]] = {}  # this process's locks: (dev, inode) -> [fd, users]


def _forget_inherited_locks() -> None:
    """In a forked child: close the lock fds inherited from the parent, without unlocking.

    An flock belongs to the open file description, which fork shares: a child keeping the fd
    (a pool worker orphaned by a SIGKILL of its parent) would keep the run locked after its
    owner died. LOCK_UN here would unlock the parent's run too, so the child only closes.
    """
    for fd, _ in _HELD.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD.clear()


os.register_at_fork(after_in_child=_forget_inherited_locks)


def _read_pid(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


_UNSET = object()


def setting_changes(old: dict[str, Any], new: dict[str, Any], keys: Iterable[str],
                    most: int = 3, sides: tuple[str, str] = (f"in {layout.RUN}", "now")) -> list[str]:
    """'KEY OLD in run.json, NEW now' (`sides` names where OLD and NEW are) for the first `most`
    differing settings under `keys`, dotted into nested ones (`params.exploration`), each value
    cut to 60 characters."""

    def brief(value: object) -> str:
        text = "unset" if value is _UNSET else json.dumps(value, default=str)
        return text if len(text) <= 60 else text[:59] + "…"

    out: list[str] = []

    def walk(key: str, a: object, b: object) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                if a.get(k, _UNSET) != b.get(k, _UNSET):
                    walk(f"{key}.{k}", a.get(k, _UNSET), b.get(k, _UNSET))
        else:
            out.append(f"{key} {brief(a)} {sides[0]}, {brief(b)} {sides[1]}")

    for key in keys:
        walk(key, old.get(key, _UNSET), new.get(key, _UNSET))
    return out[:most] + ([f"{len(out) - most} more"] if len(out) > most else [])


def make_run_dir(path: Path) -> None:
    """mkdir -p with a one-line error (a file in the way, no permission, a read-only disk)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise SegtkError(f"cannot create the run folder {path}: a file is in the way",
                         hint="choose another --out (or move that file)") from exc
    except OSError as exc:
        raise os_error(exc, f"cannot create the run folder {path}") from exc


def remove_temp_files(path: Path) -> list[Path]:
    """Delete what atomic writes killed before their rename left (`.NAME.XXXX.tmp` files and
    folders, see core._data.is_temp) in a run folder and its subfolders; runs nested in it (a
    benchmark's training runs and edit subsets) are skipped: they clean their own, under their
    own lock. Best effort (a temp file that cannot be removed is only clutter); returns what
    was removed."""
    removed: list[Path] = []
    for root, dirs, files in os.walk(path):
        here = Path(root)
        if here != path and (layout.LOCK in files or layout.RUN in files):
            dirs.clear()
            continue
        for name in [n for n in files if is_temp(n)]:
            try:
                (here / name).unlink()
                removed.append(here / name)
            except OSError:
                pass
        for name in [n for n in dirs if is_temp(n) and not (here / n).is_symlink()]:
            dirs.remove(name)
            shutil.rmtree(here / name, ignore_errors=True)
            removed.append(here / name)
    return removed


def check_run(path: Path, results: Iterable[str], resume: bool, what: str) -> dict[str, Any] | None:
    """The run.json in `path` (None if absent), refusing to mix or orphan results.

    Results without a run.json are refused even with --resume: their settings are unknown, so
    a resume could silently mix two runs.
    """
    old = load_run_file(path / layout.RUN)
    found = [name for name in results if (path / name).exists()]
    if found and old is None:
        raise SegtkError(f"{path} holds {found[0]} but no {layout.RUN}, so its settings are unknown",
                         hint=f"restore OUT/{layout.RUN} from the run that wrote those results, "
                              "or choose another --out")
    if found and not resume:
        raise SegtkError(f"{path} already holds {what}",
                         hint="pass --resume to continue that run, --overwrite to start it over, "
                              "or choose another --out")
    return old


def load_run_file(path: Path) -> dict[str, Any] | None:
    """run.json as a dict, None if absent; a torn or foreign one is an error naming the fix."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise os_error(exc, f"cannot read {path}") from exc
    try:
        record = json.loads(raw)
    except ValueError as exc:
        problem = f"is not valid JSON ({exc})"
    else:
        if (isinstance(record, dict) and isinstance(record.get("config", {}), dict)
                and isinstance(record.get("kind", ""), str)):
            return record
        problem = "is not a segtk run record"
    raise SegtkError(f"{path} {problem}",
                     hint="restore it from a backup (its config is how --resume checks the "
                          "settings), or choose another --out")


def command_of(kind: str) -> str:
    """'bench-attacks' -> 'bench attacks': the command a run kind names."""
    return kind.replace("-", " ")


def model_specs(config: dict[str, Any]) -> list[str]:
    """The model specs a run's config names (`model`, `models`): the files run.json hashes."""
    specs = [config["model"]] if isinstance(config.get("model"), str) else []
    return specs + [m for m in config.get("models") or [] if isinstance(m, str)]


def run_record(config: dict[str, Any], kind: str) -> dict[str, Any]:
    """What run.json says: the command, its kind, versions, git commit, model files' sha256
    and config."""
    return {"command": " ".join(sys.argv), "kind": kind, "versions": versions(),
            "git_commit": git_commit(), "weights": spec_file_hashes(model_specs(config)),
            "config": config}


def check_weights(path: Path, old: dict[str, Any], config: dict[str, Any]) -> None:
    """Refuse to resume a run whose model files changed since its run.json hashed them (the
    weights retrained at the same path, a `model.spec` now pointing to a later epoch): its
    records would mix two models. A run.json without hashes (older runs) is taken as it is."""
    recorded = old.get("weights")
    if not isinstance(recorded, dict) or not recorded:
        return
    change = weights_change({str(k): str(v) for k, v in recorded.items()}, model_specs(config))
    if change:
        raise SegtkError(f"{path} was made with other weights: {change}",
                         hint="restore the weights the run was made with to resume it, or "
                              "start a new run with another --out")


def write_run_file(path: Path, record: dict[str, Any]) -> None:
    try:
        atomic_write_json(path / layout.RUN, record)
    except OSError as exc:
        raise os_error(exc, f"cannot write {path / layout.RUN}") from exc


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line, fsync'd: all of it, or nothing and a SegtkError.

    Short writes are continued; a failure (full disk, I/O error) cuts the file back to its
    size before, so no torn line or uncounted record is left behind.
    """
    line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise os_error(exc, f"cannot open {path}") from exc
    try:
        start = os.fstat(fd).st_size
        try:
            written = 0
            while written < len(line):
                n = os.write(fd, line[written:])
                if n <= 0:
                    raise OSError(errno.EIO, f"short write ({written} of {len(line)} bytes)")
                written += n
            os.fsync(fd)
        except OSError as exc:
            err = os_error(exc, f"cannot append to {path}")
            try:
                os.ftruncate(fd, start)
            except OSError:
                err.message += "; its last line may be torn (--resume drops it)"
            raise SegtkError(err.message, f"{err.hint}; the records before are kept") from exc
    finally:
        os.close(fd)


def read_results(path: Path, key: str = "image", repair: bool = False) -> dict[str, dict[str, Any]]:
    """Records by `key`. A last line without its newline (an interrupted append) is ignored, and
    cut off if `repair`; any other unreadable line is an error: the lines after it are results."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise os_error(exc, f"cannot read {path}") from exc
    *lines, torn = raw.split(b"\n")
    records: dict[str, dict[str, Any]] = {}
    for number, line in enumerate(lines, 1):
        last = number == len(lines) and not torn
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise _bad_line(path, number, last, f"is not valid JSON ({exc})") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get(key), str):
            raise _bad_line(path, number, last, f"has no {key!r}: not a record of this run")
        records[rec[key]] = rec
    if torn and repair:
        with open(path, "r+b") as fh:
            fh.truncate(len(raw) - len(torn))
    return records


def _bad_line(path: Path, number: int, last: bool, problem: str) -> SegtkError:
    why = ("it ends with a newline, so it is no interrupted append: something else wrote it"
           if last else "the lines after it hold finished results, so it is not dropped")
    return SegtkError(f"{path} line {number} {problem}",
                      hint=f"{why}; repair or delete line {number} (e.g. sed -i '{number}d' "
                           f"{path}), then rerun with --resume")
