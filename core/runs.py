"""Run directories: run.json, results.jsonl appended atomically per image, and resume."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from segtk.core.data import atomic_write_bytes
from segtk.core.errors import SegtkError

RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"


def versions() -> dict[str, str]:
    import importlib.metadata as md

    import torch

    from segtk import __version__

    out = {"segtk": __version__, "torch": torch.__version__, "python": platform.python_version()}
    for dist in md.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("segtk-"):
            out[name] = dist.version
    return out


class RunDir:
    """A run's output folder. `config` must match on resume, so results never mix runs.

    `may_differ` names config keys a resume may change because every record carries that
    setting in its key (e.g. a benchmark's attack list: adding an attack reuses the others).
    """

    def __init__(self, path: str | Path, config: dict[str, Any], resume: bool,
                 may_differ: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self.config = config
        run_file = self.path / RUN_FILE
        if run_file.exists():
            old = json.loads(run_file.read_text())
            if not resume and (self.path / RESULTS_FILE).exists():
                raise SegtkError(
                    f"{self.path} already holds results",
                    hint="pass --resume to continue that run, or choose another --out",
                )
            diff = sorted(k for k in set(old.get("config", {})) | set(config)
                          if old.get("config", {}).get(k) != config.get(k) and k not in may_differ)
            if resume and diff:
                raise SegtkError(
                    f"{self.path} holds a run with other settings ({', '.join(diff)})",
                    hint="resume with the same options, or choose another --out",
                )
        self.path.mkdir(parents=True, exist_ok=True)
        record = {"command": " ".join(sys.argv), "versions": versions(), "config": config}
        atomic_write_bytes(run_file, (json.dumps(record, indent=2) + "\n").encode())

    def done(self, key: str = "image") -> dict[str, dict[str, Any]]:
        """Finished records by `key`. A torn last line (a crash mid-write) is dropped."""
        return read_results(self.path / RESULTS_FILE, key=key, repair=True)

    def append(self, record: dict[str, Any]) -> None:
        """One line per image, written with a single write and fsync'd."""
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path / RESULTS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)


def read_results(path: Path, key: str = "image", repair: bool = False) -> dict[str, dict[str, Any]]:
    if not path.exists():
        return {}
    raw = path.read_bytes()
    records: dict[str, dict[str, Any]] = {}
    good = 0
    for line in raw.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            break
        records[rec[key]] = rec
        good += len(line)
    if repair and good < len(raw):
        with open(path, "r+b") as fh:
            fh.truncate(good)
    return records
