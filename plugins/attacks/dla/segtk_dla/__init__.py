"""segtk plugin: the Discrete Linear Attack."""

from segtk.core.hookspecs import hookimpl
from segtk_dla.attack import DLA, DLAParams

__all__ = ["DLA", "DLAParams"]


@hookimpl
def register_attacks(register) -> None:
    register(DLA)
