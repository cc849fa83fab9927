"""segtk plugin: the Square Attack, L∞ (Andriushchenko et al. 2020)."""

from segtk.core import Register, hookimpl
from segtk_square.attack import SquareAttack, SquareParams

__all__ = ["SquareAttack", "SquareParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(SquareAttack)
