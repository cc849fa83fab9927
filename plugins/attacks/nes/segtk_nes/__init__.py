"""segtk plugin: the NES black-box attack (Ilyas et al. 2018)."""

from segtk.core import Register, hookimpl
from segtk_nes.attack import NESAttack, NESParams

__all__ = ["NESAttack", "NESParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(NESAttack)
