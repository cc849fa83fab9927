"""segtk plugin: the Gen4Seg diffusion edit backend (`--backend diffusion`) and the `recon` editor.

Importing this package never imports diffusers or transformers: the heavy stack loads with the
first weights, so `segtk plugins` lists `diffusion` and `recon` as "missing dependency" instead
of "broken" where diffusers is not installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from segtk.core import EditedSample, Editor, PluginError, Sample, hookimpl, missing_modules
from segtk_diffusion.pipelines import INSTALL, REQUIRES, Gen4SegBackend

__all__ = ["INSTALL", "REQUIRES", "Gen4SegBackend", "ReconEditor", "get_backend"]


def get_backend(options: dict[str, Any] | None = None) -> Gen4SegBackend:
    """A `Gen4SegBackend` for these options (sd, controlnet, inpaint, steps, guidance, eta, ...),
    or a PluginError saying what to install."""
    missing = missing_modules(REQUIRES)
    if missing:
        raise PluginError(
            f"the diffusion editing backend needs {', '.join(missing)}, which is not installed",
            hint=INSTALL,
        )
    return Gen4SegBackend(options or {})


class ReconEditor(Editor):
    """The paper's "Recon" reference: DDIM inversion and reconstruction, no edit.

    `ReconEditor(options={"sd": PATH, ...})` or `ReconEditor(engine=get_backend(...))`; the
    backend is created on the first `edit` and kept.
    """

    name = "recon"
    attribute = "recon"
    kind = "appearance"
    values = ("recon",)
    requires = REQUIRES
    install = INSTALL
    description = "DDIM inversion + reconstruction through the Gen4Seg pipeline (the mR reference)"
    backend = Gen4SegBackend.name

    def __init__(self, options: dict[str, Any] | None = None,
                 engine: Gen4SegBackend | None = None) -> None:
        self.engine = engine
        self.options = dict(options or {})

    def edit(self, sample: Sample, value: str = "recon",
             rng: np.random.Generator | None = None) -> EditedSample:
        if self.engine is None:
            self.engine = get_backend(self.options)
        return self.engine.recon(sample, rng if rng is not None else np.random.default_rng(0))


@hookimpl
def register_editors(register) -> None:
    register(ReconEditor)


@hookimpl
def register_edit_backends(register) -> None:
    register(Gen4SegBackend)
