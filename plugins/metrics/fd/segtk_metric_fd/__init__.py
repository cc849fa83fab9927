"""segtk plugin: the `fd` editing-quality metric, a Fréchet distance over a transformers
backbone's features (Gen4Seg Tables I and IX use Inception's: FID)."""

from segtk.core import Register, hookimpl
from segtk_metric_fd.metric import (
    FrechetDistance,
    FrechetDistanceParams,
    frechet_distance,
    trace_sqrt_product,
)

__all__ = ["FrechetDistance", "FrechetDistanceParams", "frechet_distance", "trace_sqrt_product"]


@hookimpl
def register_metrics(register: Register) -> None:
    register(FrechetDistance)
