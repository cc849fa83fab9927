"""segtk plugin: SegPGD (Gu et al., ECCV 2022), a white-box L∞ segmentation attack."""

from segtk.core import Register, hookimpl
from segtk_segpgd.attack import SegPGDAttack

__all__ = ["SegPGDAttack"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(SegPGDAttack)
