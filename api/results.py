"""What the Python API returns: an attack's records and stored images, a benchmark's table.

mIoU and pixel accuracy are in percent (0-100) in everything a result shows: an attack's
summary and its properties, `to_pandas()` tables, benchmark tables (as table.json holds them),
as the CLI prints them. Only the raw per-image records are the lines of results.jsonl as
stored, with fractions in [0, 1] (so run folders of every segtk version read back alike).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from segtk.core import SegtkError, read_image
from segtk.jobs.attack import AttackRecord

__all__ = ["AttackRun", "MemoryRun", "StoredImages", "Table", "data_frame"]


def data_frame(rows: Iterable[Mapping[str, Any]]) -> Any:
    """A pandas DataFrame of `rows`; pandas is optional, so it is imported only here."""
    try:
        import pandas
    except ImportError as exc:
        raise SegtkError("to_pandas() needs pandas, which segtk does not install",
                         hint="pip install pandas (or use the rows: a list of dicts)") from exc
    return pandas.DataFrame(list(rows))


class Table(list):
    """A benchmark's table: one dict per row (a list, so `for row in table` works), with

    - `out`: the run folder (None when nothing was written),
    - `files`: the files written there (table.csv, table.json, plots, ...),
    - `details`: the rest of the result, as each function documents (curves, groups, ...),
    - `to_pandas()`: the rows as a DataFrame (needs pandas).
    """

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, out: Path | None = None,
                 files: Iterable[Path] = (), details: dict[str, Any] | None = None) -> None:
        super().__init__(rows)
        self.out = out
        self.files = list(files)
        self.details = details or {}

    def to_pandas(self) -> Any:
        return data_frame(self)

    def __repr__(self) -> str:
        """A few lines, for a notebook: the row count, the columns, the folder."""
        columns = list(dict.fromkeys(k for row in self for k in row))
        shown = ", ".join(columns[:10]) + (", ..." if len(columns) > 10 else "")
        where = f", out={str(self.out)!r}" if self.out is not None else ""
        return f"Table({len(self)} rows: {shown}{where})"


class StoredImages(Mapping[str, np.ndarray]):
    """The stored 8-bit adversarial images of a run folder, read from OUT/images on access."""

    def __init__(self, folder: Path, names: Iterable[str]) -> None:
        self.folder = folder
        self.names = [n for n in names if (folder / f"{n}.png").is_file()]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.names:
            raise KeyError(name)
        return read_image(self.folder / f"{name}.png")

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


PERCENT = ("clean_miou", "adv_miou", "clean_image_miou", "adv_image_miou", "clean_pacc",
           "adv_pacc")  # the ratios a summary and a per-image table show in %


def in_percent(row: Mapping[str, Any]) -> dict[str, Any]:
    """`row` with its PERCENT ratios (fractions, as jobs and results.jsonl keep them) in %."""
    return {k: 100.0 * v if k in PERCENT and isinstance(v, int | float) else v
            for k, v in row.items()}


@dataclass(repr=False)
class AttackRun:
    """What `segtk.attack` returns; every mIoU and pixel accuracy it shows is in percent.

    records: one `AttackRecord` per image, the lines of results.jsonl as stored (image,
        clean_miou, adv_miou, clean_pacc, adv_pacc as fractions in [0, 1], queries, linf,
        attack_proxy, history, clean_confusion, adv_confusion, and stopped where a time limit
        stopped the attack) as attributes; each also reads as its JSON line
        (`record["queries"]`). `to_pandas()` shows them in %.
    summary: the CLI's table, in %: images, clean_miou and adv_miou (dataset mIoU %),
        clean_image_miou and adv_image_miou (mean per-image mIoU %), clean_pacc, adv_pacc
        (pixel accuracy %), mean_queries, max_linf (0–255).
    images: image name -> the stored 8-bit adversarial image (uint8 HWC), the one the scores
        are computed on; in memory when `out` is None, else read from OUT/images.
    out: the run folder, or None.
    """

    records: list[AttackRecord]
    summary: dict[str, float]
    images: Mapping[str, np.ndarray] = field(default_factory=dict)
    out: Path | None = None

    @property
    def clean_miou(self) -> float:
        """Dataset mIoU % of the clean images (one confusion over all images)."""
        return self.summary["clean_miou"]

    @property
    def adv_miou(self) -> float:
        """Dataset mIoU % of the stored adversarial images."""
        return self.summary["adv_miou"]

    @property
    def clean_image_miou(self) -> float:
        """Mean per-image mIoU % of the clean images."""
        return self.summary["clean_image_miou"]

    @property
    def adv_image_miou(self) -> float:
        """Mean per-image mIoU % of the stored adversarial images."""
        return self.summary["adv_image_miou"]

    def to_pandas(self) -> Any:
        """One row per image, mIoU and pixel accuracy in % (the records without their
        confusion matrices and histories)."""
        skip = ("clean_confusion", "adv_confusion", "history")
        return data_frame(in_percent({k: v for k, v in r.to_json().items() if k not in skip})
                          for r in self.records)

    def __repr__(self) -> str:
        """One line, for a notebook: the images, the mIoU drop and where the run is."""
        where = f", out={str(self.out)!r}" if self.out is not None else ""
        s = self.summary
        return (f"AttackRun(images={s.get('images', len(self.records))}, "
                f"clean_miou={s.get('clean_miou', float('nan')):.2f}%, "
                f"adv_miou={s.get('adv_miou', float('nan')):.2f}%, "
                f"mean_queries={s.get('mean_queries', float('nan')):.1f}, "
                f"max_linf={s.get('max_linf', float('nan')):g}{where})")


class MemoryRun:
    """A run kept in memory (`out=None`): what a RunDir would append, and nothing on disk.
    Each record is stored as its JSON line reads back, so it equals the file's record."""

    path = None

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def done(self, key: str = "image") -> dict[str, dict[str, Any]]:
        return {r[key]: r for r in self.records}

    def append(self, record: dict[str, Any]) -> None:
        self.records.append(json.loads(json.dumps(record, separators=(",", ":"))))

    def write_run_file(self, summary: dict[str, Any] | None = None) -> None:
        """Nothing to write (a RunDir writes run.json)."""

    def close(self) -> None:
        """Nothing to release (a RunDir releases its lock)."""
