"""segtk plugin: the Random attack of the DLA paper (Eq. 2, or the authors' released walk)."""

from segtk.core import Register, hookimpl
from segtk_random.attack import RandomAttack, RandomParams

__all__ = ["RandomAttack", "RandomParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(RandomAttack)
