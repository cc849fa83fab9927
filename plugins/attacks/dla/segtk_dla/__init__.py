"""segtk plugin: the Discrete Linear Attack."""

from segtk.core import hookimpl
from segtk_dla.attack import DLA, DLAParams

__all__ = ["DLA", "DLAParams"]


@hookimpl
def register_attacks(register) -> None:
    register(DLA)
