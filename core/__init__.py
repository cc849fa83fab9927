"""The small core every plugin builds on: contracts, metrics, data, the plugin manager."""

from segtk.core.attack import Attack, AttackParams, AttackResult
from segtk.core.augment import Augmenter, Trainable
from segtk.core.editing import EditedSample, Editor, Sample
from segtk.core.errors import BudgetExceeded, SegtkError
from segtk.core.filtering import Filter, FilterResult
from segtk.core.proxy import Proxy
from segtk.core.segmenter import QueryCounter, Segmenter

__all__ = [
    "Attack",
    "AttackParams",
    "AttackResult",
    "Augmenter",
    "BudgetExceeded",
    "EditedSample",
    "Editor",
    "Filter",
    "FilterResult",
    "Proxy",
    "QueryCounter",
    "Sample",
    "Segmenter",
    "SegtkError",
    "Trainable",
]
