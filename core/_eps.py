"""The one rule for reading ε: segtk takes it on the 0–255 scale (8 means 8/255).

A value in (0, 1) is plainly on the [0,1] scale (torchattacks' habit, eps=8/255): read as
0–255 it would be under one 8-bit step, the stored images would equal the clean ones and the
model would look perfectly robust. So it is refused, naming both scales and the value to pass,
everywhere ε is read (the Python API, the CLI, attack specs): never a silent no-op.
"""

from __future__ import annotations

from segtk.core._errors import SegtkError

__all__ = ["check_eps"]


def check_eps(value: float, name: str = "eps") -> float:
    """`value` as a float if it is a valid ε on the 0–255 scale, else a SegtkError."""
    eps = float(value)
    if 0 < eps < 1:
        steps = round(eps * 255)
        suggestion = f"{name}={steps} for {steps}/255" if steps >= 1 else f"{name}=1 or more"
        raise SegtkError(f"{name}={eps:g} looks like a fraction of the [0,1] range; segtk takes "
                         f"{name} on the 0-255 scale: pass {suggestion}",
                         hint="stored images keep whole 0-255 steps, so ε under 1 could change "
                              "nothing")
    if not 0 < eps <= 255:
        raise SegtkError(f"{name} must be in (0, 255], got {eps} (the 0-255 scale)",
                         hint=f"e.g. {name}=8 for 8/255")
    return eps
