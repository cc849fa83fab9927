"""segtk plugin: white-box L∞ PGD on the per-pixel cross-entropy (Madry et al. 2018)."""

from segtk.core import Register, hookimpl
from segtk_pgd.attack import PGDAttack

__all__ = ["PGDAttack"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(PGDAttack)
