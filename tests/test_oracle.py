"""The oracle's cheap paths keep its guarantees: every queried image in the ε-ball and [0,1]."""

from __future__ import annotations

import warnings
import weakref

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from segtk.core import Proxy, QueryCounter, confusion
from segtk.core._attack import Attack
from segtk.core._errors import AttackError, BudgetExceeded, SegtkError
from segtk.core._oracle import Oracle, box, project
from segtk.core._oracle_run import OracleRun
from segtk.testing import RecordingSegmenter, TinySegmenter, toy_batch

EPS = 8 / 255


def oracle(budget: int = 10, n: int = 2) -> tuple[OracleRun, RecordingSegmenter]:
    images, labels = toy_batch(n, 6, 7)
    images[0, :, :2] = 0.0  # saturated rows exercise the [0,1] box
    images[-1, :, -2:] = 1.0
    model = RecordingSegmenter()
    counter = QueryCounter(model, budget, n)
    return OracleRun(counter, images, labels, Proxy(4), EPS, list(range(n))), model


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([1.0, 8.0, 16.0, 255.0]))
def test_clamping_to_the_box_is_project_bit_for_bit(seed: int, eps: float) -> None:
    g = torch.Generator().manual_seed(seed)
    clean = torch.rand(2, 3, 5, 4, generator=g)
    clean[0, 0] = 0.0
    clean[1, 1] = 1.0
    x = clean + (torch.rand(clean.shape, generator=g) * 2 - 1) * 3 * eps / 255
    lo, hi = box(clean, eps / 255)
    assert torch.equal(torch.clamp(x, lo, hi), project(x, clean, eps / 255))


def test_vertex_patch_and_undo_stay_in_bounds_and_are_what_they_say() -> None:
    o, model = oracle()
    clean = o.clean[0]
    v = o.verified.vertex(0, torch.tensor([True, False, True, False, True, False])[None, :, None])
    assert torch.equal(v.image[:, 0], project(clean[:, 0] + EPS, clean[:, 0], EPS))
    assert torch.equal(v.image[:, 1], project(clean[:, 1] - EPS, clean[:, 1], EPS))
    before = v.image.clone()
    undo = o.verified.patch(v, (..., slice(1, 3)), clean[..., 1:3] + 5 * EPS)  # far out: projected
    assert torch.equal(v.image[..., 1:3], project(clean[..., 1:3] + EPS, clean[..., 1:3], EPS))
    assert torch.equal(v.image[..., :1], before[..., :1]) and torch.equal(v.image[..., 3:], before[..., 3:])
    o.verified.score([v])
    assert torch.equal(model.seen[-1], v.image)
    undo()
    assert torch.equal(v.image, before)
    o.verified.score([v, o.verified.project(1, o.clean[1] - 3 * EPS)])
    assert float((model.seen[-1] - o.clean[1]).abs().max()) <= EPS + 1e-6
    assert float(model.seen[-1].min()) >= 0


def test_a_verified_image_written_outside_the_oracle_is_refused_before_the_model() -> None:
    o, model = oracle()
    v = o.verified.project(0, o.clean[0])
    v.image[0, 0, 0] = 2.0  # an attack scribbling on the oracle's image
    with pytest.raises(SegtkError, match="wrote to a verified image outside the oracle"):
        o.verified.score([v])
    assert model.calls == 0
    w = o.verified.project(1, o.clean[1])
    w.image[:, :2].add_(1.0)  # a write through a view counts too
    with pytest.raises(SegtkError):
        o.verified.score([w])


def test_verified_answer_gives_the_labels_the_model_gave_and_is_checked_and_charged() -> None:
    o, model = oracle(budget=2)
    v = o.verified.vertex(0, torch.ones(3, 1, 1, dtype=torch.bool))
    w = o.verified.project(1, o.clean[1] - 3 * EPS)
    answer = o.verified.answer([v, w])
    assert torch.equal(answer.labels, TinySegmenter().predict(torch.stack(model.seen[-2:])))
    assert answer.scores.tolist() == o._history[0][-1:] + o._history[1][-1:]
    assert o._counter.counts.tolist() == [1, 1]
    v.image[0, 0, 0] = 2.0
    with pytest.raises(SegtkError, match="wrote to a verified image outside the oracle"):
        o.verified.answer([v])
    empty, none = o.verified.answer([]), o.query(torch.empty(0, 3, 6, 7))  # as a query of no rows
    assert empty.scores.shape == none.scores.shape == (0,) and empty.scores.dtype == none.scores.dtype
    assert empty.labels.shape == none.labels.shape == (0, 6, 7) and empty.labels.dtype == torch.long
    assert o.verified.score([]) == [] and o._counter.counts.tolist() == [1, 1]


def test_verified_queries_are_charged_exactly() -> None:
    o, _ = oracle(budget=2)
    v = o.verified.project(0, o.clean[0])
    o.verified.score([v])
    o.verified.score([v, o.verified.project(1, o.clean[1])])
    assert o._counter.counts.tolist() == [2, 1]
    with pytest.raises(BudgetExceeded):
        o.verified.score([v])
    assert [len(h) for h in o._history] == [2, 1]


def test_query_refuses_nan() -> None:
    o, model = oracle()
    x = o.clean[:1].clone()
    x[0, 0, 0, 0] = float("nan")
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(x, torch.tensor([0]))
    assert model.calls == 0


def test_pinned_candidates_of_consecutive_images_are_one_view_of_the_oracles_batch() -> None:
    o, model = oracle(n=3)
    vs = [o.verified.pin(o.verified.project(i, o.clean[i] + EPS)) for i in range(3)]
    assert all(v.pinned for v in vs)
    undo = o.verified.patch(vs[1], (..., slice(0, 2)), o.clean[1][..., :2] - 9 * EPS)
    o.verified.score(vs)
    assert model.sizes == [3]
    assert torch.equal(model.batches[-1][1], vs[1].image)
    assert float((model.batches[-1] - o.clean).abs().max()) <= EPS + 1e-6
    undo()
    kept = o.verified.unpinned(vs[0])
    o.verified.vertex(0, torch.zeros(1, 1, 1, dtype=torch.bool), pin=True)  # reuses row 0
    assert not torch.equal(kept.image, vs[0].image)  # the copy kept what row 0 showed
    o.verified.score([kept, vs[2]])  # mixed: stacked
    assert torch.equal(model.batches[-1][0], kept.image)


def test_what_an_attack_reads_of_the_oracle_cannot_be_rebound() -> None:
    """Every public member of the oracle an attack holds (and of its verified images) is a
    read-only property or a method: an attack cannot rebind its bounds or its counter, nor add a
    member, only read what it needs; the run's side keeps no public data member either."""
    run, _ = oracle()
    o = run.oracle
    assert not hasattr(o, "__dict__")  # nothing to add or rebind
    assert sorted(k for k in vars(run) if not k.startswith("_")) == []
    names = [n for n in dir(Oracle) if not n.startswith("_") and isinstance(getattr(Oracle, n), property)]
    assert {"clean", "labels", "eps_unit", "proxy", "rngs", "verified", "budget",
            "batch_size"} <= set(names)
    for name in names:
        with pytest.raises(AttributeError):
            setattr(o, name, getattr(o, name))
    with pytest.raises(AttributeError):
        o.extra = 1  # type: ignore[attr-defined]
    v = o.verified.project(0, o.clean[0])
    for name in ("owner", "image", "pinned"):
        with pytest.raises(AttributeError):
            setattr(v, name, getattr(v, name))


class Widener(Attack):
    """Rebinds the oracle's ε to 1 (as if it were a setting), then queries far outside the ball."""

    name = "widener"

    def attack(self, oracle: Oracle) -> None:
        oracle.eps_unit = 1.0  # type: ignore[misc]
        oracle.query(project(oracle.clean + 0.5, oracle.clean, 1.0))


def test_an_attack_rebinding_eps_is_refused_before_the_model_sees_a_query() -> None:
    images, labels = toy_batch(2, 6, 7)
    model = RecordingSegmenter()
    with pytest.raises(AttackError, match="^attack 'widener' raised AttributeError"):
        Widener(budget=3).run(model, images, labels)
    assert model.calls == 0


def test_a_verified_image_cannot_be_swapped_for_an_unchecked_tensor() -> None:
    o, model = oracle()
    v = o.verified.project(0, o.clean[0])
    with pytest.raises(AttributeError):
        v.image = o.clean[0] + 0.5  # type: ignore[misc]
    o.verified.score([v])
    assert torch.equal(model.seen[-1], o.clean[0])


def test_verified_images_do_not_keep_their_oracle_alive() -> None:
    """The oracle owns its VerifiedImages, which queries through it weakly: no reference
    cycle keeps an oracle (and its images) alive after its attack, and a query then is refused."""
    o, model = oracle()
    verified, alive = o.verified, weakref.ref(o)
    v = verified.project(0, o.clean[0])
    del o
    assert alive() is None  # freed by reference counting alone, no garbage collection
    with pytest.raises(SegtkError) as err:
        verified.score([v])
    assert (err.value.message, err.value.hint) == (
        "verified images queried after their oracle's attack ended",
        "query only during Attack.attack, through its oracle")
    assert model.calls == 0


def test_a_write_to_the_pinned_batch_outside_the_oracle_is_refused() -> None:
    o, model = oracle(n=2)
    vs = [o.verified.pin(o.verified.project(i, o.clean[i])) for i in range(2)]
    vs[1].image[0, 0, 0] = 5.0  # through image 1's row: image 0's candidate is refused too
    with pytest.raises(SegtkError, match="outside the oracle"):
        o.verified.score(vs[:1])
    assert model.calls == 0


def scribble(x: torch.Tensor, how: str, value: float) -> None:
    """Write `value` into x[0, 3, 3] the ways no version counter sees (and one it does)."""
    if how == "data":
        x.data[0, 3, 3] = value
    elif how == "numpy":
        x.numpy()[0, 3, 3] = value
    else:
        x.detach()[0, 3, 3] = value  # shares the counter: refused by the version check


def in_bounds(o: OracleRun, model: RecordingSegmenter) -> bool:
    seen = torch.stack(model.seen)
    lo, hi = box(o.clean[:1], EPS + 1e-6)
    return bool(((seen >= lo) & (seen <= hi)).all())


@pytest.mark.parametrize("how", ["data", "numpy", "detach"])
@pytest.mark.parametrize("kind", ["vertex", "project", "pinned", "flipped"])
@pytest.mark.parametrize("value", [3.0, float("nan")])
def test_a_verified_image_written_any_way_never_reaches_the_model_out_of_bounds(
        how, kind, value) -> None:
    """Writes through `.data` or `.numpy()` bypass the version counter: the oracle checks the
    values of every batch it sends anyway, so the model sees only images inside the box (a
    flip of a scribbled value is any bit pattern: refused, or inside the box by chance)."""
    o, model = oracle()
    v = o.verified.vertex(0, torch.ones(3, 1, 1, dtype=torch.bool)) if kind in ("vertex", "flipped") \
        else o.verified.project(0, o.clean[0])
    v = o.verified.pin(v) if kind == "pinned" else v
    scribble(v.image, how, float(o.clean[0, 0, 3, 3]) + value * EPS)
    try:
        if kind == "flipped":
            o.verified.flip(v, (slice(None), slice(3, 4)))
        o.verified.score([v])
    except SegtkError as exc:
        assert "outside the ε-ball" in exc.message or "outside the oracle" in exc.message
        assert model.calls == 0 and o._counter.counts.tolist() == [0, 0]
    else:
        assert kind == "flipped" and in_bounds(o, model)


@pytest.mark.parametrize("how", ["data", "numpy"])
def test_the_clean_images_written_unseen_are_not_queried_as_clean(how) -> None:
    o, model = oracle()
    scribble(o.clean[1], how, 1.0 - float(o.clean[1, 0, 3, 3]) + 0.5)  # far from the centre
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(o.clean)
    assert model.calls == 0


def test_candidates_carrying_a_graph_are_checked_like_any_other() -> None:
    """A white-box attack may hand over the tensor it differentiates."""
    images, labels = toy_batch(2, 6, 7)
    o = OracleRun(QueryCounter(TinySegmenter(), 4, 2), images, labels, Proxy(4), EPS, [0, 1],
               white_box=True)
    x = images.clone().requires_grad_(True)
    assert o.loss_and_grad(x, lambda logits, _: logits.sum((1, 2, 3))).grad.shape == x.shape
    assert o.query(x).scores.shape == (2,)
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(x + 2 * EPS)


def test_answers_edited_in_place_leave_what_the_oracle_recorded() -> None:
    """The labels of an answer are the attack's to use; the clean labels and iterates the
    oracle records are its own copies."""
    images, labels = toy_batch(2, 6, 7)
    truth = TinySegmenter().predict(images)
    for returns in ("best", "iterate"):
        o = OracleRun(QueryCounter(TinySegmenter(), 4, 2), images, labels, Proxy(4), EPS, [0, 1],
                   returns=returns)
        o.query(images.clone()).labels.fill_(3)  # the clean images, then edited
        o.verified.answer([o.verified.project(0, o.clean[0] + EPS)]).labels.fill_(3)
        result = o.result()
        assert result.clean_predictions is not None
        assert torch.equal(result.clean_predictions, truth), returns
        assert torch.equal(result.predictions[1], truth[1]), returns


def test_verified_images_of_another_oracle_are_refused() -> None:
    o, model = oracle()
    other, _ = oracle()
    with pytest.raises(SegtkError, match="another oracle"):
        o.verified.score([other.verified.project(0, other.clean[0])])
    assert model.calls == 0
    assert o.verified.score([]) == []


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_a_query_one_percent_past_eps_inside_the_box_is_refused(side: float) -> None:
    """The tolerant box is float32 slack (EPS_TOLERANCE), not a share of ε: clean ± 1.01·ε on
    one value, well inside [0,1], never reaches the model; clean ± ε does, for every owner."""
    clean = torch.full((2, 3, 4, 5), 0.5)
    labels = torch.zeros(2, 4, 5, dtype=torch.long)
    model = RecordingSegmenter()
    o = OracleRun(QueryCounter(model, 10, 2), clean, labels, Proxy(4), EPS, [0, 1])
    edge = clean + side * EPS
    o.query(edge, torch.tensor([0, 1]))  # exactly on the ball's surface: accepted
    assert model.calls == 1 and torch.equal(model.seen[-1], edge[1])
    past = edge.clone()
    past[1, 2, 3, 4] = 0.5 + side * 1.01 * EPS  # one value of image 1, 1% past ε
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(past, torch.tensor([0, 1]))
    with pytest.raises(SegtkError, match="outside the ε-ball"):
        o.query(past[1:], torch.tensor([1]))
    assert model.calls == 1 and o._counter.counts.tolist() == [1, 1]  # refused before charging


def one_value_past(o: OracleRun, image: int, factor: float) -> torch.Tensor:
    """The clean batch with one value of `image` moved `factor`·ε up."""
    x = o.clean.clone()
    x[image, 2, 3, 4] += factor * o.eps_unit
    return x


def grey_oracle(budget: int = 10, n: int = 3, value: float = 0.5,
                model: RecordingSegmenter | None = None) -> tuple[OracleRun, RecordingSegmenter]:
    """Images of one grey `value` (away from [0,1] for 0.5), 4x5, ε = 8/255."""
    clean = torch.full((n, 3, 4, 5), value)
    model = model if model is not None else RecordingSegmenter()
    counter = QueryCounter(model, budget, n)
    return OracleRun(counter, clean, torch.zeros(n, 4, 5, dtype=torch.long), Proxy(4), EPS,
                     list(range(n))), model


@pytest.mark.parametrize("owners", [[0, 1, 2], torch.tensor([0, 1, 2], dtype=torch.uint8),
                                    torch.tensor([0, 1, 2], dtype=torch.int32)])
def test_a_refusal_names_the_gap_eps_and_the_fix(owners) -> None:
    o, model = grey_oracle()
    with pytest.raises(SegtkError) as err:
        o.query(one_value_past(o, 1, 1.2), owners)
    assert err.value.message == ("attack produced a candidate outside the ε-ball or [0,1] "
                                 "(L∞ = 9.600/255, ε = 8.000/255)")
    assert err.value.hint == "project candidates with segtk.core.project before querying"
    assert model.calls == 0


def test_the_verified_image_errors_say_what_to_do() -> None:
    o, _ = grey_oracle()
    other, _ = grey_oracle()
    with pytest.raises(SegtkError) as err:
        o.verified.score([other.verified.project(0, other.clean[0])])
    assert (err.value.message, err.value.hint) == (
        "a verified image from another oracle (or made by hand)",
        "make candidates with this oracle's verified.project, vertex or pin")
    v = o.verified.project(0, o.clean[0])
    v.image.add_(0.001)
    with pytest.raises(SegtkError) as err:
        o.verified.score([v])
    assert (err.value.message, err.value.hint) == (
        "an attack wrote to a verified image outside the oracle",
        "change verified images only with oracle.verified.patch or flip")
    with pytest.raises(SegtkError) as err:
        o.verified.vertex(0, torch.ones(1, 4, 1))
    assert (err.value.message, err.value.hint) == (
        "a corner mask must be a bool tensor, got torch.float32", "pass e.g. delta > 0")
    with pytest.raises(SegtkError) as err:
        o.verified.flip(o.verified.project(0, o.clean[0]), (..., slice(0, 2)))
    assert (err.value.message, err.value.hint) == (
        "flip needs an image of box corners",
        "make it with oracle.verified.vertex; change it with flip, not patch")
    w = o.verified.vertex(1, torch.ones(1, 4, 1, dtype=torch.bool))
    undo_flip = o.verified.flip(w, (..., slice(0, 2)))
    o.verified.patch(w, (..., slice(3, 4)), o.clean[1][..., 3:4])
    with pytest.raises(SegtkError) as err:
        undo_flip()
    assert (err.value.message, err.value.hint) == (
        "flip undone after a patch of the same image", "undo patches and flips in reverse order")


def test_verified_project_projects_from_above_and_below() -> None:
    o, _ = grey_oracle()
    for side in (3.0, -3.0):
        x = o.clean[2] + side * EPS
        assert torch.equal(o.verified.project(2, x).image, project(x, o.clean[2], EPS))


@pytest.mark.parametrize("value", [1.2, -0.2])
def test_corners_and_projections_stay_in_the_box_around_a_clean_image_outside_it(value: float) -> None:
    """A clean image outside [0,1] (e.g. wrongly normalised) is no reason to send the model
    values outside it: box() cuts both bounds to [0,1]."""
    o, model = grey_oracle(value=value)
    for positive in (True, False):
        o.verified.score([o.verified.vertex(0, torch.full((1, 1, 1), positive))])
    o.verified.score([o.verified.project(1, o.clean[1] + 5 * EPS), o.verified.project(2, o.clean[2] - 5 * EPS)])
    seen = torch.stack(model.seen)
    assert float(seen.min()) >= 0 and float(seen.max()) <= 1
    assert torch.equal(seen, torch.full_like(seen, 1.0 if value > 1 else 0.0))


def test_a_flip_after_an_old_patch_is_undone_into_a_repinned_row_is_refused() -> None:
    """Undoing a patch always clears the row's corner flag, even after the row was pinned
    again: the restored values need not be corners, and a flip of them would leave the box."""
    o, model = grey_oracle()
    v = o.verified.vertex(0, torch.ones(1, 4, 1, dtype=torch.bool), pin=True)
    o.verified.patch(v, (..., slice(0, 2)), o.clean[0][..., :2])  # the clean values: no corners
    undo = o.verified.patch(v, (..., slice(0, 2)), o.clean[0][..., :2] - EPS / 2)
    again = o.verified.vertex(0, torch.zeros(1, 4, 1, dtype=torch.bool), pin=True)
    undo()  # puts the clean values back into the row `again` lives in
    with pytest.raises(SegtkError, match="box corners"):
        o.verified.flip(again, (..., slice(0, 4)))
    assert model.calls == 0


def test_query_each_projects_and_cuts_each_list_to_the_remaining_budget() -> None:
    o, model = grey_oracle(budget=3)
    far = [o.clean[0] + 5 * EPS * torch.ones(2, 1, 1, 1), o.clean[2] - 5 * EPS * torch.ones(5, 1, 1, 1)]
    scores = o.query_each([0, 2], far)
    assert [len(s) for s in scores] == [2, 3]  # image 2 had 3 queries left: cut, never over
    assert o._counter.counts.tolist() == [2, 0, 3] and model.sizes == [5]
    sent = model.batches[0]
    assert torch.equal(sent[:2], project(far[0], o.clean[0], EPS).expand(2, -1, -1, -1))
    assert torch.equal(sent[2:], project(far[1][:3], o.clean[2], EPS))
    scores = o.query_each([2, 0], [far[1], far[0]])  # image 2 has none left, image 0 one
    assert [len(s) for s in scores] == [0, 1] and o._counter.counts.tolist() == [3, 0, 3]
    assert [len(h) for h in o._history] == [3, 0, 3]


class DataPointers(RecordingSegmenter):
    """Also keeps where each batch's data lives, to tell a view of a tensor from a copy."""

    def __init__(self) -> None:
        super().__init__()
        self.pointers: list[int] = []

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.pointers.append(images.data_ptr())
        return super().predict(images)


@pytest.mark.parametrize("owners", [[1, 2], [0, 1, 2], [0, 2], [2, 1]])
def test_pinned_candidates_go_as_one_view_only_when_consecutive(owners: list[int]) -> None:
    model = DataPointers()
    o, _ = grey_oracle(model=model)
    vs = [o.verified.pin(o.verified.project(i, o.clean[i] + (i + 1) * EPS / 4)) for i in range(3)]
    o.verified.score([vs[i] for i in owners])
    assert torch.equal(model.batches[0], torch.stack([vs[i].image for i in owners]))
    consecutive = owners == list(range(owners[0], owners[0] + len(owners)))
    assert (model.pointers[0] == vs[owners[0]].image.data_ptr()) == consecutive


def test_a_vertex_is_unpinned_unless_asked() -> None:
    o, model = grey_oracle()
    up, down = o.verified.vertex(0, torch.ones(1, 1, 1, dtype=torch.bool)), o.verified.vertex(0, torch.zeros(1, 1, 1, dtype=torch.bool))
    assert not up.pinned and not down.pinned
    o.verified.score([up, down])  # two corners of one image, both kept
    assert torch.equal(model.seen[0], o.clean[0] + EPS) and torch.equal(model.seen[1], o.clean[0] - EPS)


class FirstOnly:
    """Queries image 0 `n` times, never image 1: the result of an attack that stopped early."""

    def __init__(self, n: int, first_clean: bool = False) -> None:
        self.n, self.first_clean = n, first_clean

    def __call__(self, o: OracleRun) -> None:
        if self.first_clean:
            o.query(o.clean)
        for k in range(self.n):
            o.query(project(o.clean[:1] + (k + 1) * EPS / 8, o.clean[:1], EPS), torch.tensor([0]))


@pytest.mark.parametrize("ignore", [255, 2])
def test_images_that_stop_before_a_checkpoint_keep_their_final_state(ignore: int) -> None:
    """The checkpoints of an image that stopped early (or was never queried) are its final
    best: its best image, and the confusion of the labels it holds (all zeros if never asked),
    scored with the proxy's ignore index."""
    images, labels = toy_batch(2, 6, 7)
    labels[:, 0] = 2  # ignore pixels when ignore == 2
    model = RecordingSegmenter()
    o = OracleRun(QueryCounter(model, 10, 2), images, labels, Proxy(4, ignore_index=ignore), EPS,
                  [0, 1], checkpoints=(2, 5))
    FirstOnly(3)(o)
    r = o.result()
    assert r.queries.tolist() == [3, 0]
    never = confusion(torch.zeros_like(labels[1]), labels[1], 4, ignore)[0]
    best0 = confusion(model.predict(r.images[:1]), labels[:1], 4, ignore)[0]
    assert torch.equal(r.checkpoints[5][1], never) and torch.equal(r.checkpoints[2][1], never)
    assert torch.equal(r.checkpoints[5][0], best0)  # stopped at 3: its final best
    assert torch.equal(r.checkpoint_images[5][0], r.images[0])
    assert torch.equal(r.checkpoint_images[5][1], images[1])  # never moved from clean
    assert all(c.dtype == torch.long for c in r.checkpoints.values())  # exact pixel counts


def test_the_clean_answer_is_reused_only_if_every_image_asked_about_its_clean_image() -> None:
    images, labels = toy_batch(2, 6, 7)
    o = OracleRun(QueryCounter(RecordingSegmenter(), 10, 2), images, labels, Proxy(4), EPS, [0, 1])
    answer = o.query(project(images + EPS, images, EPS))  # every image's first query: no clean
    assert torch.equal(answer.labels, RecordingSegmenter().predict(project(images + EPS, images, EPS)))
    o.query(images)  # the clean images, but not as their first queries
    assert o.result().clean_predictions is None
    for first_clean in (True, False):
        model = RecordingSegmenter()
        o = OracleRun(QueryCounter(model, 10, 2), images, labels, Proxy(4), EPS, [0, 1])
        FirstOnly(2, first_clean)(o)
        clean = o.result().clean_predictions
        if first_clean:
            assert clean is not None and torch.equal(clean, RecordingSegmenter().predict(images))
        else:
            assert clean is None


def test_describe_is_the_docstrings_first_line() -> None:
    class Documented(Attack):
        """Noise of one colour.

        More about it."""

        def attack(self, oracle: Oracle) -> None: ...

    class Bare(Attack):
        def attack(self, oracle: Oracle) -> None: ...

    assert Documented.describe() == "Noise of one colour." and Bare.describe() == ""


def test_query_each_with_no_budget_left_asks_nothing() -> None:
    o, model = grey_oracle(budget=1)
    o.query_each([0, 1], [o.clean[:1], o.clean[1:2]])
    scores = o.query_each([0, 1], [o.clean[:1], o.clean[1:2]])  # both cut to nothing
    assert [len(s) for s in scores] == [0, 0] and model.calls == 1
    assert o._counter.counts.tolist() == [1, 1, 0]


def test_query_each_puts_each_images_rows_in_its_own_place() -> None:
    o, model = grey_oracle(budget=5)
    g = torch.Generator().manual_seed(7)
    lists = [o.clean[i] + (torch.rand(n, 3, 4, 5, generator=g) - 0.5) * 8 * EPS
             for i, n in zip((1, 0, 2), (2, 1, 3))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "output was resized": each slice is exactly its rows
        scores = o.query_each([1, 0, 2], lists)
    assert [len(s) for s in scores] == [2, 1, 3] and model.sizes == [6]
    expected = torch.cat([project(c, o.clean[i], EPS) for i, c in zip((1, 0, 2), lists)])
    assert torch.equal(model.batches[0], expected)
    assert o._counter.counts.tolist() == [1, 2, 3]


def test_uniform_noise_fills_minus_half_to_half() -> None:
    from segtk.core import uniform_noise
    noise = uniform_noise((20_000,), 0.5, torch.Generator().manual_seed(0))
    assert float(noise.min()) >= -0.5 and float(noise.max()) <= 0.5
    assert float(noise.min()) < -0.49 and float(noise.max()) > 0.49 and abs(float(noise.mean())) < 0.01


def test_runs_with_other_seeds_draw_other_streams() -> None:
    from segtk_random import RandomAttack

    images, labels = toy_batch(2, 6, 7)

    def queried(seed: int) -> torch.Tensor:
        model = RecordingSegmenter()
        RandomAttack(budget=4, seed=seed).run(model, images, labels)
        return torch.stack(model.seen)

    first, other, again = queried(0), queried(1), queried(0)
    assert torch.equal(first, again) and not torch.equal(first, other)
    assert not torch.equal(first[2] - images[0], first[3] - images[1])  # a stream per image


class Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class OneThenTwo(Attack):
    """Queries image 0 twice (its whole budget), then image 1."""

    name = "one-then-two"

    def attack(self, oracle: Oracle) -> None:
        for owner in (0, 0, 1, 1):
            oracle.query(oracle.clean[owner:owner + 1], torch.tensor([owner]))


def test_the_time_limit_stops_the_attack_and_names_the_images_it_cut_short(monkeypatch) -> None:
    from segtk.core import _segmenter as segmenter_module
    monkeypatch.setattr(segmenter_module, "monotonic", Ticks())  # made at 1: queries at 2, 3, 4
    images, labels = toy_batch(2, 6, 7)
    result = OneThenTwo(budget=2, time_limit=2.5).run(TinySegmenter(), images, labels)
    assert result.queries.tolist() == [2, 0] and result.stopped == ["", "time"]
    monkeypatch.setattr(segmenter_module, "monotonic", Ticks())
    unlimited = OneThenTwo(budget=2).run(TinySegmenter(), images, labels)
    assert unlimited.queries.tolist() == [2, 2] and unlimited.stopped == ["", ""]
