"""`segtk attack` over a dataset: batches, stored 8-bit images, per-image results, resume.

What counts is the saved 8-bit PNG: the attack's image is quantised so it still satisfies ε,
and the clean and stored images are then scored by one plain (uncounted) evaluation pass —
evaluation is not part of the attacker's budget, which `queries` reports exactly.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from segtk.core import (
    Attack,
    AttackParams,
    AttackResult,
    ConfusionAccumulator,
    Dataset,
    Item,
    LabelConfusion,
    ModelError,
    Segmenter,
    SegtkError,
    check_prediction,
    registry,
    to_tensor,
    write_png,
)
from segtk.core._data import default_palette
from segtk.core._errors import AttackError, naming
from segtk.core._metrics import mean_iou, pixel_accuracy
from segtk.imaging import overlay
from segtk.jobs.batching import batch_tensors, same_size_batches
from segtk.storage import layout
from segtk.storage.records import Record
from segtk.storage.runs import Records


@dataclass(kw_only=True)
class AttackRecord(Record):
    """One image of `segtk attack`: a line of OUT/results.jsonl. Scores are fractions in
    [0, 1] of the stored 8-bit image (`adv_*`) and the clean one; `queries` is what the attack
    spent (the clean query counts); `linf` the stored image's L∞ distance on the 0–255 scale;
    `attack_proxy` the attack's own best score (None if it made no query) and `history` its
    best proxy after each query;
    the confusions are [true, predicted] pixel counts, which summaries add up."""

    KIND = "segtk attack record"
    OMIT_DEFAULT = ("stopped", "scored_against")  # runs made before them have none

    image: str
    clean_miou: float
    adv_miou: float
    clean_pacc: float
    adv_pacc: float
    queries: int
    linf: int
    attack_proxy: float | None  # None: the attack made no query, so it has no score
    history: list[float]
    clean_confusion: list[list[int]]
    adv_confusion: list[list[int]]
    stopped: str | None = None  # "time": a time limit stopped the attack
    # what the scores are of: the image's "labels" (ground truth), or, for an image without
    # any (only with reference=prediction), the clean image's "prediction"
    scored_against: str = "labels"


def scoring_labels(y: torch.Tensor, clean_pred: torch.Tensor, num_classes: int,
                   ignore_index: int, reference: str) -> tuple[torch.Tensor, list[str]]:
    """The labels [B,H,W] a job scores images against, and per image which ("labels" or
    "prediction"): the ground truth where the image has any; with reference=prediction, an
    image without a labelled pixel (an unlabelled dataset's) is scored against its clean
    prediction instead, so its clean mIoU is 100% and its adversarial one the agreement kept."""
    if reference != "prediction":
        return y, ["labels"] * y.shape[0]
    flat = y.reshape(y.shape[0], -1)
    labelled = ((flat >= 0) & (flat < num_classes) & (flat != ignore_index)).any(dim=1).tolist()
    chosen = torch.stack([y[i] if has else clean_pred[i].to(y.device)
                          for i, has in enumerate(labelled)])
    return chosen, ["labels" if has else "prediction" for has in labelled]


def image_seed(seed: int, name: str) -> int:
    """Each image's random stream depends only on the run seed and its name (batch-invariant)."""
    return zlib.crc32(f"{seed}:{name}".encode())


def quantise(adv: torch.Tensor, clean_u8: np.ndarray, eps: float) -> np.ndarray:
    """Round to 8 bits without leaving the ε-ball around the (8-bit) clean image.

    round(255·adv) clamped to clean ± ⌊ε⌋ and [0,255] ([B,H,W,3] uint8). Done in the image's
    float dtype with one clamp to tensor bounds (NaN goes to the lower bound): 12x faster than
    in int64, and it runs once per stored image."""
    step = float(math.floor(eps + 1e-9))
    b, c, h, w = adv.shape
    q = torch.empty((b, h, w, c), dtype=adv.dtype)  # HWC, filled by one transposing multiply
    torch.mul(adv.detach().cpu().permute(0, 2, 3, 1), 255.0, out=q).round_().nan_to_num_(nan=-1.0)
    clean = torch.from_numpy(np.ascontiguousarray(clean_u8)).to(adv.dtype)
    lo, hi = (clean - step).clamp_(min=0.0), clean.add_(step).clamp_(max=255.0)
    return torch.clamp(q, lo, hi, out=q).numpy().astype(np.uint8)  # integers in [0,255]: exact


KEPT = "results written so far are kept"
MODEL_HINT = f"{KEPT}; fix the model and rerun with --resume"


def run_attack(attack: Attack, segmenter: Segmenter, x: torch.Tensor, y: torch.Tensor,
               names: list[str], **options: Any) -> AttackResult:
    """`attack.run` on the images `names`, failing with one line that names the culprit: the
    attack plugin (and its distribution), or the model (Attack.run tells them apart)."""
    context = f"while attacking {', '.join(names)}"
    try:
        return attack._run(segmenter, x, y, **options)  # the job checked it can, once
    except AttackError as exc:
        source = registry.origin("attack", type(attack))
        who = f"attack {attack.name!r}" + (f" from {source}" if source else "")
        fix = (f"a bug in {who}, not in the model: fix it or report it to its authors "
               f"(see `segtk plugins`); {KEPT} (--resume)")
        raise AttackError(f"{context}: {who} {exc.what}",
                          f"{exc.hint}; {fix}" if exc.hint else fix) from exc
    except SegtkError as exc:  # the model's (Attack.run blames all else on the attack)
        raise type(exc)(f"{context}: {exc.message}", exc.hint or MODEL_HINT) from exc


def run_settings(params: AttackParams) -> dict[str, Any]:
    """An attack's settings as run.json records them: its parameters, and a time limit under
    its own key, only when one is set (so runs made before time limits resume unchanged, and a
    resume with another limit is refused naming it). `returns` is recorded only when it is
    "iterate": runs made before it existed returned their best candidate and resume unchanged."""
    values = dict(params.__dict__)
    if values.get("returns") == "best":
        del values["returns"]
    if values.get("reference") == "labels":  # likewise: runs made before it scored labels
        del values["reference"]
    limit = values.pop("time_limit", None)
    return {"params": values, **({"time_limit": limit} if limit is not None else {})}


def evaluate(segmenter: Segmenter, images: torch.Tensor) -> torch.Tensor:
    return check_prediction(images, segmenter.predict(images), segmenter)


@dataclass
class Summary:
    clean: ConfusionAccumulator
    adv: ConfusionAccumulator
    records: list[AttackRecord] = field(default_factory=list)

    @property
    def table(self) -> dict[str, float]:
        n = max(len(self.records), 1)
        return {
            "images": len(self.records),
            "clean_miou": self.clean.miou,
            "adv_miou": self.adv.miou,
            "clean_pacc": self.clean.pacc,
            "adv_pacc": self.adv.pacc,
            "clean_image_miou": sum(r.clean_miou for r in self.records) / n,
            "adv_image_miou": sum(r.adv_miou for r in self.records) / n,
            "mean_queries": sum(r.queries for r in self.records) / n,
            "max_linf": max((r.linf for r in self.records), default=0),
        }


def summarise(records: list[AttackRecord], num_classes: int) -> Summary:
    summary = Summary(ConfusionAccumulator(num_classes), ConfusionAccumulator(num_classes))
    for rec in records:
        summary.clean.add_confusion(torch.tensor(rec.clean_confusion))
        summary.adv.add_confusion(torch.tensor(rec.adv_confusion))
        summary.records.append(rec)
    return summary


def attack_dataset(
    attack: Attack,
    segmenter: Segmenter,
    dataset: Dataset,
    run: Records,
    batch_size: int = 1,
    save_images: bool = True,
    on_image: Callable[[AttackRecord], None] | None = None,
    on_stored: Callable[[str, np.ndarray], None] | None = None,
    on_queries: Callable[[int], None] | None = None,
) -> Summary:
    """Attack every image not yet in results.jsonl; return the summary over the whole set.
    `on_stored(name, image)` sees each stored 8-bit adversarial image (what the scores are
    computed on; the Python API keeps them in memory when it writes no files).
    `on_queries(n)` follows the progress in image-queries, `budget` per image: as the model
    answers during a batch, not only when its images finish (see QuerySlots). The caller has
    checked the job's preconditions once, before writing anything (`segtk.attack` and `bench
    attacks`: the classes with check_compatible, a white-box attack's gradients with
    check_gradients); batches run without checking them again."""
    done = AttackRecord.keyed(run.done(), run.path and run.path / layout.RESULTS)  # None: in memory
    pending = [i for i, name in enumerate(dataset.names) if name not in done]
    palette = dataset.palette if dataset.palette is not None else default_palette(len(dataset.classes))
    budget = attack.params.budget  # progress per image (budget_rule=reference spends more: capped)
    for name in dataset.names:
        if name in done:
            if on_queries:
                on_queries(budget)
            if on_image:
                on_image(done[name])
    for batch in same_size_batches(dataset, pending, batch_size):
        slots = QuerySlots(len(batch) * budget, on_queries)
        for record in _attack_batch(attack, segmenter, dataset, batch, run.path, save_images,
                                    palette, on_stored, slots):
            run.append(record.to_json())
            done[record.image] = record
            if on_image:
                on_image(record)
    return summarise([done[n] for n in dataset.names], len(dataset.classes))


class QuerySlots:
    """One batch's progress in image-queries: `budget` slots per image. The rows the model is
    asked about during the attack fill them (an evaluation pass, e.g. of an attack's declared
    iterate, counts too: hence the cap); `finish` fills what early stops left unspent, so the
    progress reaches images x budget exactly."""

    def __init__(self, total: int, tell: Callable[[int], None] | None) -> None:
        self.left = total
        self.tell = tell

    def spend(self, rows: int) -> None:
        n = min(rows, self.left)
        if n > 0 and self.tell:
            self.left -= n
            self.tell(n)

    def finish(self) -> None:
        self.spend(self.left)


_UNSET = object()


@contextmanager
def counting_queries(segmenter: Segmenter, tell: Callable[[int], None]) -> Iterator[None]:
    """Call `tell(rows)` on each call of the model's `predict` and `differentiable_logits`
    inside the block: instance attributes shadow the methods for its duration (the class, and
    so `has_gradients`, stays as it is). A model that takes no new attributes is not followed;
    its progress then moves when each batch ends."""
    shadowed: dict[str, Any] = {}
    for name in ("predict", "differentiable_logits"):
        method = getattr(segmenter, name)

        def counted(images: torch.Tensor, _method: Callable[..., Any] = method) -> Any:
            tell(int(images.shape[0]))
            return _method(images)

        before = getattr(segmenter, "__dict__", {}).get(name, _UNSET)
        try:
            setattr(segmenter, name, counted)
        except (AttributeError, TypeError):
            continue
        shadowed[name] = before
    try:
        yield
    finally:
        for name, before in shadowed.items():
            if before is _UNSET:
                delattr(segmenter, name)
            else:
                setattr(segmenter, name, before)


def _attack_batch(attack, segmenter, dataset, batch: list[Item], out: Path | None, save_images,
                  palette, on_stored, slots: QuerySlots | None = None) -> Iterator[AttackRecord]:
    names = [item.name for item in batch]
    clean_u8 = np.stack([item.image for item in batch])
    x, y = batch_tensors(batch, segmenter.device)
    seeds = [image_seed(attack.params.seed, n) for n in names]
    slots = slots or QuerySlots(0, None)
    with counting_queries(segmenter, slots.spend):
        result = run_attack(attack, segmenter, x, y, names, seeds=seeds,
                            num_classes=len(dataset.classes), ignore_index=dataset.ignore_index)
    slots.finish()
    with naming(f"while attacking {', '.join(names)}", ModelError, "the model", hint=MODEL_HINT):
        stored = quantise(result.images, clean_u8, attack.params.eps)
        clean = result.clean_predictions
        clean_pred = (clean if clean is not None else evaluate(segmenter, x)).cpu()
        adv_pred = evaluate(segmenter, to_tensor(list(stored)).to(segmenter.device)).cpu()
    k, ignore, n = len(dataset.classes), dataset.ignore_index, len(batch)
    truth, against = scoring_labels(y.cpu(), clean_pred, k, ignore, attack.params.reference)
    both = LabelConfusion(truth, k, ignore)(torch.cat([clean_pred, adv_pred]), torch.arange(2 * n) % n)
    for i, item in enumerate(batch):
        clean_conf, adv_conf = both[i], both[n + i]
        if save_images and out is not None:  # (a run in memory saves none)
            write_png(out / layout.IMAGES / f"{item.name}.png", stored[i])
            write_png(out / layout.OVERLAYS / f"{item.name}_clean.png",
                      overlay(item.image, clean_pred[i].numpy(), palette, ignore_index=ignore))
            write_png(out / layout.OVERLAYS / f"{item.name}_adv.png",
                      overlay(stored[i], adv_pred[i].numpy(), palette, ignore_index=ignore))
        if on_stored:
            on_stored(item.name, stored[i])
        linf = int(np.abs(stored[i].astype(np.int16) - item.image.astype(np.int16)).max())
        yield AttackRecord(
            image=item.name,
            clean_miou=_num(mean_iou(clean_conf)),
            adv_miou=_num(mean_iou(adv_conf)),
            clean_pacc=_num(pixel_accuracy(clean_conf)),
            adv_pacc=_num(pixel_accuracy(adv_conf)),
            queries=int(result.queries[i]),
            linf=linf,
            attack_proxy=_finite(float(result.scores[i])),
            history=[round(v, 6) for v in result.history[i]],
            clean_confusion=clean_conf.tolist(),
            adv_confusion=adv_conf.tolist(),
            stopped=result.stopped[i] or None,  # "time"
            scored_against=against[i],
        )


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _num(value: torch.Tensor) -> float:
    v = float(value)
    return 0.0 if math.isnan(v) else v
