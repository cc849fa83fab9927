"""The oracle's gradient path (Oracle.loss_and_grad) and the white-box refusals, to the word and
the row: which image each candidate is charged to and scored against, what a loss must give,
a model whose logits ignore the image, and the errors an attack's writes bring."""

from __future__ import annotations

import pytest
import torch

from segtk.core import Attack, Oracle, Proxy, QueryCounter, Segmenter, SegtkError
from segtk.core._attack import check_gradients
from segtk.core._errors import AttackError
from segtk.core._oracle_run import OracleRun
from segtk.testing import TinySegmenter, toy_batch

EPS = 8 / 255


def oracle(n: int = 2, white_box: bool = True, model=None) -> OracleRun:
    images, labels = toy_batch(n, 6, 7, seed=3)
    labels[1] = (labels[1] + 1) % 4  # image 1's labels differ from the model's answer
    counter = QueryCounter(model or TinySegmenter(), 10, n)
    return OracleRun(counter, images, labels, Proxy(4), EPS, list(range(n)), white_box=white_box)


def per_pixel_logit(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean logit of each row's target class: one value per candidate."""
    return logits.gather(1, targets[:, None]).mean((1, 2, 3))


def test_a_decision_based_oracle_refuses_gradients_word_for_word() -> None:
    o = oracle(white_box=False)
    plain = OracleRun(o._counter, o.clean, o.labels, Proxy(4), EPS, [0, 1])  # the default
    for decision_based in (o, plain):
        with pytest.raises(SegtkError) as err:
            decision_based.loss_and_grad(o.clean, per_pixel_logit)
        assert err.value.message == "a decision-based attack asked for gradients (Oracle.loss_and_grad)"
        assert err.value.hint == ("set white_box = True on the attack class if it is white-box: it "
                                  "then runs only on models that give gradients")
    assert o._counter.counts.tolist() == [0, 0]


@pytest.mark.parametrize("owners", [torch.tensor([1, 1]), torch.tensor([1, 1], dtype=torch.uint8), [1, 1]])
def test_each_candidate_is_charged_to_and_scored_against_its_own_image(owners) -> None:
    o = oracle()
    x = o.clean[1:].expand(2, -1, -1, -1).clone()
    answer = o.loss_and_grad(x, per_pixel_logit, owners)
    assert o._counter.counts.tolist() == [0, 2]
    logits = TinySegmenter().logits(x)
    labels = logits.argmax(1)
    assert torch.equal(answer.labels, labels)
    assert torch.equal(answer.scores, Proxy(4)(labels, o.labels[1:].expand(2, -1, -1)))
    assert torch.allclose(answer.loss, per_pixel_logit(logits, o.labels[1:].expand(2, -1, -1)))
    expected = torch.autograd.functional.jacobian(
        lambda y: per_pixel_logit(TinySegmenter().logits(y), o.labels[1:].expand(2, -1, -1)).sum(), x)
    assert torch.allclose(answer.grad, expected, atol=1e-6)
    assert float(answer.scores[0]) < 1  # image 1's labels are not the model's answer


@pytest.mark.parametrize(("loss", "got"), [
    (lambda logits, y: logits.sum(), "()"),
    (lambda logits, y: logits.sum((2, 3)), "(2, 4)"),
    (lambda logits, y: 1.0, "<class 'float'>"),
])
def test_a_loss_must_give_one_value_per_candidate(loss, got: str) -> None:
    o = oracle()
    with pytest.raises(SegtkError) as err:
        o.loss_and_grad(o.clean, loss)
    assert err.value.message == f"the loss must give one value per candidate, shape (2,), got {got}"


class Constant(TinySegmenter):
    """Logits that do not depend on the image (a learnt bias only)."""

    def __init__(self) -> None:
        super().__init__()
        self.bias_param = torch.nn.Parameter(torch.arange(4.0))

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        return self.bias_param[None, :, None, None].expand(images.shape[0], -1, *images.shape[2:])


def test_a_model_whose_logits_ignore_the_image_gives_a_zero_gradient() -> None:
    o = oracle(model=Constant())
    answer = o.loss_and_grad(o.clean, per_pixel_logit)
    assert torch.equal(answer.grad, torch.zeros_like(o.clean))
    assert answer.labels.unique().tolist() == [3]


def test_best_labels_are_int64_and_pins_reach_every_image() -> None:
    o = oracle(n=4, white_box=False)
    pinned = o.verified.pin(o.verified.project(3, o.clean[3]))  # a row past the three channels
    o.verified.score([pinned])
    assert o.result().predictions.dtype == torch.long


def test_check_gradients_names_the_attack_the_model_and_the_way_out() -> None:
    class Pgdish(Attack):
        name, white_box = "pgdish", True

        def attack(self, oracle: Oracle) -> None: ...

    class Plain(TinySegmenter):
        name = "plain"
        differentiable_logits = Segmenter.differentiable_logits  # the contract's: none

    with pytest.raises(SegtkError) as err:
        check_gradients(Pgdish, Plain())
    assert err.value.message == ("attack 'pgdish' is white-box: it needs the gradients of the "
                                 "model's logits, and model 'plain' gives none")
    assert err.value.hint == ("use a decision-based attack (`segtk plugins` marks the white-box "
                              "ones), or a model adapter that implements Segmenter.differentiable_logits")


class WritesThenFails(Attack):
    """Writes to both of the oracle's tensors, then fails."""

    name = "writes-then-fails"

    def attack(self, oracle: Oracle) -> None:
        oracle.clean.add_(0.5)
        oracle.labels.zero_()
        raise KeyError("then breaks")


def test_an_attack_that_wrote_and_failed_is_refused_for_the_writes_with_its_error_as_cause() -> None:
    images, labels = toy_batch(1, 5, 6)
    with pytest.raises(AttackError) as err:
        WritesThenFails(budget=2).run(TinySegmenter(), images, labels)
    assert err.value.message == ("attack 'writes-then-fails' wrote to oracle.clean, oracle.labels in "
                                 "place: its queries and results are void")
    assert err.value.hint == ("an attack must only read the oracle's tensors: work on a copy "
                              "(x = oracle.clean.clone())")
    assert isinstance(err.value.__cause__, KeyError)
