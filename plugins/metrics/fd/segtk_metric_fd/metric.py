"""Fréchet distance between the original and the edited images of a set, over the pooled
features of a transformers vision backbone (Gen4Seg Tables I and IX report FID, the same
distance over Inception-v3 features; Inception weights are not available offline here, so this
is named for the backbone it uses: "FD[dinov2]", never "FID").

    FD = |mu_a - mu_b|^2 + Tr(C_a + C_b - 2 (C_a C_b)^(1/2))

with the means and covariances of the two feature sets. pytorch-fid takes the trace of the
square root with scipy's sqrtm of the (non-symmetric) product; here it is taken exactly from
the eigenvalues of the symmetric C_a^(1/2) C_b C_a^(1/2), which has the same trace of roots.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import torch

from segtk.core import Metric, PluginError, QualityPair, load_pretrained


@dataclass
class FrechetDistanceParams:
    model: str = field(default="", metadata={
        "doc": "a transformers vision backbone and its image processor: a save_pretrained "
               "folder or a repo id in the Hugging Face cache (required)"})
    device: str = field(default="cpu", metadata={"doc": "where the model runs"})
    batch: int = field(default=16, metadata={"doc": "images per forward pass"})


def psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """The symmetric square root of a symmetric positive semi-definite matrix (eigenvalues
    below 0, numerical noise, taken as 0)."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    return (vectors * np.sqrt(np.clip(values, 0, None))) @ vectors.T


def trace_sqrt_product(cov_a: np.ndarray, cov_b: np.ndarray) -> float:
    """Tr (C_a C_b)^(1/2), exactly: C_a C_b is similar to C_a^(1/2) C_b C_a^(1/2), which is
    symmetric PSD, so the trace is the sum of the square roots of its eigenvalues."""
    root_a = psd_sqrt(cov_a)
    values = np.linalg.eigvalsh(root_a @ cov_b @ root_a)
    return float(np.sqrt(np.clip(values, 0, None)).sum())


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """The Fréchet distance of two feature sets [N, D], [M, D] (N, M ≥ 2) as Gaussians."""
    if len(a) < 2 or len(b) < 2:
        raise PluginError(f"metric fd: a Fréchet distance needs at least 2 images a set, got "
                          f"{len(a)} and {len(b)}", hint="measure more edits")
    mu_a, mu_b = a.mean(0), b.mean(0)
    cov_a, cov_b = np.atleast_2d(np.cov(a, rowvar=False)), np.atleast_2d(np.cov(b, rowvar=False))
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(cov_a) + np.trace(cov_b)
                 - 2 * trace_sqrt_product(cov_a, cov_b))


class FrechetDistance(Metric):
    """Fréchet distance between originals and edits over a backbone's pooled features."""

    name: ClassVar[str] = "fd"
    better: ClassVar[Literal["lower", "higher"]] = "lower"
    per_image: ClassVar[bool] = False
    requires: ClassVar[tuple[str, ...]] = ("transformers",)
    install: ClassVar[str] = "pip install -e plugins/metrics/fd"
    description: ClassVar[str] = ("Fréchet distance over a transformers backbone's pooled "
                                  "features (FID's formula; not Inception)")
    Params: ClassVar[type] = FrechetDistanceParams
    params: FrechetDistanceParams

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        super().__init__(options)
        from transformers import AutoImageProcessor, AutoModel

        model, self.processor = load_pretrained(
            (AutoModel, AutoImageProcessor), self.params.model, who="metric fd",
            what="a vision backbone and its image processor", option="fd.model")
        self.model = model.eval().to(self.params.device)

    def column(self) -> str:
        """'FD[dinov2]': the distance named for the backbone whose features it compares."""
        return f"FD[{getattr(self.model.config, 'model_type', 'model')}]"

    def features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """[N, D]: the pooled output (or the mean token) of each image, in batches."""
        out = []
        step = max(1, self.params.batch)
        for start in range(0, len(images), step):
            inputs = self.processor(images=list(images[start:start + step]), return_tensors="pt")
            with torch.no_grad():
                result = self.model(pixel_values=inputs["pixel_values"].to(self.params.device))
            pooled = getattr(result, "pooler_output", None)
            if pooled is None:
                pooled = result.last_hidden_state.mean(1)
            out.append(pooled.reshape(len(pooled), -1).double().cpu().numpy())
        return np.concatenate(out)

    def reduce(self, pairs: Sequence[QualityPair], scores: Sequence[float] | None) -> float:
        return frechet_distance(self.features([p.original for p in pairs]),
                                self.features([p.edited for p in pairs]))
