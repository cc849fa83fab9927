"""What the Python API returns: an attack's records and stored images, a benchmark's table.

Numbers are what the run files hold: per-image records exactly as results.jsonl stores them
(mIoU and pixel accuracy as fractions in [0, 1]), benchmark tables as table.json holds them
(mIoU in %). The CLI prints the same numbers.
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


@dataclass
class AttackRun:
    """What `segtk.attack` returns.

    records: one `AttackRecord` per image, the fields of results.jsonl (image, clean_miou,
        adv_miou, clean_pacc, adv_pacc, queries, linf, attack_proxy, history, clean_confusion,
        adv_confusion, and stopped where a time limit stopped the attack) as attributes; each
        also reads as its JSON line (`record["queries"]`).
    summary: the CLI's table as fractions: images, clean_miou and adv_miou (dataset mIoU),
        clean_image_miou and adv_image_miou (mean per-image mIoU), clean_pacc, adv_pacc,
        mean_queries, max_linf (0–255).
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
        """Dataset mIoU of the clean images (one confusion over all images)."""
        return self.summary["clean_miou"]

    @property
    def adv_miou(self) -> float:
        """Dataset mIoU of the stored adversarial images."""
        return self.summary["adv_miou"]

    @property
    def clean_image_miou(self) -> float:
        """Mean per-image mIoU of the clean images."""
        return self.summary["clean_image_miou"]

    @property
    def adv_image_miou(self) -> float:
        """Mean per-image mIoU of the stored adversarial images."""
        return self.summary["adv_image_miou"]

    def to_pandas(self) -> Any:
        """One row per image (the records without their confusion matrices and histories)."""
        skip = ("clean_confusion", "adv_confusion", "history")
        return data_frame({k: v for k, v in r.to_json().items() if k not in skip}
                          for r in self.records)


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
