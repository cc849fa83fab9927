"""segtk plugin: the `surrogate` pixel filter (Gen4Seg Eq. 10)."""

from segtk.core import hookimpl
from segtk_filter_surrogate.filter import SurrogateFilter, class_losses, filter_label, loss_map

__all__ = ["SurrogateFilter", "class_losses", "filter_label", "loss_map"]


@hookimpl
def register_filters(register) -> None:
    register(SurrogateFilter)
