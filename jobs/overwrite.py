"""`--overwrite` (`overwrite=True`): start a run folder over on purpose.

Only a folder segtk made is cleared: one whose run.json records a run of the same command.
What is removed is what segtk writes there, by name (storage.layout: run.json, the results,
pictures, tables, reports, checkpoints and nested runs); any other file in the folder is kept.
A folder without a run.json that holds anything is refused, naming it, as is a run of another
command, and a folder another process is writing (its lock). Asking to resume and to start
over at once is refused.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from segtk.core import SegtkError
from segtk.core._data import is_temp
from segtk.storage import layout
from segtk.storage.runs import RunLock, command_of, load_run_file

# what segtk writes at the top of a run folder: every name storage.layout defines, but the
# lock (held while clearing) and the names that only occur inside a checkpoint
WRITTEN = frozenset(
    value for name, value in vars(layout).items()
    if name.isupper() and isinstance(value, str)
    and name not in ("LOCK", "CHECKPOINT_DONE", "CHECKPOINT_MODEL")
)


def refuse_with_resume(flag: str = "--overwrite", resume: str = "--resume") -> SegtkError:
    return SegtkError(f"{flag} and {resume} contradict each other: one starts the run over, "
                      "the other continues it", hint=f"pass only one of {flag} and {resume}")


def overwrite_run(out: str | Path | None, kind: str, resume: bool = False) -> list[Path]:
    """`overwrite=True` of a Python API function writing a `kind` run to `out` (None: it
    writes nothing, so there is nothing to clear)."""
    if resume:
        raise refuse_with_resume("overwrite=True", "resume=True")
    return [] if out is None else start_over(out, kind)


def start_over(path: str | Path, kind: str, resume: bool = False) -> list[Path]:
    """Remove what a segtk run of `kind` wrote in `path` (see the module doc) and return it;
    nothing where the folder is absent or empty."""
    if resume:
        raise refuse_with_resume()
    folder = Path(path)
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise SegtkError(f"{folder} is a file, not a run folder", hint="choose another --out")
    entries = sorted(p for p in folder.iterdir() if p.name != layout.LOCK)
    if not entries:
        return []
    record = load_run_file(folder / layout.RUN)
    if record is None:
        raise SegtkError(f"{folder} was not made by segtk (it has no {layout.RUN}), so "
                         "--overwrite leaves it alone",
                         hint="choose another --out, or empty that folder yourself")
    old_kind = record.get("kind") or kind  # run.json files from before kinds were recorded
    if old_kind != kind:
        raise SegtkError(f"{folder} holds a `segtk {command_of(old_kind)}` run, not a "
                         f"`segtk {command_of(kind)}` one; --overwrite leaves it alone",
                         hint="choose another --out")
    lock = RunLock(folder)  # refuses a folder another process is writing
    try:
        ours = [p for p in entries if p.name in WRITTEN or is_temp(p.name)]
        # run.json last: a clear cut short still leaves a folder --overwrite recognises
        ours.sort(key=lambda p: p.name == layout.RUN)
        for entry in ours:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    finally:
        lock.release()
    return ours
