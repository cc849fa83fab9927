"""segtk plugin: colour-blocks, segtk's own decision-based attack."""

from segtk.core import hookimpl
from segtk_colour_blocks.attack import ColourBlocks, ColourBlocksParams

__all__ = ["ColourBlocks", "ColourBlocksParams"]


@hookimpl
def register_attacks(register) -> None:
    register(ColourBlocks)
