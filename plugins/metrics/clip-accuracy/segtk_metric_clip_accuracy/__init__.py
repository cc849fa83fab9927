"""segtk plugin: the `clip-accuracy` editing-quality metric (Gen4Seg Tables I and VIII)."""

from segtk.core import Register, hookimpl
from segtk_metric_clip_accuracy.metric import ClipAccuracy, ClipAccuracyParams, closer_to_target

__all__ = ["ClipAccuracy", "ClipAccuracyParams", "closer_to_target"]


@hookimpl
def register_metrics(register: Register) -> None:
    register(ClipAccuracy)
