"""The shared attack test suite, for built-in and third-party attacks alike.

    from segtk.testing import AttackSuite

    class TestMyAttack(AttackSuite):
        attack_cls = MyAttack          # an Attack subclass
        params = {"some_knob": 3}      # optional overrides

pytest then checks exact budgets, the ε-ball and [0,1], determinism, batch invariance and
that the attack lowers the proxy of a small deterministic segmenter.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segtk.core.attack import EPS_TOLERANCE, Attack
from segtk.core.proxy import Proxy
from segtk.core.registry import missing_modules
from segtk.core.segmenter import Segmenter

SHARED = Path(os.environ.get("SEGTK_SHARED", Path(__file__).resolve().parent.parent / "shared"))


def shared(relative: str) -> Path:
    """A path under ../shared; skips the test where it is absent, fails if CI requires it."""
    path = SHARED / relative
    if path.exists():
        return path
    reason = f"{path} is absent (real models/data live in ../shared next to the repo)"
    if os.environ.get("SEGTK_REQUIRE_SHARED") == "1":
        pytest.fail(f"SEGTK_REQUIRE_SHARED=1 but {reason}")
    pytest.skip(reason)


def requires_stack(modules: tuple[str, ...], flag: str) -> pytest.MarkDecorator:
    """Skip where an optional stack (mmcv, detectron2, ...) is not importable, naming what is
    missing; where the environment variable `flag` is "1" (CI, after its install script ran),
    run anyway so the missing import fails the test instead of hiding behind a skip."""
    missing = missing_modules(modules)
    required = os.environ.get(flag) == "1"
    return pytest.mark.skipif(
        bool(missing) and not required,
        reason=f"needs {', '.join(missing)} (set {flag}=1 to make this a failure)",
    )


class TinySegmenter(Segmenter):
    """A fixed random 3x3-conv classifier: cheap, deterministic and batch-invariant."""

    name = "tiny"

    def __init__(self, num_classes: int = 4, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.classes = [f"class{i}" for i in range(num_classes)]
        self.weight = torch.randn(num_classes, 3, 3, 3, generator=g)
        self.bias = torch.randn(num_classes, generator=g) * 0.1
        self.calls = 0

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        centred = images - 0.5
        # One image at a time: identical results whatever the batch composition.
        return torch.cat(
            [torch.nn.functional.conv2d(x[None], self.weight, self.bias, padding=1) for x in centred]
        )

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.logits(images).argmax(1)


class RecordingSegmenter(TinySegmenter):
    """A TinySegmenter that keeps what it was asked: each call's batch, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[torch.Tensor] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.batches.append(images.clone())
        return super().predict(images)

    @property
    def seen(self) -> list[torch.Tensor]:
        """Every queried image [3,H,W], in query order."""
        return [x for batch in self.batches for x in batch]

    @property
    def sizes(self) -> list[int]:
        return [len(batch) for batch in self.batches]


def toy_batch(n: int = 2, height: int = 17, width: int = 23, seed: int = 0):
    """Smooth random images and labels equal to the tiny model's clean prediction."""
    g = torch.Generator().manual_seed(seed)
    low = torch.rand(n, 3, max(height // 4, 1), max(width // 4, 1), generator=g)
    images = torch.nn.functional.interpolate(low, size=(height, width), mode="bilinear")
    images = images.clamp(0, 1)
    labels = TinySegmenter().predict(images)
    return images, labels


class AttackSuite:
    """Subclass as `TestSomething` with `attack_cls` set; pytest collects the checks."""

    attack_cls: ClassVar[type[Attack]]
    params: ClassVar[dict[str, Any]] = {}
    expect_progress: ClassVar[bool] = True

    def make(self, **overrides: Any) -> Attack:
        return self.attack_cls(**{**self.params, **overrides})

    def test_budget_is_exact(self) -> None:
        images, labels = toy_batch(2, 15, 21)
        for budget in (1, 2, 3, 7, 20):
            result = self.make(budget=budget).run(TinySegmenter(), images, labels)
            assert (result.queries <= budget).all(), f"budget {budget}: {result.queries}"
            assert [len(h) for h in result.history] == result.queries.tolist()

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        budget=st.integers(1, 25),
        height=st.integers(1, 19),
        width=st.integers(1, 19),
        eps=st.sampled_from([1.0, 4.0, 8.0, 16.0, 2.5]),
    )
    def test_budget_and_eps_any_size(self, budget: int, height: int, width: int, eps: float) -> None:
        images, labels = toy_batch(2, height, width, seed=budget)
        images[0, :, : height // 2] = 0.0  # saturated regions exercise the [0,1] box
        images[1, :, : height // 2] = 1.0
        result = self.make(budget=budget, eps=eps).run(TinySegmenter(), images, labels)
        assert (result.queries <= budget).all()
        gap = (result.images - images).abs().amax()
        assert float(gap) <= eps / 255 + EPS_TOLERANCE
        assert result.images.min() >= 0 and result.images.max() <= 1

    def test_same_seed_same_result(self) -> None:
        images, labels = toy_batch(2)
        a = self.make(budget=15, seed=3).run(TinySegmenter(), images, labels)
        b = self.make(budget=15, seed=3).run(TinySegmenter(), images, labels)
        assert torch.equal(a.images, b.images)
        assert a.history == b.history

    def test_batched_equals_one_at_a_time(self) -> None:
        images, labels = toy_batch(3, 16, 16, seed=5)
        seeds = [11, 22, 33]
        attack = self.make(budget=12)
        batched = attack.run(TinySegmenter(), images, labels, seeds=seeds)
        for i in range(3):
            single = attack.run(TinySegmenter(), images[i : i + 1], labels[i : i + 1], seeds=[seeds[i]])
            assert torch.equal(batched.images[i], single.images[0]), f"image {i} differs"
            assert batched.history[i] == single.history[0]

    def test_anytime_runs_are_prefixes_of_longer_runs(self) -> None:
        if not self.attack_cls.anytime:
            pytest.skip(f"{self.attack_cls.name} has a budget-dependent schedule (anytime = False)")
        images, labels = toy_batch(2, 12, 12, seed=4)
        long = self.make(budget=30).run(TinySegmenter(), images, labels)
        short = self.make(budget=14).run(TinySegmenter(), images, labels)
        assert [h[:14] for h in long.history] == short.history

    def test_lowers_the_proxy(self) -> None:
        if not self.expect_progress:
            return
        images, labels = toy_batch(2, 24, 24, seed=7)
        result = self.make(budget=40, eps=16).run(TinySegmenter(), images, labels)
        clean = Proxy(4)(TinySegmenter().predict(images), labels)
        assert (result.scores <= clean).all()
        assert (result.scores < clean).any(), "the attack never lowered the proxy"
