"""The attack contract suite: exact budgets, the ε-ball and [0,1], determinism, batch
invariance, anytime prefixes and progress against a small deterministic segmenter.

    from segtk.testing import AttackSuite

    class TestMyAttack(AttackSuite):
        attack_cls = MyAttack          # an Attack subclass
        params = {"some_knob": 3}      # optional overrides

The ε-ball and [0,1] are checked on every candidate that reaches the model, here, not only by
the oracle: a wrong oracle must not hide an attack that leaves the ball. White-box attacks
(`white_box = True`) run through the same checks: their forward and backward passes are
queries, and the small segmenter gives gradients.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from segtk.core import EPS_TOLERANCE, Attack, Proxy, QueryCounter
from segtk.core import _attack as attack_module
from segtk.testing.fakes import TinySegmenter, toy_batch


@contextmanager
def every_query_checked(clean: torch.Tensor, eps: float) -> Iterator[list[str]]:
    """Check each candidate that reaches the model against its own source image's ε-ball
    (`eps` on the 0–255 scale) and [0,1], at the query counter (the one place that knows each
    row's source image), independently of the oracle. Yields the violations found; the queries
    go on, so the attack's own error handling cannot hide them."""
    violations: list[str] = []
    checked = [0]
    limit = eps / 255 + EPS_TOLERANCE

    def check(images: torch.Tensor, owners: torch.Tensor | None) -> None:
        rows = torch.arange(images.shape[0]) if owners is None else \
            torch.as_tensor(owners, dtype=torch.long).reshape(-1)
        x = images.detach().cpu()
        gap = (x - clean[rows]).abs().flatten(1).amax(1) if x.numel() else torch.zeros(0)
        in_box = ((x >= 0) & (x <= 1)).flatten(1).all(1)
        for row, owner in enumerate(rows.tolist()):
            if not (bool(gap[row] <= limit) and bool(in_box[row])):  # NaN fails too
                violations.append(f"a candidate of image {owner} reached the model with "
                                  f"L∞ = {float(gap[row]) * 255:.3f}/255 (ε = {eps:g}), values "
                                  f"in [{float(x[row].min()):.4f}, {float(x[row].max()):.4f}]")
        checked[0] += len(rows)

    class Checked(QueryCounter):
        def predict(self, images: torch.Tensor, owners: torch.Tensor | None = None) -> torch.Tensor:
            check(images, owners)
            return super().predict(images, owners)

        def gradient_logits(self, images: torch.Tensor,
                            owners: torch.Tensor | None = None) -> torch.Tensor:
            check(images, owners)  # a white-box attack's forward and backward passes
            return super().gradient_logits(images, owners)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(attack_module, "QueryCounter", Checked)
        yield violations
    assert checked[0], "no query went through the check: Attack.run no longer uses QueryCounter"


class AttackSuite:
    """Subclass as `TestSomething` with `attack_cls` set; pytest collects the checks."""

    attack_cls: ClassVar[type[Attack]]
    params: ClassVar[dict[str, Any]] = {}
    expect_progress: ClassVar[bool] = True
    # An attack that may stop before its budget on purpose (e.g. once the proxy is 0) sets this
    # False; every other attack must spend exactly its budget on the toy images.
    uses_whole_budget: ClassVar[bool] = True

    def make(self, **overrides: Any) -> Attack:
        return self.attack_cls(**{**self.params, **overrides})

    def test_budget_is_exact(self) -> None:
        images, labels = toy_batch(2, 15, 21)
        for budget in (1, 2, 3, 7, 20):
            result = self.make(budget=budget).run(TinySegmenter(), images, labels)
            assert (result.queries <= budget).all(), f"budget {budget}: {result.queries}"
            if self.uses_whole_budget:
                assert (result.queries == budget).all(), \
                    f"budget {budget}: used {result.queries.tolist()} (set uses_whole_budget = " \
                    "False if the attack stops early on purpose)"
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
        with every_query_checked(images, eps) as violations:
            result = self.make(budget=budget, eps=eps).run(TinySegmenter(), images, labels)
        assert not violations, violations[0]
        assert (result.queries <= budget).all()
        gap = (result.images - images).abs().amax()
        assert float(gap) <= eps / 255 + EPS_TOLERANCE
        assert result.images.min() >= 0 and result.images.max() <= 1

    def test_same_seed_same_result(self) -> None:
        images, labels = toy_batch(2)
        a = self.make(budget=15, seed=3).run(TinySegmenter(), images, labels)
        b = self.make(budget=15, seed=3).run(TinySegmenter(), images, labels)
        assert torch.equal(a.images, b.images), "same seed, different images"
        assert a.history == b.history, "same seed, different proxy histories"

    def test_batched_equals_one_at_a_time(self) -> None:
        images, labels = toy_batch(3, 16, 16, seed=5)
        seeds = [11, 22, 33]
        attack = self.make(budget=12)
        batched = attack.run(TinySegmenter(), images, labels, seeds=seeds)
        for i in range(3):
            single = attack.run(TinySegmenter(), images[i : i + 1], labels[i : i + 1], seeds=[seeds[i]])
            assert torch.equal(batched.images[i], single.images[0]), f"image {i} differs"
            assert batched.history[i] == single.history[0], \
                f"image {i}: its history in a batch differs from its own run's"

    def test_anytime_runs_are_prefixes_of_longer_runs(self) -> None:
        if not self.attack_cls.anytime:
            pytest.skip(f"{self.attack_cls.name} has a budget-dependent schedule (anytime = False)")
        images, labels = toy_batch(2, 12, 12, seed=4)
        long = self.make(budget=30).run(TinySegmenter(), images, labels)
        short = self.make(budget=14).run(TinySegmenter(), images, labels)
        assert [h[:14] for h in long.history] == short.history, \
            "the first 14 queries of a 30-query run differ from a 14-query run " \
            "(an attack whose schedule depends on the budget sets anytime = False)"

    def test_either_result_keeps_the_budget_and_the_ball(self) -> None:
        """An attack that declares its iterate may return it or its best candidate: both are
        images in the ε-ball and [0,1], and scoring the iterate costs no query."""
        if not self.attack_cls.declares_iterate:
            pytest.skip(f"{self.attack_cls.name} declares no iterate: it returns its best candidate")
        images, labels = toy_batch(2, 13, 17, seed=8)
        images[0, :, :4] = 0.0
        images[1, :, :4] = 1.0
        for returns in ("best", "iterate"):
            with every_query_checked(images, 4.0) as violations:
                result = self.make(budget=23, eps=4.0, returns=returns).run(
                    TinySegmenter(), images, labels, checkpoints=(9, 23))
            assert not violations, violations[0]
            if self.uses_whole_budget:
                assert (result.queries == 23).all(), f"returns={returns}: {result.queries.tolist()}"
            assert [len(h) for h in result.history] == result.queries.tolist()
            for shown in (result.images, *result.checkpoint_images.values()):
                assert float((shown - images).abs().amax()) <= 4 / 255 + EPS_TOLERANCE
                assert shown.min() >= 0 and shown.max() <= 1

    def test_lowers_the_proxy(self) -> None:
        if not self.expect_progress:
            return
        images, labels = toy_batch(2, 24, 24, seed=7)
        result = self.make(budget=40, eps=16).run(TinySegmenter(), images, labels)
        clean = Proxy(4)(TinySegmenter().predict(images), labels)
        assert (result.scores <= clean).all()
        assert (result.scores < clean).any(), "the attack never lowered the proxy"
