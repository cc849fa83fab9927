"""segtk plugin: the `clip` sample filter (Gen4Seg Eq. 9)."""

from segtk.core import hookimpl
from segtk_filter_clip.filter import ClipFilter, clip_scores, passes

__all__ = ["ClipFilter", "clip_scores", "passes"]


@hookimpl
def register_filters(register) -> None:
    register(ClipFilter)
