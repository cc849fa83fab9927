"""QueryCounter: counts images (not calls), refuses past budget, safe under threads."""

from __future__ import annotations

import threading

import pytest
import torch

from segtk.core import QueryCounter, Segmenter, check_prediction, labels_from_logits
from segtk.core._errors import BudgetExceeded, ModelError
from segtk.testing import TinySegmenter


def test_counts_images_not_calls() -> None:
    model = TinySegmenter()
    counter = QueryCounter(model, budget=10, n_images=3)
    counter.predict(torch.rand(3, 3, 4, 4))
    counter.predict(torch.rand(4, 3, 4, 4), owners=torch.tensor([0, 0, 1, 2]))
    assert counter.counts.tolist() == [3, 2, 2]
    assert model.calls == 2
    assert counter.remaining().tolist() == [7, 8, 8]


def test_refuses_past_budget_before_calling_the_model() -> None:
    model = TinySegmenter()
    counter = QueryCounter(model, budget=2, n_images=2)
    counter.predict(torch.rand(2, 3, 4, 4))
    counter.predict(torch.rand(1, 3, 4, 4), owners=torch.tensor([1]))
    with pytest.raises(BudgetExceeded, match="image 1 would use 3 queries, budget is 2"):
        counter.predict(torch.rand(2, 3, 4, 4))
    assert model.calls == 2  # refused before the model saw anything
    assert counter.counts.tolist() == [1, 2]
    counter.predict(torch.rand(1, 3, 4, 4), owners=torch.tensor([0]))  # image 0 still has one


def test_budget_one_allows_exactly_one_query() -> None:
    counter = QueryCounter(TinySegmenter(), budget=1, n_images=1)
    counter.predict(torch.rand(1, 3, 2, 2))
    with pytest.raises(BudgetExceeded):
        counter.predict(torch.rand(1, 3, 2, 2))


def test_threads_never_overspend() -> None:
    counter = QueryCounter(TinySegmenter(), budget=50, n_images=2)
    refused = []

    def worker() -> None:
        for _ in range(20):
            try:
                counter.predict(torch.rand(2, 3, 2, 2))
            except BudgetExceeded:
                refused.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.counts.tolist() == [50, 50]
    assert len(refused) == 4 * 20 - 50


class WrongShape(Segmenter):
    name = "wrong"
    classes = ["a", "b"]

    def predict(self, images):
        return torch.zeros(images.shape[0], 3, 3, dtype=torch.long)


def test_wrong_shape_and_nan_are_model_errors() -> None:
    counter = QueryCounter(WrongShape(), budget=5, n_images=1)
    with pytest.raises(ModelError, match=r"model wrong returned labels of shape \(1, 3, 3\), expected \(1, 8, 8\)"):
        counter.predict(torch.rand(1, 3, 8, 8))
    with pytest.raises(ModelError, match="NaN"):
        labels_from_logits(torch.tensor([[[[float("nan")]]]]))
    with pytest.raises(ModelError, match="labels of type torch.float32, not integer class ids"):
        check_prediction(torch.rand(1, 3, 1, 1), torch.tensor([[[float("nan")]]]), "m")


def test_naming_prefixes_segtk_errors_and_wraps_others() -> None:
    from segtk.core import PluginError, SegtkError
    from segtk.core._errors import naming

    with pytest.raises(ModelError, match=r"^while predicting a\.png: the model raised ValueError: boom$"):
        with naming("while predicting a.png", ModelError, "the model"):
            raise ValueError("boom")
    with pytest.raises(PluginError, match="^while editing b: bad value") as exc:
        with naming("while editing b", ModelError, "editor x"):
            raise PluginError("bad value", hint="use red")
    assert exc.value.hint == "use red"
    with pytest.raises(KeyError):
        with naming("ctx", ModelError, "m", passthrough=(KeyError,)):
            raise KeyError("skip me")
    assert issubclass(ModelError, SegtkError)


def test_refusals_say_what_is_wrong_and_what_to_do() -> None:
    with pytest.raises(ValueError, match="^budget must be at least 1$"):
        QueryCounter(TinySegmenter(), budget=0, n_images=1)
    counter = QueryCounter(TinySegmenter(), budget=1, n_images=2)
    with pytest.raises(ValueError, match="^owners must name one source image per row$"):
        counter.predict(torch.rand(2, 3, 2, 2), owners=torch.tensor([0]))
    with pytest.raises(BudgetExceeded) as err:
        counter.predict(torch.rand(3, 3, 2, 2), owners=torch.tensor([1, 0, 1]))
    assert err.value.message == "image 1 would use 2 queries, budget is 1"
    assert err.value.hint == "the attack must stop querying an image once its budget is spent"
    assert counter.counts.tolist() == [0, 0]


def test_a_query_of_no_rows_costs_nothing_and_never_calls_the_model() -> None:
    model = TinySegmenter()
    counter = QueryCounter(model, budget=1, n_images=2)
    labels = counter.predict(torch.rand(0, 3, 5, 7), owners=torch.zeros(0, dtype=torch.long))
    assert labels.shape == (0, 5, 7) and labels.dtype == torch.long
    assert model.calls == 0 and counter.counts.tolist() == [0, 0]


def test_counts_are_integers() -> None:
    """Queries are counted in int64, as records and tables report them."""
    counter = QueryCounter(TinySegmenter(), budget=3, n_images=2)
    counter.predict(torch.rand(2, 3, 2, 2))
    assert counter.counts.dtype == torch.long and counter.remaining().dtype == torch.long


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_one_non_finite_score_is_refused(bad: float) -> None:
    logits = torch.zeros(1, 3, 2, 2)
    logits[0, 1, 1, 0] = bad  # every other score finite: one end of the range is
    with pytest.raises(ModelError, match="^the model returned NaN or infinite scores$"):
        labels_from_logits(logits)


def test_a_wrong_answer_names_what_came_back_and_the_contract() -> None:
    with pytest.raises(ModelError) as err:
        check_prediction(torch.rand(2, 3, 4, 5), [[0]], "m")  # type: ignore[arg-type]
    assert err.value.message == "model m returned labels of shape list, expected (2, 4, 5)"
    assert err.value.hint == "predict() must return int64 [B,H,W] at the input resolution"


def test_integer_labels_of_any_width_are_int64() -> None:
    labels = check_prediction(torch.rand(1, 3, 1, 3), torch.tensor([[[0, 2, 3]]], dtype=torch.uint8),
                              "m")
    assert labels.dtype == torch.long and labels.tolist() == [[[0, 2, 3]]]


# --- the model's answer is checked where every answer passes -----------------------------------


class Answers(TinySegmenter):
    """A 4-class model whose answer breaks the contract as `how` says (from its first call)."""

    name = "liar"
    how = ""

    @property
    def num_outputs(self) -> int:
        return {"fewer-outputs": 3, "void": 5}.get(self.how, 4)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        labels = super().predict(images)
        if self.how in ("too-high", "void"):
            labels[:, 0, 0] = 4
        if self.how == "negative":
            labels[:, 0, 0] = -1
        if self.how == "ignore":
            labels[:, 0, 0] = self.ignore_index
        if self.how == "float":
            return labels.float()
        return labels

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        logits = super().differentiable_logits(images)
        return logits[:, :3] if self.how == "channels" else logits


def liar(how: str) -> Answers:
    model = Answers()
    model.how = how
    return model


REFUSED = {
    "too-high": "model liar returned class ids 0..4, outside its 4 outputs (0..3)",
    "negative": "model liar returned class ids -1..3, outside its 4 outputs (0..3)",
    "ignore": "model liar returned class ids 0..255, outside its 4 outputs (0..3)",
    "float": "model liar returned labels of type torch.float32, not integer class ids",
    "fewer-outputs": "model liar has 3 outputs for 4 classes",
}


@pytest.mark.parametrize("how", list(REFUSED))
def test_an_answer_outside_the_contract_is_refused_wherever_it_is_scored(how, folder_dataset) -> None:
    """The attack's queries and evaluation passes (QueryCounter), `segtk predict` and the
    attack job's scoring: one line naming the model and what is wrong, nothing scored."""
    from segtk.core import load_dataset
    from segtk.jobs.attack import evaluate
    from segtk.jobs.predict import predict_dataset
    from segtk.testing import toy_batch

    images, _ = toy_batch(2, 6, 7)
    for ask in (lambda: QueryCounter(liar(how), 2, 2).predict(images),
                lambda: QueryCounter(liar(how), 2, 2).evaluate(images),
                lambda: evaluate(liar(how), images),
                lambda: predict_dataset(liar(how), load_dataset(f"folder:{folder_dataset}"), None)):
        with pytest.raises(ModelError) as err:
            ask()
        assert REFUSED[how] in err.value.message and "\n" not in err.value.message


def test_ids_up_to_the_declared_outputs_are_answers() -> None:
    """A "void" output past the classes (ESPNet's) is allowed where the model declares it."""
    images = torch.rand(2, 3, 6, 7)
    labels = QueryCounter(liar("void"), 2, 2).predict(images)
    assert int(labels.max()) == 4


def test_logits_with_other_channels_than_outputs_are_refused() -> None:
    images = torch.rand(2, 3, 6, 7, requires_grad=True)
    with pytest.raises(ModelError) as err:
        QueryCounter(liar("channels"), 2, 2).gradient_logits(images)
    assert err.value.message == "model liar returned logits of shape (2, 3, 6, 7), expected " \
                                "(2, 4, 6, 7)"
    assert QueryCounter(liar(""), 2, 2).gradient_logits(images).shape == (2, 4, 6, 7)


def test_a_labels_only_segmenter_says_it_has_no_scores() -> None:
    class LabelsOnly(Segmenter):
        name, classes = "plain", ["a"]

        def predict(self, images: torch.Tensor) -> torch.Tensor:
            return torch.zeros(images.shape[0], *images.shape[2:], dtype=torch.long)

    assert not LabelsOnly().has_logits and TinySegmenter().has_logits
    with pytest.raises(NotImplementedError, match="^plain gives labels only, no scores$"):
        LabelsOnly().logits(torch.rand(1, 3, 2, 2))


def test_a_time_limit_refuses_queries_once_passed_without_charging_them() -> None:
    """No clock is waited on: a limit already passed (negative) and one far away (an hour)."""
    from segtk.core._segmenter import TimeUp

    model = TinySegmenter()
    late = QueryCounter(model, budget=5, n_images=1, time_limit=-1.0)
    assert late.timed_out is False
    with pytest.raises(TimeUp):
        late.predict(torch.rand(1, 3, 2, 2))
    assert late.timed_out is True and late.counts.tolist() == [0] and model.calls == 0
    early = QueryCounter(model, budget=5, n_images=1, time_limit=3600.0)
    early.predict(torch.rand(1, 3, 2, 2))
    assert early.timed_out is False and early.counts.tolist() == [1] and model.calls == 1
    assert QueryCounter(model, budget=5, n_images=1).deadline is None


def test_gradient_passes_are_charged_to_their_owners_and_checked_word_for_word() -> None:
    from segtk.core._segmenter import check_gradient_logits

    model = TinySegmenter()
    counter = QueryCounter(model, budget=3, n_images=2)
    x = torch.rand(2, 3, 4, 5, requires_grad=True)
    logits = counter.gradient_logits(x, owners=torch.tensor([1, 1]))
    assert counter.counts.tolist() == [0, 2] and logits.requires_grad
    with pytest.raises(ModelError) as err:
        check_gradient_logits(x, torch.zeros(2, 4, 5), "m")
    assert err.value.message == "model m returned logits of shape (2, 4, 5), expected (2, C, 4, 5)"
    assert err.value.hint == "differentiable_logits() must return [B,C,H,W] at the input resolution"
    with pytest.raises(ModelError, match=r"^model m returned logits of shape list, expected"):
        check_gradient_logits(x, [[0.0]], "m")  # type: ignore[arg-type]
    with pytest.raises(ModelError) as err:
        check_gradient_logits(x, torch.zeros(2, 4, 4, 5), "m")
    assert err.value.message == "model m returned logits without a gradient path to the images"
    assert err.value.hint == ("differentiable_logits() must not run under torch.no_grad, "
                              "inference_mode or detach()")

    class Cropping(TinySegmenter):
        name = "cropping"

        def differentiable_logits(self, images):
            return super().differentiable_logits(images)[..., 1:]

    with pytest.raises(ModelError, match="^model cropping returned logits of shape"):
        QueryCounter(Cropping(), budget=3, n_images=1).gradient_logits(x[:1])


def test_a_segmenter_without_gradients_says_so() -> None:
    with pytest.raises(NotImplementedError, match="^tiny gives no gradients$"):
        Segmenter.differentiable_logits(TinySegmenter(), torch.rand(1, 3, 2, 2))


def test_an_evaluation_pass_is_checked_like_a_query_and_charged_to_no_one() -> None:
    """`evaluate` (the oracle scoring a declared iterate) answers what `predict` answers, with
    the same check of the model's answer and the same blame, and charges nothing."""
    model = TinySegmenter()
    counter = QueryCounter(model, budget=1, n_images=2)
    x = torch.rand(2, 3, 4, 5)
    labels = counter.evaluate(x)
    assert labels.dtype == torch.long and torch.equal(labels, model.logits(x).argmax(1))
    assert torch.equal(counter.evaluate(x[1:]), labels[1:])  # one row: answered too
    assert counter.counts.tolist() == [0, 0] and model.calls == 2
    none = counter.evaluate(torch.rand(0, 3, 4, 5))
    assert none.shape == (0, 4, 5) and none.dtype == torch.long and model.calls == 2
    wrong = QueryCounter(WrongShape(), budget=1, n_images=1)
    with pytest.raises(ModelError) as err:
        wrong.evaluate(torch.rand(1, 3, 8, 8))
    assert err.value.message == "model wrong returned labels of shape (1, 3, 3), expected (1, 8, 8)"
    assert wrong.failure is err.value  # the model's failure, as Attack.run tells it apart
