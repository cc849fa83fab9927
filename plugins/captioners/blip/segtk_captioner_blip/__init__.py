"""segtk plugin: the `blip` captioner (`segtk edit --captioner blip`)."""

from segtk.core import Register, hookimpl
from segtk_captioner_blip.captioner import BlipCaptioner, BlipParams, object_box

__all__ = ["BlipCaptioner", "BlipParams", "object_box"]


@hookimpl
def register_captioners(register: Register) -> None:
    register(BlipCaptioner)
