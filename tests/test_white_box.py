"""White-box reference attacks (pgd, segpgd, cospgd): the gradient path is declared, counted
and bounded like every query; they are refused where they cannot run, tabled apart from the
decision-based attacks, and SegPGD beats PGD at equal passes on the demo model as its paper
reports."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from segtk.benchmarks.attacks import white_box_gaps
from segtk.cli import cli
from segtk.core import (
    Attack,
    GradientAttack,
    ModelError,
    Oracle,
    Segmenter,
    SegmenterPlugin,
    SegtkError,
    confusion,
    hookimpl,
    load_dataset,
    load_segmenter,
    pixel_cross_entropy,
    read_image,
    registry,
    to_tensor,
)
from segtk.core._errors import AttackError
from segtk.core._metrics import mean_iou
from segtk.core._plugins import get_plugin_manager, reset_plugin_manager
from segtk.jobs.batching import batch_tensors
from segtk.testing import TinySegmenter, shared, toy_batch
from segtk.testing.attack_suite import every_query_checked

WHITE_BOX = ["pgd", "segpgd", "cospgd"]


class Passes(TinySegmenter):
    """Counts the rows of every forward-and-backward pass and of every plain prediction."""

    def __init__(self) -> None:
        super().__init__()
        self.gradient_rows = 0
        self.predicted_rows = 0

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        self.gradient_rows += images.shape[0]
        return super().differentiable_logits(images)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.predicted_rows += images.shape[0]
        return super().predict(images)


class LabelsOnly(Segmenter):
    """A model that answers with labels only: no logits, no gradients."""

    name = "labels-only"
    classes = TinySegmenter().classes

    def __init__(self) -> None:
        self.tiny, self.calls = TinySegmenter(), 0

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.tiny.predict(images)


class Detached(TinySegmenter):
    """Claims gradients but cuts the graph: a broken adapter."""

    def differentiable_logits(self, images: torch.Tensor) -> torch.Tensor:
        return super().differentiable_logits(images).detach()


# --- the gradient path: counted, bounded, declared -----------------------------------------------

@pytest.mark.parametrize("name", WHITE_BOX)
@pytest.mark.parametrize("budget", [1, 2, 7])
def test_each_forward_and_backward_pass_is_one_query(name: str, budget: int) -> None:
    images, labels = toy_batch(2, 12, 14, seed=1)
    model = Passes()
    result = registry.attack(name)(budget=budget).run(model, images, labels)
    assert result.queries.tolist() == [budget, budget]
    assert model.gradient_rows == 2 * budget and model.predicted_rows == 0
    assert [len(h) for h in result.history] == [budget, budget]


class Sneaky(Attack):
    """A decision-based attack (no white_box declaration) that asks for gradients."""

    name = "sneaky"

    def attack(self, oracle: Oracle) -> None:
        oracle.loss_and_grad(oracle.clean, lambda logits, y: logits.sum((1, 2, 3)))


def test_a_decision_based_attack_cannot_ask_for_gradients() -> None:
    images, labels = toy_batch(1, 8, 8)
    model = Passes()
    with pytest.raises(AttackError) as err:
        Sneaky(budget=3).run(model, images, labels)
    assert "attack 'sneaky' failed: a decision-based attack asked for gradients" in err.value.message
    assert "white_box = True" in (err.value.hint or "")
    assert model.gradient_rows == 0


@pytest.mark.parametrize("model", [LabelsOnly(), type("ScoresOnly", (LabelsOnly,), {
    "logits": lambda self, images: self.tiny.logits(images)})()])
def test_a_white_box_attack_is_refused_on_a_model_without_gradients(model: LabelsOnly) -> None:
    images, labels = toy_batch(1, 8, 8)
    with pytest.raises(SegtkError) as err:
        registry.attack("pgd")(budget=3).run(model, images, labels)
    assert err.value.message == ("attack 'pgd' is white-box: it needs the gradients of the "
                                 "model's logits, and model 'labels-only' gives none")
    assert "differentiable_logits" in (err.value.hint or "")
    assert model.calls == 0  # refused before the first query


class Unprojected(GradientAttack):
    """A white-box attack that forgets to project its step."""

    name = "unprojected"

    def pixel_loss(self, logits, targets, iteration, iterations):
        return pixel_cross_entropy(logits, targets)

    def attack(self, oracle: Oracle) -> None:
        loss = lambda logits, y: pixel_cross_entropy(logits, y.clamp(0, 3)).flatten(1).mean(1)  # noqa: E731
        x = oracle.clean.clone()
        for _ in range(oracle.budget):
            x = x + 4 * oracle.eps_unit * oracle.loss_and_grad(x, loss).grad.sign()


def test_every_gradient_pass_is_checked_against_the_ball() -> None:
    images, labels = toy_batch(1, 10, 10, seed=2)
    with pytest.raises(AttackError) as err:
        Unprojected(budget=3).run(TinySegmenter(), images, labels)
    assert "outside the ε-ball or [0,1]" in err.value.message


def test_logits_without_a_graph_are_the_models_fault() -> None:
    images, labels = toy_batch(1, 10, 10, seed=2)
    with pytest.raises(ModelError) as err:
        registry.attack("pgd")(budget=2).run(Detached(), images, labels)
    assert "without a gradient path to the images" in err.value.message


@pytest.mark.parametrize("name", WHITE_BOX)
def test_ignored_pixels_add_nothing_to_the_loss(name: str) -> None:
    """The ground truth's ignore index (and ids the logits lack) are left out, as in the papers."""
    logits = torch.randn(2, 4, 5, 6, generator=torch.Generator().manual_seed(0), requires_grad=True)
    labels = torch.randint(0, 4, (2, 5, 6), generator=torch.Generator().manual_seed(1))
    labels[0, :2] = 255
    labels[1, 4, :] = 7  # a class the logits do not have
    attack = registry.attack(name)()
    assert isinstance(attack, GradientAttack)
    loss = attack.image_loss(logits, labels, ignore_index=255, iteration=2, iterations=4)
    (grad,) = torch.autograd.grad(loss.sum(), logits)
    ignored = (labels == 255) | (labels == 7)
    assert bool((grad.abs().sum(1)[ignored] == 0).all())
    assert bool((grad.abs().sum(1)[~ignored] > 0).any())


# --- on the demo model: ε and [0,1] at every pass, determinism, SegPGD against PGD ---------------

@pytest.fixture(scope="module")
def demo() -> tuple[Segmenter, torch.Tensor, torch.Tensor]:
    model = load_segmenter("demo")
    x, y = batch_tensors(list(load_dataset("demo")), model.device)
    return model, x, y


@pytest.mark.parametrize("name", WHITE_BOX)
def test_every_pass_stays_in_the_ball_and_the_box_on_the_demo_model(demo, name: str) -> None:
    model, x, y = demo
    images = x[:2].clone()
    images[0, :, :40] = 0.0  # saturated regions: the box cuts the ball
    images[1, :, :40] = 1.0
    with every_query_checked(images, 8.0) as violations:
        result = registry.attack(name)(budget=3, eps=8).run(model, images, y[:2])
    assert not violations, violations[0]
    assert float((result.images - images).abs().max()) <= 8 / 255 + 1e-6
    assert float(result.images.min()) >= 0 and float(result.images.max()) <= 1


@pytest.mark.parametrize("name", WHITE_BOX)
def test_same_seed_same_result_other_seed_other_result_on_the_demo_model(demo, name: str) -> None:
    model, x, y = demo
    runs = [registry.attack(name)(budget=3, seed=s).run(model, x[:2], y[:2]) for s in (5, 5, 6)]
    assert torch.equal(runs[0].images, runs[1].images) and runs[0].history == runs[1].history
    assert not torch.equal(runs[0].images, runs[2].images)  # the random start follows the seed


def dataset_miou(result, labels: torch.Tensor, k: int) -> float:
    """Dataset mIoU of the best candidates' predictions (the papers' score)."""
    total = torch.stack([confusion(p, t, k)[0] for p, t in zip(result.predictions, labels)]).sum(0)
    return float(mean_iou(total))


def test_segpgd_beats_pgd_at_equal_passes_on_the_demo_model(demo) -> None:
    """SegPGD's claim (Gu et al. 2022): lower mIoU than PGD for the same iterations."""
    model, x, y = demo
    x, y, k = x[:4], y[:4], len(model.classes)
    for budget in (5, 10):  # at 5 and 10 passes, 4 points apart (seeds 0, 1 and 2 alike)
        pgd, segpgd = (dataset_miou(registry.attack(n)(budget=budget).run(model, x, y), y, k)
                       for n in ("pgd", "segpgd"))
        assert segpgd < pgd, f"{budget} passes: SegPGD {segpgd:.4f}, PGD {pgd:.4f}"


@pytest.mark.shared
def test_segpgd_beats_pgd_at_equal_passes_on_espnet_camvid() -> None:
    """The same claim on a real model: the first 3 CamVid val images, centre 180×240, 5 passes
    (seeds 0, 1 and 2: PGD 7.6 / 7.9 / 7.3, SegPGD 5.9 / 6.1 / 5.7 mIoU)."""
    model = load_segmenter(f"espnet:camvid={shared('models/espnet_camvid.safetensors')}")
    x, y = batch_tensors(list(load_dataset(f"camvid:{shared('data/camvid')}", limit=3)), model.device)
    x, y = x[:, :, 90:270, 120:360].contiguous(), y[:, 90:270, 120:360].contiguous()
    pgd, segpgd = (dataset_miou(registry.attack(n)(budget=5).run(model, x, y, num_classes=11), y, 11)
                   for n in ("pgd", "segpgd"))
    assert segpgd < pgd, f"SegPGD {segpgd:.4f}, PGD {pgd:.4f}"


# --- jobs, bench, report, plugins -----------------------------------------------------------------

@pytest.fixture
def models():
    """`--model tiny` (gives gradients) and `--model labels-only` (does not)."""
    reset_plugin_manager()
    plugin = types.SimpleNamespace(register_models=hookimpl(lambda register: [
        register(SegmenterPlugin("tiny", lambda arg: TinySegmenter(), "tiny", "--model tiny")),
        register(SegmenterPlugin("labels-only", lambda arg: LabelsOnly(), "labels-only",
                                 "--model labels-only"))]))
    get_plugin_manager().register(plugin, name="white-box-models")
    registry.reset()
    yield
    reset_plugin_manager()
    registry.reset()


@pytest.mark.parametrize("command", [
    ["attack", "--plugin", "pgd", "--budget", "3"],
    ["bench", "attacks", "--attacks", "random,segpgd", "--budgets", "3", "--repeats", "1"],
])
def test_cli_refuses_a_white_box_attack_on_a_labels_only_model_before_writing(
        models, folder_dataset: Path, tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, [*command, "--model", "labels-only", "--data",
                                   f"folder:{folder_dataset}", "--out", str(out)])
    assert res.exit_code != 0
    assert "is white-box: it needs the gradients of the model's logits" in res.output
    assert not out.exists()


def test_a_white_box_result_is_scored_on_the_stored_8bit_image(models, folder_dataset: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "a"
    res = CliRunner().invoke(cli, ["attack", "--plugin", "cospgd", "--budget", "4", "--model", "tiny",
                                   "--data", f"folder:{folder_dataset}", "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = load_dataset(f"folder:{folder_dataset}")
    for line in (out / "results.jsonl").read_text().splitlines():
        rec = json.loads(line)
        stored = read_image(out / "images" / f"{rec['image']}.png")
        label = torch.from_numpy(data.subset(names=[rec["image"]])[0].label).long()
        decided = TinySegmenter().predict(to_tensor([stored]))[0]
        assert rec["adv_confusion"] == confusion(decided, label, 4)[0].tolist()
        assert rec["queries"] == 4 and rec["linf"] <= 8


def test_bench_tables_white_box_apart_and_prints_the_gap(models, folder_dataset: Path,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "b"
    res = CliRunner().invoke(cli, ["bench", "attacks", "--attacks", "random,pgd", "--budgets", "2,4",
                                   "--repeats", "1", "--model", "tiny", "--data",
                                   f"folder:{folder_dataset}", "--executor", "inline",
                                   "--out", str(out), "--report"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = res.output
    decision, white = text.index("dataset mIoU %"), text.index("white-box reference attacks")
    gap = text.index("gap to white-box")
    assert decision < white < gap
    assert "pgd" not in text[decision:white] and "random" not in text[white:gap]
    rows = list(json.loads((out / "table.json").read_text()))
    by = {(r["attack"], r["budget"]): r for r in rows}
    for b in (2, 4):
        expected = by[("random", b)]["miou_mean"] - by[("pgd", b)]["miou_mean"]
        assert f"{expected:+.2f} (pgd)" in text[gap:]
    assert {r["attack"]: r["white_box"] for r in rows} == {"clean": False, "random": False, "pgd": True}
    header, *lines = (out / "table.csv").read_text().splitlines()
    assert header.endswith(",white_box") and all(line.endswith(",True") == (",pgd," in line)
                                                  for line in lines)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r.get("white_box", False) == (r["attack"] == "pgd") for r in records)
    html = (out / "report.html").read_text()
    assert 'pgd <span class="tag">white-box</span>' in html and "gap-table" in html
    pgd_row = html[html.index('pgd <span class="tag">'):]
    assert "best" not in pgd_row[:pgd_row.index("</tr>")]  # never marked the strongest


def test_white_box_gaps_measure_against_the_best_white_box_at_the_same_budget_and_eps() -> None:
    def row(attack, budget, miou, eps=8.0, white=False):
        return {"model": "m", "attack": attack, "eps": eps, "budget": budget, "miou_mean": miou,
                "white_box": white}

    rows = [row("clean", 0, 70.0, eps=None), row("dla", 10, 40.0), row("dla", 50, 30.0),
            row("dla", 10, 50.0, eps=4.0), row("pgd", 10, 20.0, white=True),
            row("segpgd", 10, 15.0, white=True), row("pgd", 50, 5.0, white=True),
            row("cospgd", 50, 5.0, white=True),  # a tie: the first listed stays the reference
            row("pgd", 10, 35.0, eps=16.0, white=True)]
    assert white_box_gaps(rows) == [
        {"model": "m", "attack": "dla", "eps": 8.0, "budget": 10, "gap": 25.0, "reference": "segpgd"},
        {"model": "m", "attack": "dla", "eps": 8.0, "budget": 50, "gap": 25.0, "reference": "pgd"}]
    assert white_box_gaps([r for r in rows if not r["white_box"]]) == []


def test_plugins_marks_the_white_box_attacks() -> None:
    res = CliRunner().invoke(cli, ["plugins", "--json"])
    listed = {r["name"]: r.get("white_box", False) for r in json.loads(res.output)
              if r["kind"] == "attack"}
    assert {n for n, white in listed.items() if white} == set(WHITE_BOX)
    shown = CliRunner().invoke(cli, ["plugins", "show", "segpgd"]).output
    assert "white-box: reads the gradients of the model's logits" in shown

