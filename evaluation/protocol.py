"""The robustness protocol `segtk evaluate` runs: a name, a version and three fixed profiles.

A card is comparable with another only when both ran the same protocol version and profile
(the same attacks, ε grid, budgets, white-box passes and edits): the leaderboard refuses
anything else. Change a profile and the version changes with it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from segtk.core import SegtkError
from segtk.core._eps import check_eps

PROTOCOL = "segtk-robustness"
VERSION = "1.0"


@dataclass(frozen=True)
class Profile:
    """What one profile runs. `black_box`: the decision-based ensemble (each at every budget);
    `white_box`: the gradient attacks of the white-box floor, each given `white_box_passes`
    forward and backward passes; `edits`: attribute editors that need no extra weights
    (classical backend); `eps`: the L∞ grid on the 0-255 scale."""

    name: str
    eps: tuple[float, ...]
    budgets: tuple[int, ...]
    black_box: tuple[str, ...] = ("colour-blocks", "signhunter", "dla")
    white_box: tuple[str, ...] = ("pgd", "segpgd", "cospgd")
    white_box_passes: int = 10
    edits: tuple[str, ...] = ("color", "size")
    repeats: int = 1
    seed: int = 0
    cost: str = field(default="", compare=False)

    def record(self) -> dict[str, Any]:
        """The profile as card.json and run.json hold it (lists, not tuples)."""
        out = asdict(self)
        out.pop("cost")
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


PROFILES = {
    "quick": Profile("quick", eps=(8.0,), budgets=(10, 50), white_box_passes=10,
                     edits=("color", "size"),
                     cost="about 40 s of CPU on the demo (8 images); per image of a real model "
                          "about 160 queries, 30 gradient passes and 2 edits"),
    "standard": Profile("standard", eps=(8.0,), budgets=(10, 50, 200), white_box_passes=20,
                        edits=("color", "material", "style", "weather", "size", "position"),
                        cost="about 5x quick: the 200-query runs dominate"),
    "paper": Profile("paper", eps=(4.0, 8.0), budgets=(10, 50, 200, 500), white_box_passes=50,
                     edits=("color", "material", "style", "weather", "size", "position"),
                     cost="about 25x quick: two ε and 500 queries per image and attack"),
}


def profile_of(name: str, eps: list[float] | None = None) -> Profile:
    """The profile `name`; `eps` replaces its ε grid (the card then names the profile
    NAME+eps, which ranks only with cards of the same grid)."""
    if name not in PROFILES:
        raise SegtkError(f"unknown profile {name!r}", hint=f"use one of {', '.join(PROFILES)}")
    chosen = PROFILES[name]
    if eps is None:
        return chosen
    grid = tuple(dict.fromkeys(check_eps(e) for e in eps))  # segtk's one ε rule
    if not grid:
        raise SegtkError("eps names no value", hint="e.g. eps=[4, 8, 16]")
    if grid == chosen.eps:
        return chosen
    return Profile(f"{name}+eps", grid, chosen.budgets, chosen.black_box, chosen.white_box,
                   chosen.white_box_passes, chosen.edits, chosen.repeats, chosen.seed, chosen.cost)
