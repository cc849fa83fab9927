"""An attack that returns its iterate (`returns="iterate"`), to the number, on a segmenter
whose answers the test knows: the recorded history, the result, the checkpoints, the budget,
the uncounted evaluation passes and the refusals.

`Threshold` calls a pixel bright (class 1) where its red value is above 0.5. Image 0 is
labelled bright everywhere and image 1 dark everywhere, both clean images are 0.6 grey, and
`dark(i, k)` darkens the first k of the 10 pixels: its pixel accuracy is 1 - k/10 on image 0
and k/10 on image 1. So every score below is known without asking the oracle, and an image
mixed up with the other shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

import pytest
import torch

from segtk.core import Proxy, QueryCounter, Segmenter, SegtkError, confusion
from segtk.core._attack import Attack, AttackParams
from segtk.core._oracle import Oracle
from segtk.core._oracle_run import OracleRun

H, W = 2, 5
CLEAN = torch.full((2, 3, H, W), 0.6)
LABELS = torch.stack([torch.ones(H, W, dtype=torch.long), torch.zeros(H, W, dtype=torch.long)])


class Threshold(Segmenter):
    """Bright (1) where the red value is above 0.5, else dark (0); counts its calls."""

    name = "threshold"
    classes = ["dark", "bright"]

    def __init__(self) -> None:
        self.calls = 0

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return (images[:, 0] > 0.5).long()


def dark(owner: int, k: int) -> torch.Tensor:
    x = CLEAN[owner].clone()
    x[0].view(-1)[:k] = 0.4
    return x


def score(owner: int, k: int) -> float:
    """Pixel accuracy of dark(owner, k), as a float32 proxy gives it."""
    return float(torch.tensor(1 - k / 10 if owner == 0 else k / 10, dtype=torch.float32))


def conf_of(images: torch.Tensor, owners: list[int]) -> torch.Tensor:
    return confusion((images[:, 0] > 0.5).long(), LABELS[owners], 2)


class Scripted(Attack):
    """Runs the script it is given: an optimisation that declares its iterates."""

    name = "scripted"
    returns: ClassVar[Literal["best", "iterate"]] = "iterate"
    declares_iterate = True
    script: Callable[[Oracle], None]

    def attack(self, oracle: Oracle) -> None:
        self.script(oracle)


def run(script: Callable[[Oracle], None], checkpoints: tuple[int, ...] = (), eps: float = 255,
        **params: object):
    attack = Scripted(budget=3, eps=eps, proxy="pacc", **params)
    attack.script = script
    model = Threshold()
    return attack.run(model, CLEAN.clone(), LABELS.clone(), checkpoints=checkpoints), model


def two_steps(o: Oracle) -> None:
    """Both images queried, then each declares an iterate (in one call, owners swapped); image
    0 queries and steps again, image 1 queries twice more without a new step."""
    o.query(torch.stack([dark(0, 1), dark(1, 1)]))
    o.set_iterate(torch.stack([dark(1, 3), dark(0, 2)]), torch.tensor([1, 0]))
    o.query(dark(0, 5)[None], torch.tensor([0]))
    o.set_iterate(dark(0, 4)[None], torch.tensor([0]))
    o.query(torch.stack([dark(1, 6), dark(1, 7)]), torch.tensor([1, 1]))


def test_the_iterate_is_the_result_the_history_and_each_checkpoint() -> None:
    result, model = run(two_steps, checkpoints=(1, 2, 3))
    # after each query, the score of the iterate declared after it (or of the one before)
    assert result.history == [pytest.approx([score(0, 2), score(0, 4)]),
                              pytest.approx([score(1, 3)] * 3)]
    final = torch.stack([dark(0, 4), dark(1, 3)])
    assert torch.equal(result.images, final)
    assert result.scores.tolist() == pytest.approx([score(0, 4), score(1, 3)])
    assert torch.equal(result.predictions, (final[:, 0] > 0.5).long())
    assert result.queries.tolist() == [2, 3]  # the evaluation passes are not charged
    at = {1: [dark(0, 2), dark(1, 3)], 2: [dark(0, 4), dark(1, 3)], 3: [dark(0, 4), dark(1, 3)]}
    for budget, images in at.items():
        assert torch.equal(result.checkpoint_images[budget], torch.stack(images)), budget
        assert torch.equal(result.checkpoints[budget], conf_of(torch.stack(images), [0, 1])), budget
    # 3 model calls for the queries, the clean images' evaluation (one pass each, at their
    # first query), and one pass per set_iterate: nothing is evaluated twice
    assert model.calls == 3 + 2 + 2


def test_the_best_candidate_is_the_result_when_a_run_asks_for_it() -> None:
    """returns=best on an attack that declares iterates: set_iterate is ignored (no evaluation
    pass) and the result is the lowest-proxy candidate queried."""
    result, model = run(two_steps, checkpoints=(1, 2, 3), returns="best")
    assert result.history == [pytest.approx([score(0, 1), score(0, 5)]),
                              pytest.approx([score(1, 1)] * 3)]
    assert torch.equal(result.images, torch.stack([dark(0, 5), dark(1, 1)]))
    assert torch.equal(result.checkpoint_images[1], torch.stack([dark(0, 1), dark(1, 1)]))
    assert model.calls == 3


def test_before_its_first_step_an_image_is_its_clean_image_scored_once() -> None:
    """Image 1 queries a candidate but declares no iterate: its result is its clean image, whose
    score (against image 1's labels) costs one uncounted pass; image 0, never queried, keeps
    its clean image with no score and the confusion of no prediction."""
    def probe(o: Oracle) -> None:
        o.query(torch.stack([dark(1, 4), dark(1, 2)]), torch.tensor([1, 1]))
        o.query(dark(1, 9)[None], torch.tensor([1]))

    result, model = run(probe, checkpoints=(2,))
    assert result.history == [[], pytest.approx([score(1, 0)] * 3)]
    assert torch.equal(result.images, CLEAN)
    assert result.scores[0] == float("inf") and result.scores[1] == pytest.approx(score(1, 0))
    assert torch.equal(result.predictions[1], (CLEAN[1, 0] > 0.5).long())
    assert torch.equal(result.predictions[0], torch.zeros(H, W, dtype=torch.long))
    assert torch.equal(result.checkpoints[2][1], conf_of(CLEAN[1:], [1])[0])
    assert torch.equal(result.checkpoints[2][0],
                       confusion(torch.zeros(1, H, W, dtype=torch.long), LABELS[:1], 2)[0])
    assert result.queries.tolist() == [0, 3] and model.calls == 2 + 1


def test_a_queried_clean_image_or_declared_iterate_is_not_evaluated_again() -> None:
    """The clean image queried first, or an iterate declared before the first query, is scored
    by that query or that declaration: no second pass."""
    def first_clean(o: Oracle) -> None:
        o.query(CLEAN[:1], torch.tensor([0]))
        o.query(dark(0, 3)[None], torch.tensor([0]))

    result, model = run(first_clean)
    assert result.history[0] == pytest.approx([score(0, 0)] * 2) and model.calls == 2
    assert torch.equal(result.images[0], CLEAN[0])

    def declared_first(o: Oracle) -> None:
        o.set_iterate(dark(1, 6)[None], torch.tensor([1]))
        o.query(dark(1, 2)[None], torch.tensor([1]))
        o.query(dark(1, 6)[None], torch.tensor([1]))

    result, model = run(declared_first)
    assert result.history[1] == pytest.approx([score(1, 6)] * 2) and model.calls == 3
    assert torch.equal(result.images[1], dark(1, 6))


def test_declaring_no_iterate_changes_nothing_and_costs_nothing() -> None:
    def nothing(o: Oracle) -> None:
        o.set_iterate(torch.empty(0, 3, H, W), torch.empty(0, dtype=torch.long))
        o.query(dark(0, 2)[None], torch.tensor([0]))
        o.set_iterate(torch.empty(0, 3, H, W))

    result, model = run(nothing)
    assert result.history == [pytest.approx([score(0, 0)]), []] and model.calls == 2


def test_set_iterate_without_owners_declares_one_per_image_in_order() -> None:
    def both(o: Oracle) -> None:
        o.query(CLEAN)
        o.set_iterate(torch.stack([dark(0, 7), dark(1, 8)]))

    result, _ = run(both)
    assert torch.equal(result.images, torch.stack([dark(0, 7), dark(1, 8)]))
    assert result.history == [pytest.approx([score(0, 7)]), pytest.approx([score(1, 8)])]


def test_an_iterate_is_checked_like_a_query_whatever_the_run_returns() -> None:
    """Outside the ε-ball, set_iterate is refused with returns=best too (an attack's bug shows
    whichever result the run asked for), and the model sees nothing."""
    for returns in ("best", "iterate"):
        with pytest.raises(SegtkError, match="outside the ε-ball or \\[0,1\\]"):
            run(lambda o: o.set_iterate(CLEAN + 9 / 255), eps=8, returns=returns)


def test_two_iterates_of_one_image_are_refused() -> None:
    with pytest.raises(SegtkError) as err:
        run(lambda o: o.set_iterate(torch.stack([dark(0, 1), dark(0, 2)]), torch.tensor([0, 0])))
    assert err.value.message == ("attack 'scripted' failed: set_iterate was given two iterates "
                                 "of one image")
    assert err.value.hint == "declare one iterate per source image"


def test_what_an_attack_returns_is_its_declaration_unless_the_run_says_otherwise() -> None:
    assert Scripted().params.returns == "iterate"
    assert Scripted(returns="best").params.returns == "best"
    assert Scripted(params=AttackParams(returns="best")).params.returns == "best"

    class BestByDefault(Scripted):
        returns = "best"

    assert BestByDefault().params.returns == "best"
    assert BestByDefault(returns="iterate").params.returns == "iterate"

    class NoIterate(Attack):
        name = "plain"

        def attack(self, oracle: Oracle) -> None:
            pass

    assert NoIterate().params.returns == "best"
    with pytest.raises(SegtkError) as err:
        NoIterate(returns="iterate")
    assert err.value.message == ("attack 'plain' cannot return its iterate: it declares none "
                                 "(Oracle.set_iterate), so its result is its best candidate")
    assert err.value.hint == "leave returns out, or set returns=best"
    with pytest.raises(SegtkError) as err:
        Scripted(returns="last")
    assert (err.value.message, err.value.hint) == ("unknown returns='last'", "use best or iterate")


def test_the_oracle_takes_only_best_or_iterate() -> None:
    counter = QueryCounter(Threshold(), 3, 2)
    for returns in ("best", "iterate"):
        assert OracleRun(counter, CLEAN, LABELS, Proxy(2), 1.0, [0, 1], returns=returns).returns == returns
    with pytest.raises(SegtkError) as err:
        OracleRun(counter, CLEAN, LABELS, Proxy(2), 1.0, [0, 1], returns="last")
    assert (err.value.message, err.value.hint) == ("unknown returns='last'", "use best or iterate")


@pytest.mark.parametrize("owners", [[0, 1], torch.tensor([0, 1], dtype=torch.uint8),
                                    torch.tensor([0, 1], dtype=torch.int32)])
def test_an_iterate_past_the_ball_is_refused_with_its_gap_whatever_the_owners_type(owners) -> None:
    """Owners as a list or any integer tensor are indices (a uint8 tensor is no mask): the
    refusal measures each iterate against its own image (0.3 and 0.6 grey)."""
    clean = torch.stack([torch.full((3, H, W), 0.3), torch.full((3, H, W), 0.6)])
    model = Threshold()
    o = OracleRun(QueryCounter(model, 3, 2), clean, LABELS, Proxy(2, kind="pacc"), 8 / 255, [0, 1],
               returns="iterate")
    x = clean.clone()
    x[1, 0, 1, 2] += 9.6 / 255
    with pytest.raises(SegtkError) as err:
        o.set_iterate(x, owners)
    assert err.value.message == ("attack produced a candidate outside the ε-ball or [0,1] "
                                 "(L∞ = 9.600/255, ε = 8.000/255)")
    assert model.calls == 0
