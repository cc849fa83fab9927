"""`segtk evaluate` / `segtk.evaluate`: the protocol's runs, then the card.

The work is done by the benchmarks segtk already has, each in its own sub-run of OUT (so
their sharding over the local pool or Ray, their records and their --resume apply as they
are): OUT/black-box (`bench attacks` with the decision-based ensemble), OUT/white-box (`bench
attacks` with the gradient attacks, only for a model with gradients and labelled data) and
OUT/edits (`bench edits`, labelled data only). The card is computed from their records.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch

from segtk import __version__
from segtk.api.attacks import bench_attacks, with_reference
from segtk.api.edits import bench_edits
from segtk.benchmarks.attacks import bench_records
from segtk.core import SegtkError, load_dataset, registry
from segtk.core._device import resolve_device
from segtk.core._specs import UNLABELLED, cached_segmenter
from segtk.evaluation.card import (
    CARD_JSON,
    CARD_VERSION,
    KIND,
    attack_section,
    clean_section,
    data_sha256,
    edits_section,
    headline,
    model_identity,
    protocol_record,
    write_card,
)
from segtk.evaluation.page import write_card_page
from segtk.evaluation.protocol import Profile, profile_of
from segtk.storage import layout
from segtk.storage.runs import RunDir, read_results

BLACK_BOX, WHITE_BOX, EDITS = "black-box", "white-box", "edits"


class EvaluateRun(RunDir):
    """OUT of `segtk evaluate`: its sub-runs and the card are what --resume continues."""

    RESULTS: ClassVar[tuple[str, ...]] = (CARD_JSON, BLACK_BOX, WHITE_BOX, EDITS)
    HOLDS = "an evaluation"


def evaluate(model: str, data: str = "demo", profile: str = "quick",
             out: str | Path | None = None, *, split: str | None = None,
             limit: int | None = None, eps: list[float] | None = None,
             device: str | None = "cpu", executor: str = "local", workers: int | None = None,
             address: str | None = None, resume: bool = False, batch_size: int = 8,
             chunk: int = 8, classes_from_data: bool = False, html: bool = True,
             on_stage: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the robustness protocol's `profile` (quick, standard, paper) on
    `model` (a --model spec) and `data`; return the card (what OUT/card.json holds).

    `out`: the run folder (sub-runs, card.json, card.html; resumable with `resume=True`);
    None runs in a temporary folder and keeps only the returned card. `eps` replaces the
    profile's ε grid. `executor`, `workers`, `address` shard every sub-run as `bench attacks`
    does (local pool or Ray); the card is the same whichever ran it.
    """
    chosen = profile_of(profile, eps)
    if out is None:
        if resume:
            raise SegtkError("resume=True needs the run folder to resume", hint="pass out=FOLDER")
        with tempfile.TemporaryDirectory(prefix="segtk-evaluate-") as tmp:
            return _evaluate(model, data, chosen, Path(tmp), split, limit, device, executor,
                             workers, address, False, batch_size, chunk, classes_from_data,
                             False, on_stage)
    return _evaluate(model, data, chosen, Path(out), split, limit, device, executor, workers,
                     address, resume, batch_size, chunk, classes_from_data, html, on_stage)


def _evaluate(model: str, data: str, chosen: Profile, out: Path, split: str | None,
              limit: int | None, device: str | None, executor: str, workers: int | None,
              address: str | None, resume: bool, batch_size: int, chunk: int,
              classes_from_data: bool, html: bool,
              on_stage: Callable[[str], None] | None) -> dict[str, Any]:
    if not isinstance(model, str):
        raise SegtkError("segtk.evaluate takes a model spec (as --model), not a loaded model",
                         hint="e.g. 'espnet:camvid=W.safetensors', or a TorchScript file: "
                              "'torchscript:net.pt'")
    stage = on_stage or (lambda _: None)
    where = str(resolve_device(device))
    dataset = load_dataset(data, split, limit, unlabelled=True)
    label_free = bool(dataset.extra.get(UNLABELLED))
    reference = "prediction" if label_free else "labels"
    config = {"protocol": protocol_record(chosen), "model": model, "data": data, "split": split,
              "limit": limit, "device": where,
              **({"classes_from_data": True} if classes_from_data else {})}
    with EvaluateRun(out, config, resume, kind="evaluate"):
        (out / CARD_JSON).unlink(missing_ok=True)  # a card only for finished sub-runs
        stage(f"black-box ensemble: {', '.join(chosen.black_box)} at budgets "
              f"{', '.join(map(str, chosen.budgets))}")
        bench_attacks([model], attacks=list(chosen.black_box), budgets=list(chosen.budgets),
                      eps=list(chosen.eps), repeats=chosen.repeats, seed=chosen.seed,
                      out=out / BLACK_BOX, batch_size=batch_size, chunk=chunk,
                      reference=reference, data=data, split=split, limit=limit, device=where,
                      executor=executor, workers=workers, address=address, resume=resume,
                      classes_from_data=classes_from_data)
        labels = [with_reference(a, reference) for a in chosen.black_box]
        black = _records(out / BLACK_BOX)
        gradients = cached_segmenter(model, where).has_gradients
        white: list = []
        if gradients and not label_free:
            stage(f"white-box floor: {', '.join(chosen.white_box)} at "
                  f"{chosen.white_box_passes} passes")
            bench_attacks([model], attacks=list(chosen.white_box),
                          budgets=[chosen.white_box_passes], eps=list(chosen.eps),
                          repeats=chosen.repeats, seed=chosen.seed, out=out / WHITE_BOX,
                          batch_size=batch_size, chunk=chunk, data=data, split=split,
                          limit=limit, device=where, executor=executor, workers=workers,
                          address=address, resume=resume, classes_from_data=classes_from_data)
            white = _records(out / WHITE_BOX)
        edits: dict[str, Any] = {"ran": False}
        missing = None if label_free else editors_missing(chosen.edits)
        if label_free:
            edits["reason"] = "no labels: the edit benchmark scores against the ground truth"
        elif missing:
            edits["reason"] = missing
        else:
            stage(f"attribute edits: {', '.join(chosen.edits)}")
            bench_edits([model], attributes=list(chosen.edits), out=out / EDITS,
                        seed=chosen.seed, chunk=chunk, data=data, split=split, limit=limit,
                        device=where, executor=executor, workers=workers, address=address,
                        resume=resume, classes_from_data=classes_from_data)
            table = read_json(out / EDITS / layout.TABLE_JSON)
            edits = edits_section(table, model, chosen.edits)
        images = dataset.names
        card: dict[str, Any] = {
            "kind": KIND, "card_version": CARD_VERSION,
            "protocol": protocol_record(chosen),
            "model": model_identity(model),
            "data": {"spec": data, "split": split, "limit": limit, "images": len(images),
                     "names": images, "classes": list(dataset.classes),
                     "sha256": data_sha256(dataset), "scored_against": reference},
            "device": where, "versions": {"segtk": __version__, "torch": _torch_version()},
            "label_free": label_free,
            "clean": clean_section(black, images),
            "black_box": attack_section(black, labels, chosen.eps, chosen.budgets, images),
            "white_box": ({"ran": True, "attacks": list(chosen.white_box),
                           "passes": chosen.white_box_passes,
                           "results": attack_section(white, chosen.white_box, chosen.eps,
                                                     [chosen.white_box_passes], images)}
                          if white else
                          {"ran": False, "reason": "no labels: the white-box losses need them"
                           if label_free else "the model gives no gradients"}),
            "edits": edits,
        }
        card["headline"] = headline(card)
        write_card(card, out)
        if html:
            write_card_page(card, out, dataset)
    return card


def editors_missing(names: tuple[str, ...]) -> str | None:
    """Why the profile's editors cannot run here (one not installed, or its dependency
    missing: the `edit` extra), or None; the card then says edits were not run, and why."""
    for name in names:
        try:
            registry.plugin_class("editor", name)
        except SegtkError as exc:
            return exc.message + (f" ({exc.hint})" if exc.hint else "")
    return None


def _records(run: Path) -> list:
    return bench_records(read_results(run / layout.RESULTS, key="key").values(), run / layout.RESULTS)


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())


def _torch_version() -> str:
    return str(torch.__version__)


__all__ = ["BLACK_BOX", "EDITS", "WHITE_BOX", "evaluate"]
