"""segtk plugin: the Gen4Seg diffusion editing backend and the `recon` editor.

Importing this package never imports diffusers or transformers: the heavy stack loads on the
first `get_backend(...)`, so `segtk plugins` can list `recon` as "missing dependency" instead of
"broken" where diffusers is not installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from segtk.core.editing import EditedSample, Editor, Sample
from segtk.core.errors import PluginError
from segtk.core.hookspecs import hookimpl

REQUIRES = ("diffusers", "transformers")
INSTALL = (
    "pip install 'diffusers==0.39.0' 'transformers==4.57.6' && "
    "pip install -e plugins/editors/diffusion"
)

__all__ = ["INSTALL", "REQUIRES", "ReconEditor", "get_backend"]


def get_backend(options: dict[str, Any] | None = None):
    """A `Gen4SegBackend` for these options (sd, controlnet, inpaint, steps, guidance, eta, ...).

    Weights load lazily, from local folders or the Hugging Face cache only; a method whose
    weights were not given raises a `ModelError` naming the missing option (`--sd PATH`, ...).
    """
    from segtk.core.registry import missing_modules

    missing = missing_modules(REQUIRES)
    if missing:
        raise PluginError(
            f"the diffusion editing backend needs {', '.join(missing)}, which is not installed",
            hint=INSTALL,
        )
    from segtk_diffusion.backend import Gen4SegBackend

    return Gen4SegBackend.from_options(options or {})


class ReconEditor(Editor):
    """The paper's "Recon" reference: DDIM inversion and reconstruction, no edit.

    `ReconEditor(options={"sd": PATH, ...})` or `ReconEditor(backend=get_backend(...))`; the
    backend is created on the first `edit` and kept.
    """

    name = "recon"
    attribute = "recon"
    kind = "appearance"
    values = ("recon",)
    requires = REQUIRES
    install = INSTALL
    description = "DDIM inversion + reconstruction through the Gen4Seg pipeline (the mR reference)"

    def __init__(self, backend: Any = None, options: dict[str, Any] | None = None) -> None:
        self.backend = backend
        self.options = dict(options or {})

    def edit(self, sample: Sample, value: str = "recon",
             rng: np.random.Generator | None = None) -> EditedSample:
        if self.backend is None:
            self.backend = get_backend(self.options)
        return self.backend.recon(sample, rng if rng is not None else np.random.default_rng(0))


@hookimpl
def register_editors(register) -> None:
    register(ReconEditor)
