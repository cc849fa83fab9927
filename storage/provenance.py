"""What produced a run: package versions, the segtk git commit and the model files' sha256.

run.json records these so a result can be traced to the exact code and weights. None of it may
fail a run: a missing git, a non-checkout install or an unreadable file give None / no entry.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata as md
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from segtk import __version__
from segtk.core import SegtkError, atomic_write_bytes
from segtk.core._specs import is_spec_file, read_spec_file

SOURCE = Path(__file__).resolve().parent.parent  # the segtk package's folder (the repo root)
_CHUNK = 1 << 20


def versions() -> dict[str, str]:
    """segtk, torch, Python and every segtk-* distribution (read once per process)."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:



    out = {"segtk": __version__, "torch": torch.__version__, "python": platform.python_version()}
    for dist in md.distributions():
        name = dist.metadata["Name"] or ""
        if name.startswith("segtk-"):
            out[name] = dist.version
    return out


@functools.cache
def git_commit() -> str | None:
    """HEAD of the segtk checkout, or None (no git, not a checkout, or a checkout of something
    else that merely contains an installed segtk, e.g. a project holding its virtualenv)."""
    try:
        done = subprocess.run(["git", "-C", str(SOURCE), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split("\n")
    if done.returncode != 0 or len(lines) < 2:
        return None
    try:
        same = Path(lines[0]).resolve() == SOURCE
    except OSError:
        return None
    return (lines[1].strip() or None) if same else None


def spec_files(spec: str) -> list[Path]:
    """Existing files a model spec names: PLUGIN:FILE, PLUGIN:KEY=FILE, PLUGIN:A,B,key=v...;
    for a spec file (`runs/t/model.spec`), the file and those its spec names."""
    if is_spec_file(spec):
        try:
            return [Path(spec), *spec_files(read_spec_file(spec))]
        except SegtkError:
            return [Path(spec)]
    _, _, arg = spec.partition(":")
    parts = arg.split(",")
    candidates = [arg, *parts, *(p.partition("=")[2] for p in parts)]
    found: list[Path] = []
    for text in dict.fromkeys(c for c in candidates if c):
        path = Path(text).expanduser()
        try:
            if path.is_file() and path not in found:
                found.append(path)
        except OSError:
            continue
    return found


def spec_file_hashes(specs: Iterable[str]) -> dict[str, str]:
    """sha256 of every file the model specs name, keyed by the path as written in the spec."""
    out: dict[str, str] = {}
    for spec in specs:
        for path in spec_files(spec):
            digest = file_sha256(path)
            if digest is not None:
                out[str(path)] = digest
    return out


def weights_change(recorded: Mapping[str, str], specs: Iterable[str]) -> str | None:
    """How the model files `specs` name now differ from `recorded` (a run.json's `weights`), in
    words, or None: a file whose sha256 changed, or a spec file (`RUN/model.spec`) that points
    to other weights than it did (its own text may change: the weights it names count). A
    recorded file that is gone is left to the model's loader, which names it."""
    then = {os.path.realpath(p): (p, digest) for p, digest in recorded.items()}
    specs = list(dict.fromkeys(specs))
    named = {os.path.realpath(p) for spec in specs for p in spec_files(spec)}
    for spec in specs:
        weights = [p for p in spec_files(spec) if not is_spec_file(str(p))]
        for path in weights:
            old, now = then.get(os.path.realpath(path)), file_sha256(path)
            if old is not None and now is not None and now != old[1]:
                return f"{path} has sha256 {short(now)} now, {short(old[1])} in run.json"
        new = [p for p in weights if os.path.realpath(p) not in then]
        if new and is_spec_file(spec) and os.path.realpath(spec) in then:
            before = [f"{p} (sha256 {short(d)})" for key, (p, d) in then.items()
                      if key not in named and not p.endswith(".spec")]
            return (f"{spec} points to {new[0]} (sha256 {short(file_sha256(new[0]))}) now, "
                    f"to {before[0] if before else 'other weights'} in run.json")
    return None


def short(digest: str | None) -> str:
    """A sha256 as people compare it: its first 12 hex digits."""
    return (digest or "unreadable")[:12]


def file_sha256(path: Path) -> str | None:
    """Cached by resolved path, mtime and size in ~/.cache/segtk, so big weights hash once."""
    try:
        stat, resolved = path.stat(), path.resolve()
        key = f"{resolved}|{stat.st_mtime_ns}|{stat.st_size}"
    except OSError:
        return None
    cache = _load_cache()
    if key in cache:
        return cache[key]
    try:
        digest = sha256_file(path)
    except OSError:
        return None
    cache = {k: v for k, v in cache.items() if not k.startswith(f"{resolved}|")}  # stale versions
    cache[key] = digest
    _save_cache(cache)
    return digest


def sha256_file(path: Path) -> str:
    """The file's sha256 (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _cache_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "segtk" / "sha256.json"


def _load_cache() -> dict[str, str]:
    try:
        data = json.loads(_cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _save_cache(cache: dict[str, str]) -> None:
    """Best effort: a cache that cannot be written only means hashing again next time."""

    try:
        atomic_write_bytes(_cache_path(), json.dumps(cache, indent=0).encode())
    except OSError:
        pass
