"""A training run's checkpoints: one folder per epoch, checkpoint.json written last with every
file's sha256, so a resume starts only from a complete, unaltered checkpoint."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import load_file

from segtk.core import SegtkError, atomic_write_bytes, save_safetensors
from segtk.core._errors import naming
from segtk.core._specs import relative_spec, saved_spec
from segtk.core._training import Trainable
from segtk.storage.layout import CHECKPOINT_DONE, CHECKPOINT_MODEL, CHECKPOINTS, OPTIMIZER, STATE
from segtk.storage.provenance import sha256_file
from segtk.storage.records import Record
from segtk.storage.runs import atomic_write_json


@dataclass(kw_only=True)
class CheckpointRecord(Record):
    """checkpoint.json, written last into a checkpoint folder: a folder without it is partial."""

    KIND = "checkpoint record"
    OMIT_DEFAULT = ("sha256",)  # checkpoints written before hashes were recorded have none

    epoch: int
    spec: str  # as EpochLine.spec
    loss: float
    augment: str  # the augmenter spec the run trains with
    sha256: dict[str, str] = field(default_factory=dict)  # every other file's, by relative path


def checkpoint_dir(out: Path, epoch: int) -> Path:
    return out / CHECKPOINTS / f"epoch-{epoch:04d}"


def save_checkpoint(model: Trainable, optimizer: torch.optim.Optimizer, out: Path, epoch: int,
                    loss: float, augment: str) -> str:
    """Model (plugin format + exact state), optimizer; checkpoint.json last, with every file's
    sha256. Returns the spec, relative to `out` (see `relative_spec`)."""

    folder = checkpoint_dir(out, epoch)
    folder.mkdir(parents=True, exist_ok=True)
    spec = relative_spec(saved_spec(model, model.save(folder / CHECKPOINT_MODEL)), out)
    save_safetensors(folder / STATE, model.state_dict())
    buf = io.BytesIO()
    torch.save(optimizer.state_dict(), buf)
    atomic_write_bytes(folder / OPTIMIZER, buf.getvalue())
    record = CheckpointRecord(epoch=epoch, spec=spec, loss=loss, augment=augment,
                              sha256=checkpoint_hashes(folder))
    atomic_write_json(folder / CHECKPOINT_DONE, record.to_json())
    return spec


def checkpoint_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file of a checkpoint but checkpoint.json, by path relative to it."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != CHECKPOINT_DONE
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in files}


def read_checkpoint(folder: Path) -> CheckpointRecord:
    """A checkpoint folder's checkpoint.json; one that cannot be read makes it damaged."""
    done = folder / CHECKPOINT_DONE
    try:
        return CheckpointRecord.from_json(json.loads(done.read_text()), where=str(done))
    except (OSError, ValueError) as exc:
        raise damaged(done, f"cannot be read ({exc})") from exc
    except SegtkError as exc:
        raise damaged(done, f"cannot be read ({exc.message})") from exc


def verify_checkpoint(folder: Path) -> None:
    """Refuse a checkpoint whose files differ from the sha256 checkpoint.json recorded (a bit
    flip, a truncated copy). Checkpoints written before hashes were recorded are taken as is."""
    for name, digest in read_checkpoint(folder).sha256.items():
        path = folder / name
        try:
            actual = sha256_file(path)
        except OSError as exc:
            raise damaged(path, f"cannot be read ({exc.strerror or exc})") from exc
        if actual != digest:
            raise damaged(path, f"does not match the sha256 recorded in {folder / CHECKPOINT_DONE}")


def damaged(path: Path, problem: str) -> SegtkError:
    folder = path.parent if path.parent.name.startswith("epoch-") else path.parent.parent
    return SegtkError(f"{path} {problem}: the checkpoint is damaged",
                      hint=f"delete {folder} and rerun with --resume: that epoch is trained "
                           "again (or restore the folder from a backup)")


def latest_checkpoint(out: Path, epochs_done: set[int]) -> int:
    """The last epoch whose checkpoint is complete and recorded in results.jsonl (0 if none)."""
    best = 0
    for epoch in sorted(epochs_done):
        if (checkpoint_dir(out, epoch) / CHECKPOINT_DONE).is_file() and \
                all(e in epochs_done for e in range(1, epoch + 1)):
            best = epoch
    return best


def restore(model: Trainable, optimizer: torch.optim.Optimizer, out: Path, epoch: int) -> None:
    """Load epoch's checkpoint after checking its files' sha256 and that its weights are finite."""
    folder = checkpoint_dir(out, epoch)
    verify_checkpoint(folder)
    with naming(f"resuming from {folder}", SegtkError, "loading the checkpoint",
                hint="the checkpoint is damaged: delete that epoch's folder to resume from the one before"):
        model.load_state_dict(load_file(str(folder / STATE)))
        optimizer.load_state_dict(torch.load(folder / OPTIMIZER, weights_only=True))
    bad = non_finite(model)
    if bad:
        raise damaged(folder / STATE, f"holds NaN or infinite weights ({bad})")


def non_finite(model: Trainable) -> str:
    """The first tensor of the model holding NaN or inf ('' if none)."""
    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return ""


