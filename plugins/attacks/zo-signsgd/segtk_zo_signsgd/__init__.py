"""segtk plugin: the ZO-SignSGD black-box attack (Liu et al. 2019)."""

from segtk.core import Register, hookimpl
from segtk_zo_signsgd.attack import ZOSignSGDAttack, ZOSignSGDParams

__all__ = ["ZOSignSGDAttack", "ZOSignSGDParams"]


@hookimpl
def register_attacks(register: Register) -> None:
    register(ZOSignSGDAttack)
