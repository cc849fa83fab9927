"""Random attack: the shared suite for both variants, Eq. 2's step size and clean first query
(the default, pinned), and the released variant's vertex start, clamped steps, antithetic
queries, budget and reported minimum."""

from __future__ import annotations

import hashlib

import pytest
import torch

from segtk.core import EPS_TOLERANCE, AttackResult, Proxy, SegtkError, confusion
from segtk.testing import AttackSuite, TinySegmenter, toy_batch
from segtk.testing import RecordingSegmenter as Recorder
from segtk_random import RandomAttack


class TestRandom(AttackSuite):
    attack_cls = RandomAttack


class TestRandomReleased(AttackSuite):
    attack_cls = RandomAttack
    params = {"variant": "released"}


def test_first_query_is_clean_and_steps_stay_within_eps_over_16() -> None:
    images, labels = toy_batch(1, 20, 20, seed=3)
    model = Recorder()
    RandomAttack(budget=30, eps=16).run(model, images, labels)
    assert len(model.seen) == 30 and torch.equal(model.seen[0], images[0])
    proxy = Proxy(4)
    best, best_score = model.seen[0], float("inf")
    for candidate in model.seen:
        if best_score < float("inf"):
            assert float((candidate - best).abs().max()) <= 16 / 255 / 16 + EPS_TOLERANCE
        score = float(proxy(TinySegmenter().predict(candidate[None]), labels)[0])
        if score < best_score:
            best, best_score = candidate, score


def test_the_default_is_eq2_and_its_runs_are_unchanged() -> None:
    """A short default run, pinned as it was before the released variant was added: the
    numbers measured with `random` stay reproducible under that name."""
    images, labels = toy_batch(2, 16, 16, seed=4)
    result = RandomAttack(budget=20, seed=1, eps=8).run(TinySegmenter(), images, labels)
    assert RandomAttack().params.variant == "eq2"
    assert hashlib.sha256(result.images.numpy().tobytes()).hexdigest() == \
        "5dd19e054bf214495e3cddc70289ee93c537146600d1559ab5b8ca094a0934fe"
    assert result.history[0][:2] == [1.0, 0.9728580117225647]
    assert result.history[1][:6] == [1.0, 0.9923672676086426, 0.9923672676086426,
                                     0.9923672676086426, 0.9878015518188477, 0.9801688194274902]


def test_an_unknown_variant_is_refused() -> None:
    with pytest.raises(SegtkError, match="variant"):
        RandomAttack(variant="paper")


EPS = 16 / 255  # the released runs' ε, on the [0,1] scale
TOL = 1e-6


def released_run(budget: int, seed: int = 0) -> tuple[torch.Tensor, list[torch.Tensor],
                                                      list[float], AttackResult]:
    """A released-variant run on an image inside [ε, 1−ε], so [0,1] never clips a value: the
    clean image, the queries in order, their proxies and the run's result."""
    images, labels = toy_batch(1, 20, 20, seed=3)
    images = images.clamp(0.1, 0.9)
    model = Recorder()
    result = RandomAttack(budget=budget, eps=16, seed=seed, variant="released").run(
        model, images, labels)
    scores = [float(Proxy(4)(TinySegmenter().predict(x[None]), labels)[0]) for x in model.seen]
    return images[0], model.seen, scores, result


def kinds(scores: list[float]) -> list[str]:
    """What each query must be, from the proxies alone: the clean image first, then steps;
    after a step that scored worse than every query before it, that step's antithetic."""
    found = ["clean"]
    for k in range(1, len(scores)):
        failed = found[k - 1] == "step" and scores[k - 1] > min(scores[: k - 1])
        found.append("antithetic" if failed else "step")
    return found


def test_released_starts_from_a_random_eps_vertex_per_value_and_channel() -> None:
    clean, seen, _, _ = released_run(budget=2)
    assert len(seen) == 2 and torch.equal(seen[0], clean)
    first = seen[1] - clean  # the vertex plus one step of at most ε/16, clipped to the ball
    assert float(first.abs().min()) >= EPS * 15 / 16 - TOL, "a value did not start at ±ε"
    signs = first.sign()
    assert (signs > 0).any() and (signs < 0).any()
    assert (signs[0] != signs[1]).any() and (signs[1] != signs[2]).any(), \
        "the channels share their signs: one sign per value and channel wanted"
    _, other, _, _ = released_run(budget=2, seed=1)
    assert not torch.equal((other[1] - clean).sign(), signs), "the vertex ignores the seed"


def test_released_steps_are_clamped_to_eps_over_16_and_failures_query_the_antithetic() -> None:
    clean, seen, scores, result = released_run(budget=60)
    expected = kinds(scores)
    assert "antithetic" in expected and expected.count("step") > 10  # both kinds are exercised
    exact, free = 0, 0
    for k in range(2, len(seen)):
        if expected[k] == "antithetic":  # x − δ of the failed step, counted as a query
            assert torch.allclose(seen[k] - clean, clean - seen[k - 1], atol=TOL), f"query {k + 1}"
        else:  # one step from the point queried last, whatever its score
            move = (seen[k] - seen[k - 1]).abs()
            assert float(move.max()) <= EPS / 16 + TOL, f"query {k + 1} moved more than ε/16"
            unclipped = (seen[k - 1] - clean).abs() < EPS * 15 / 16 - TOL  # the ball cannot clip
            exact += int(((move - EPS / 16).abs() < TOL)[unclipped].sum())
            free += int(unclipped.sum())
    # U[−1, 1] clamped to ±ε/16 (ε/16 = 0.004 here): nearly every free value moves by ε/16
    assert free > 1000 and exact >= 0.98 * free
    assert int(result.queries[0]) == 60 == len(seen)


def test_released_antithetic_negates_the_step_before_it_is_cut_to_0_1() -> None:
    """As the reference: the antithetic of a failed step is x − δ with δ the ε-clipped step,
    so where [0,1] cut a step of a black value to nothing, its antithetic still moves."""
    images, labels = toy_batch(1, 20, 20, seed=3)
    images[0, :, :8] = 0.0
    model = Recorder()
    RandomAttack(budget=40, eps=16, variant="released").run(model, images, labels)
    seen = model.seen
    scores = [float(Proxy(4)(TinySegmenter().predict(x[None]), labels)[0]) for x in seen]
    moved = 0
    for k, kind in enumerate(kinds(scores)):
        if kind == "antithetic":
            black = (images[0] == 0) & (seen[k - 1] == 0)  # the step went to 0 or below there
            moved += int((seen[k][black] > 0).sum())  # below: the antithetic is above 0
    assert moved > 0, "x − δ was taken of the step after [0,1] cut it"


def test_released_reports_the_minimum_over_all_its_queries() -> None:
    _, seen, scores, result = released_run(budget=60)
    assert scores[-1] > min(scores), "the walk ends at its best query: pick another run"
    assert float(result.scores[0]) == pytest.approx(min(scores))
    assert result.history[0] == [min(scores[: k + 1]) for k in range(len(scores))]
    assert torch.equal(result.images[0], seen[scores.index(min(scores))])


def test_released_never_queries_an_antithetic_past_the_budget() -> None:
    _, seen, scores, _ = released_run(budget=60)
    expected = kinds(scores)
    # budgets whose last query is a failed step: the antithetic it calls for is not made
    cut = [k for k in range(1, 60) if expected[k] == "antithetic"]
    assert cut
    for budget in cut[:3]:
        _, short, _, result = released_run(budget=budget)
        assert len(short) == budget and int(result.queries[0]) == budget
        assert all(torch.equal(a, b) for a, b in zip(short, seen))


def test_released_checkpoints_equal_separate_runs() -> None:
    images, labels = toy_batch(2, 16, 16, seed=4)
    attack = RandomAttack(budget=24, seed=1, variant="released")
    long = attack.run(TinySegmenter(), images, labels, checkpoints=(5, 12, 24))
    for b in (5, 12, 24):
        short = RandomAttack(budget=b, seed=1, variant="released").run(TinySegmenter(), images, labels)
        assert torch.equal(long.checkpoints[b], confusion(short.predictions, labels, 4))
        assert torch.equal(long.checkpoint_images[b], short.images)
        assert [h[:b] for h in long.history] == short.history
