"""Attack.run blames the right party, word for word: the attack for its own errors (also after
the model failed once and the attack carried on), the model for its failure however the attack
passed it on, and nobody for a NaN the caller's image held or a dtype numpy lacks."""

from __future__ import annotations

import pytest
import torch

from segtk.core import Attack, Oracle
from segtk.core._errors import AttackError, BudgetExceeded, ModelError
from segtk.testing import TinySegmenter, toy_batch


class FailsOnce(TinySegmenter):
    """Raises on its first call only."""

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        if self.calls == 0:
            self.calls += 1
            raise RuntimeError("transient")
        return super().predict(images)


class CarriesOn(Attack):
    """Swallows the model's first failure, queries again, then fails in its own code, outside
    any except block (so nothing chains its error to the model's)."""

    name = "carries-on"

    def attack(self, oracle: Oracle) -> None:
        try:
            oracle.query(oracle.clean)
        except ModelError:
            pass
        oracle.query(oracle.clean)
        raise ZeroDivisionError("its own bug")


class PassesItOn(Attack):
    """Keeps the model's error and raises its own from it later, outside the except block."""

    name = "passes-it-on"

    def attack(self, oracle: Oracle) -> None:
        kept = None
        try:
            oracle.query(oracle.clean)
        except ModelError as exc:
            kept = exc
        raise ValueError("query failed") from kept


class Idle(Attack):
    name = "idle"

    def attack(self, oracle: Oracle) -> None:
        pass


def test_the_attacks_own_bug_after_a_model_failure_it_survived_is_the_attacks() -> None:
    images, labels = toy_batch(1, 5, 6)
    with pytest.raises(AttackError) as err:
        CarriesOn(budget=3).run(FailsOnce(), images, labels)
    assert err.value.message == "attack 'carries-on' raised ZeroDivisionError: its own bug"
    assert err.value.what == "raised ZeroDivisionError: its own bug" and err.value.hint is None


def test_a_model_failure_passed_on_later_is_still_the_models() -> None:
    images, labels = toy_batch(1, 5, 6)
    with pytest.raises(ModelError, match="^the model raised RuntimeError: transient$"):
        PassesItOn(budget=3).run(FailsOnce(), images, labels)


def test_an_oracle_rule_broken_by_the_attack_keeps_its_hint() -> None:
    class Greedy(Attack):
        name = "greedy"

        def attack(self, oracle: Oracle) -> None:
            for _ in range(3):
                oracle.query(oracle.clean)

    images, labels = toy_batch(1, 5, 6)
    with pytest.raises(AttackError) as err:
        Greedy(budget=2).run(TinySegmenter(), images, labels)
    assert isinstance(err.value.__cause__, BudgetExceeded)
    assert err.value.message == "attack 'greedy' failed: image 0 would use 3 queries, budget is 2"
    assert err.value.what == "failed: image 0 would use 3 queries, budget is 2"
    assert err.value.hint == "the attack must stop querying an image once its budget is spent"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_nan_in_the_callers_image_is_not_the_attacks_doing(dtype) -> None:
    images, labels = toy_batch(1, 5, 6)
    images = images.to(dtype)
    images[0, 1, 2, 3] = float("nan")
    result = Idle(budget=2).run(TinySegmenter(), images, labels)  # no AttackError
    assert result.queries.tolist() == [0] and torch.isnan(images[0, 1, 2, 3])


def test_an_attack_writing_nan_into_the_clean_image_is_refused() -> None:
    class NanWriter(Attack):
        name = "nan-writer"

        def attack(self, oracle: Oracle) -> None:
            oracle.clean[0, 0, 0, 0] = float("nan")  # and asks nothing

    images, labels = toy_batch(1, 5, 6)
    given = images.clone()
    with pytest.raises(AttackError, match="^attack 'nan-writer' wrote to oracle.clean in place"):
        NanWriter(budget=2).run(TinySegmenter(), images, labels)
    assert torch.equal(images, given)  # put back
