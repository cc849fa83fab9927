"""`segtk serve --memory-mb`: the request sizes a memory budget allows for this model.

Decoding is bounded by the headers (limits.py), but the model's forward pass costs far more
per pixel (the demo: ~220 bytes a pixel, 3.7 GB for one 4096x4096 image). At start-up the
server measures that cost on a probe image (peak RSS growth, Linux) and sizes one forward pass
to what is left of the budget once everything else a request may hold is counted:

    idle server (measured) + bodies being received (--body-buffer-mb)
    + one more body (JSON's decoded copy, --max-body-mb)
    + REQUEST_BYTES_PER_PIXEL x --max-request-pixels (decoded images, labels, the answer)
    + the model's cost per pixel x --forward-pixels              <= --memory-mb

Images bigger than one forward pass are refused (413); bigger requests run in chunks of whole
images. The budget covers the server process's memory (RSS), not a GPU's.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass, replace

import torch

from segtk.core import Segmenter, SegtkError
from segtk_http.limits import MIB, Limits

# float32 images (12), one image's decode temporaries (9), wire labels and the npz answer (8),
# rounded up.
REQUEST_BYTES_PER_PIXEL = 32
PROBE_SIDE = 512  # the probe image: 262144 pixels, ~0.3 s on a CPU for the demo
SAFETY = 1.25  # the measured cost per pixel is scaled by this (allocator noise)
ASSUMED_BYTES_PER_PIXEL = 1024  # where the cost cannot be measured (no /proc, or the probe fails)
# Below this the growth was not seen (the allocator reused resident memory a long-lived process
# freed earlier), not absent: every forward pass writes at least int64 labels.
MIN_MEASURED_BYTES_PER_PIXEL = 8
DEFAULT_MEMORY_MB = 2048


@dataclass(frozen=True)
class Budget:
    """How `memory_bytes` is shared out; `describe()` is the line `segtk serve` prints."""

    memory_bytes: int
    idle_bytes: int
    fixed_bytes: int  # bodies, JSON copy and the request's own pixels
    bytes_per_pixel: float  # of one forward pass, with SAFETY
    measured: bool

    @property
    def forward_pixels(self) -> int:
        room = self.memory_bytes - self.idle_bytes - self.fixed_bytes
        return int(room // self.bytes_per_pixel) if self.bytes_per_pixel > 0 else sys.maxsize

    def describe(self) -> str:
        how = "measured" if self.measured else "assumed, not measurable here"
        return (f"memory budget {self.memory_bytes // MIB} MiB: idle {self.idle_bytes // MIB} MiB, "
                f"bodies and request buffers {self.fixed_bytes // MIB} MiB, forward pass "
                f"~{self.bytes_per_pixel:.0f} bytes/pixel ({how})")


def status_bytes(field: str) -> int | None:
    """VmRSS / VmHWM of this process in bytes, or None where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def rss_bytes() -> int:
    """This process's memory now (Linux), else its peak so far (an upper bound)."""
    now = status_bytes("VmRSS")
    if now is not None:
        return now
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return status_bytes("VmHWM") is not None


def forward_cost(segmenter: Segmenter, side: int = PROBE_SIDE) -> float | None:
    """Peak RSS growth per pixel of one forward pass on a side x side probe, or None.

    None where it cannot be measured: no /proc, a probe the model refuses, or growth too small to
    be real (freed memory reused), so the caller falls back to the assumed, larger cost.
    """
    probe = torch.zeros(1, 3, side, side, device=segmenter.device)
    try:
        segmenter.predict(probe[..., :64, :64])  # first-call set-up is not a per-pixel cost
        if not reset_peak():
            return None
        before = rss_bytes()
        segmenter.predict(probe)
    except Exception:  # a model that cannot take the probe: fall back to the assumed cost
        return None
    peak = status_bytes("VmHWM") or before
    cost = max(peak - before, 0) / (side * side)
    return cost if cost >= MIN_MEASURED_BYTES_PER_PIXEL else None


def plan_limits(segmenter: Segmenter, memory_bytes: int, limits: Limits,
                max_pixels: int | None, forward_pixels: int | None) -> tuple[Limits, Budget]:
    """`limits` with max_pixels and max_forward_pixels fitted to `memory_bytes` (None: auto).

    An explicit --forward-pixels is taken as given (the cost is not measured); an explicit
    --max-pixels over what the budget allows is refused with a one-line error.
    """
    if max_pixels is not None:  # the user's own caps must agree first (one clear line if not)
        replace(limits, max_pixels=max_pixels, max_forward_pixels=forward_pixels or max_pixels)
    cost = forward_cost(segmenter) if forward_pixels is None else None
    fixed = (limits.max_buffered_bytes + limits.max_body_bytes
             + REQUEST_BYTES_PER_PIXEL * limits.max_request_pixels)
    budget = Budget(memory_bytes=memory_bytes, idle_bytes=rss_bytes(), fixed_bytes=fixed,
                    bytes_per_pixel=SAFETY * (cost if cost is not None else ASSUMED_BYTES_PER_PIXEL),
                    measured=cost is not None)
    room = memory_bytes - budget.idle_bytes - fixed
    if room <= 0:
        raise SegtkError(
            f"--memory-mb {memory_bytes // MIB} leaves no room for a forward pass: the idle server "
            f"uses {budget.idle_bytes // MIB} MiB, bodies and request buffers {fixed // MIB} MiB",
            hint="raise --memory-mb, or lower --body-buffer-mb, --max-body-mb or "
                 "--max-request-pixels")
    if forward_pixels is None:
        forward_pixels = min(budget.forward_pixels, limits.max_request_pixels)
        if forward_pixels < (max_pixels or 1):
            raise SegtkError(
                f"{f'--max-pixels {max_pixels}' if max_pixels else 'a forward pass'} does not fit "
                f"--memory-mb {memory_bytes // MIB}: {segmenter.name} takes "
                f"~{budget.bytes_per_pixel:.0f} bytes a pixel, so at most "
                f"{max(forward_pixels, 0)} pixels fit",
                hint="lower --max-pixels, raise --memory-mb, or set --forward-pixels yourself")
    if max_pixels is None:
        max_pixels = min(forward_pixels, limits.max_request_pixels)
    return replace(limits, max_pixels=max_pixels, max_forward_pixels=forward_pixels), budget
