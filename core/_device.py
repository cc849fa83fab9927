"""Where a job runs: `--device cpu|cuda[:N]|auto` (and `device=` in Python), read once here.

Every command and the Python API resolve the device with `resolve_device` and record the
result in run.json ("cpu", "cuda:0"), so a run resumes on the device it started on.
"""

from __future__ import annotations

from typing import Any

import torch

from segtk.core._errors import SegtkError

DEVICES = "cpu, cuda, cuda:N or auto (CUDA when present, else cpu)"
# One definition of the option, for segtk's commands and for plugins' own commands (which
# import only segtk.core): click.option("--device", **DEVICE_OPTION).
DEVICE_OPTION: dict[str, Any] = {
    "default": None,
    "metavar": "cpu|cuda[:N]|auto",
    "help": "Where the model and the job's tensors live: cpu, cuda, cuda:N, or auto (CUDA "
            "when present). Recorded in run.json (--resume reads it from there) "
            "[default: cpu].",
}


def resolve_device(device: str | torch.device | None = "cpu") -> torch.device:
    """`device` as a torch.device with its index ("cuda" -> cuda:CURRENT); None is cpu, auto
    is CUDA when present. A CUDA device this machine lacks is a SegtkError with a hint."""
    if device is None:
        return torch.device("cpu")
    text = str(device).strip().lower()
    if text == "auto":
        text = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(text)
    except RuntimeError as exc:
        raise SegtkError(f"unknown device {str(device)!r}", hint=f"use {DEVICES}") from exc
    if parsed.type == "cpu":
        return torch.device("cpu")
    if parsed.type != "cuda":
        raise SegtkError(f"device {str(device)!r} is not supported", hint=f"use {DEVICES}")
    if not torch.cuda.is_available():
        build = "this torch is built without CUDA" if torch.version.cuda is None \
            else "no CUDA device is visible"
        raise SegtkError(f"device {str(device)!r}: CUDA is not available ({build})",
                         hint="use --device cpu, or --device auto to take CUDA where present")
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if parsed.index is None else parsed.index
    if index >= count:
        raise SegtkError(f"device {str(device)!r}: this machine has {count} CUDA device"
                         f"{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1})",
                         hint="pick one of those, or --device auto")
    return torch.device("cuda", index)

