"""segtk plugin: the `dino-distance` editing-quality metric (Gen4Seg Tables VII–IX)."""

from segtk.core import Register, hookimpl
from segtk_metric_dino_distance.metric import (
    DinoDistance,
    DinoDistanceParams,
    cls_distance,
    self_similarity,
    structure_distance,
)

__all__ = ["DinoDistance", "DinoDistanceParams", "cls_distance", "self_similarity",
           "structure_distance"]


@hookimpl
def register_metrics(register: Register) -> None:
    register(DinoDistance)
