"""segtk plugin: the SignHunter black-box attack (Al-Dujaili & O'Reilly 2020)."""

from segtk.core import Register, hookimpl
from segtk_signhunter.attack import SignHunterAttack, SignHunterParams

__all__ = ["SignHunterAttack", "SignHunterParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(SignHunterAttack)
