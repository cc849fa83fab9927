"""segtk plugin: the `masked-lpips` editing-quality metric (Gen4Seg Table VII)."""

from segtk.core import Register, hookimpl
from segtk_metric_masked_lpips.lpips import TAPS, LpipsNet, read_weights
from segtk_metric_masked_lpips.metric import MaskedLpips, MaskedLpipsParams, masked_mean

__all__ = ["TAPS", "LpipsNet", "MaskedLpips", "MaskedLpipsParams", "masked_mean", "read_weights"]


@hookimpl
def register_metrics(register: Register) -> None:
    register(MaskedLpips)
