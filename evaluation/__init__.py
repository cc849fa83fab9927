"""segtk.evaluation: the robustness protocol behind `segtk evaluate` and `segtk leaderboard`.

One call runs a named, versioned protocol (clean scores, the decision-based ensemble's
per-image worst case at each budget, the white-box floor, attribute edits) through the
existing benchmarks and writes a robustness card (card.json, card.html); the leaderboard
ranks cards of one protocol version and dataset.
"""

from segtk.evaluation.card import CARD_JSON, read_card
from segtk.evaluation.leaderboard import leaderboard
from segtk.evaluation.protocol import PROFILES, PROTOCOL, VERSION, Profile
from segtk.evaluation.run import evaluate

__all__ = ["CARD_JSON", "PROFILES", "PROTOCOL", "VERSION", "Profile", "evaluate", "leaderboard",
           "read_card"]
