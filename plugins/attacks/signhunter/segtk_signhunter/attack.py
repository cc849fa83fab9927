"""SignHunter (Al-Dujaili & O'Reilly 2020): search the signs of a ±ε perturbation hierarchically.

The perturbation is always ε·s with s ∈ {−1,+1}^n over the flattened image (n = 3·H·W).
The image is flattened channel-height-width, as BlackboxBench's SignHunter (which the DLA
paper ran) flattens PyTorch's NCHW tensors: a chunk covers one colour channel of a band of
rows, so flips change one channel and the noise is coloured (DLA paper, Fig. 5). `order=hwc`
flattens height-width-channel as the SignHunter authors' NHWC code does (grey bands).
It starts from s = +1 and, at level h, flips chunk i of length ⌈n/2^h⌉, keeping the flip when
the proxy does not rise (the paper keeps a flip when the directional-derivative estimate does
not fall) and undoing it otherwise. After the last chunk of a level, h grows; after level
⌈log₂ n⌉ the sweep restarts at h = 0 from the current signs.

Queries: the clean image (the paper's code spends it on the derivative's base point), then
x + ε·1, then one query per flip. Each decision needs only earlier queries (anytime).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from segtk.core import Attack, AttackParams, Oracle, SegtkError, project

ORDERS = ("chw", "hwc")


@dataclass
class SignHunterParams(AttackParams):
    """The paper's ℓ∞ attack probes at exactly ±ε (its fd_eta is ε), which is what the DLA
    paper §4.1 keeps ("consistent with the original paper").

    order: how the image is flattened into the sign vector: chw (BlackboxBench, coloured
        noise as in the DLA paper's Fig. 5) or hwc (the SignHunter authors' NHWC code).
    """

    order: str = "chw"

    def validate(self) -> None:
        super().validate()
        if self.order not in ORDERS:
            raise SegtkError(f"unknown SignHunter order {self.order!r}",
                             hint="use --param order=chw or --param order=hwc")


@dataclass
class _State:
    signs: torch.Tensor  # s, flattened H·W·3
    queried: int = 0  # queries made by this image
    best: float = float("inf")  # proxy of ε·s
    h: int = 0  # level: chunks of ⌈n/2^h⌉
    i: int = 0  # chunk index within the level
    chunk: slice = field(default_factory=lambda: slice(0, 0))  # flipped by the pending query


class SignHunterAttack(Attack[SignHunterParams]):
    """SignHunter (Al-Dujaili & O'Reilly 2020): hierarchical sign flips of a ±ε perturbation."""

    name = "signhunter"
    Params = SignHunterParams
    anytime = True

    def attack(self, oracle: Oracle) -> None:
        _, c, height, width = oracle.clean.shape
        n = c * height * width
        states = [
            _State(torch.ones(n, device=oracle.clean.device)) for _ in range(oracle.batch_size)
        ]
        while active := oracle.active().tolist():
            steps = []
            for i in active:
                st = states[i]
                if st.queried == 0:
                    steps.append(oracle.clean[i])
                    continue
                if st.queried > 1:
                    st.chunk = self._next_chunk(st, n)
                    st.signs[st.chunk] *= -1
                delta = oracle.eps_unit * self._image_signs(st.signs, c, height, width)
                steps.append(oracle.clean[i] + delta)
            owners = torch.tensor(active)
            candidates = project(torch.stack(steps), oracle.clean[owners], oracle.eps_unit)
            scores = oracle.query(candidates, owners).scores.tolist()
            for i, score in zip(active, scores):
                st = states[i]
                st.queried += 1
                if st.queried == 1:
                    continue  # the clean image: no signs involved
                if score <= st.best:
                    st.best = score
                else:
                    st.signs[st.chunk] *= -1  # undo the flip

    def _image_signs(self, signs: torch.Tensor, c: int, height: int, width: int) -> torch.Tensor:
        """The flat sign vector as a [3,H,W] image, in the chosen flattening order."""
        if self.params.order == "hwc":
            return signs.view(height, width, c).permute(2, 0, 1)
        return signs.view(c, height, width)

    @staticmethod
    def _next_chunk(st: _State, n: int) -> slice:
        """The chunk to flip now; advances (i, h) as the paper's Algorithm 1 does."""
        length = -(-n // 2**st.h)
        chunk = slice(st.i * length, min(n, (st.i + 1) * length))
        st.i += 1
        if st.i == 2**st.h or chunk.stop == n:
            st.h, st.i = st.h + 1, 0
            if st.h == (n - 1).bit_length() + 1:  # past level ⌈log₂ n⌉: start a new sweep
                st.h = 0
        return chunk
