"""segtk plugin: colour-stripes, segtk's own decision-based attack."""

from segtk.core import hookimpl
from segtk_colour_stripes.attack import ColourStripes, ColourStripesParams

__all__ = ["ColourStripes", "ColourStripesParams"]


@hookimpl
def register_attacks(register) -> None:
    register(ColourStripes)
