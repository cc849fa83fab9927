"""segtk plugin: the SimBA black-box attack (Guo et al. 2019), pixel or DCT basis."""

from segtk.core import Register, hookimpl
from segtk_simba.attack import SimBAAttack, SimBAParams

__all__ = ["SimBAAttack", "SimBAParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(SimBAAttack)
