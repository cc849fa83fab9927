"""segtk plugin: CosPGD (Agnihotri, Jung and Keuper, ICML 2024), a white-box L∞ attack."""

from segtk.core import Register, hookimpl
from segtk_cospgd.attack import CosPGDAttack, CosPGDParams

__all__ = ["CosPGDAttack", "CosPGDParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(CosPGDAttack)
