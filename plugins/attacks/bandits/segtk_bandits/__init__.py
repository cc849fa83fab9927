"""segtk plugin: the Bandits_TD black-box attack (Ilyas et al. 2019)."""

from segtk.core import Register, hookimpl
from segtk_bandits.attack import BanditsAttack, BanditsParams

__all__ = ["BanditsAttack", "BanditsParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(BanditsAttack)
