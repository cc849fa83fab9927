"""`segtk evaluate` (a robustness card for one model) and `segtk leaderboard` (cards ranked)."""

from __future__ import annotations

from pathlib import Path

import click

from segtk.commands.console import console, quiet_option, result_line, table
from segtk.commands.options import (
    checked_eps,
    classes_from_data_option,
    data_option,
    device_option,
    limit_option,
    max_pixels_option,
    model_option,
    shard_options,
    split_option,
)
from segtk.core import SegtkError, convert
from segtk.evaluation import PROFILES
from segtk.evaluation import evaluate as run_evaluate
from segtk.evaluation import leaderboard as run_leaderboard
from segtk.evaluation.card import CARD_JSON
from segtk.evaluation.page import CARD_HTML
from segtk.storage import layout
from segtk.storage.runs import load_run_file

# options --resume may leave out: read from OUT/run.json (where the evaluate config holds them)
RESUMED = {"model_spec": "model", "data_spec": "data", "split": "split", "limit": "limit",
           "device": "device"}


def _eps(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float] | None:
    if value is None:
        return None
    try:
        values = convert(value, list[float], "--eps")
    except SegtkError as exc:
        raise click.BadParameter(exc.message) from exc
    return [checked_eps(v) for v in values]  # the one ε rule of segtk attack and the API


@click.command("evaluate")
@model_option
@data_option
@split_option
@limit_option
@max_pixels_option
@classes_from_data_option
@device_option
@click.option("--profile", "profile_name", type=click.Choice(list(PROFILES)), default="quick",
              show_default=True, help="Which fixed grid of the protocol to run (see docs/evaluate.md).")
@click.option("--eps", default=None, callback=_eps, metavar="E[,E...]",
              help="Replace the profile's ε grid (0–255 scale); the card then ranks only with "
                   "cards of the same grid.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@shard_options
@click.option("--out", type=click.Path(file_okay=False), default="runs/evaluate", show_default=True)
@click.option("--resume", is_flag=True,
              help="Continue a killed run in OUT (options left out are read from OUT/run.json).")
@quiet_option
@click.pass_context
def evaluate(ctx: click.Context, model_spec, data_spec, split, limit, classes_from_data, device,
             profile_name, eps, batch_size, chunk, executor, workers, address, out, resume):
    """Run the robustness protocol on one model; write a robustness card (card.json, card.html).

    Clean mIoU, the decision-based ensemble's per-image worst case at each budget of the
    profile, the white-box floor (models with gradients), attribute edits (mR).

    \b
    Examples:
      segtk evaluate --model demo --data demo --profile quick --out runs/card-demo
      segtk evaluate --model espnet:camvid=W.safetensors --data camvid:DATA --limit 20 \\
          --profile quick --out runs/card-espnet
      segtk evaluate --out runs/card-espnet --resume        # after a kill
    """
    given = {k: ctx.params[k] for k in RESUMED}
    recorded = ((load_run_file(Path(out) / layout.RUN) or {}).get("config") or {}) if resume else {}
    for option, key in RESUMED.items():
        if recorded and ctx.get_parameter_source(option) == click.core.ParameterSource.DEFAULT \
                and key in recorded:
            given[option] = recorded[key]
    if recorded and ctx.get_parameter_source("profile_name") == click.core.ParameterSource.DEFAULT:
        profile_name = recorded["protocol"]["profile"]["name"].split("+")[0]
        if eps is None and recorded["protocol"]["profile"]["name"].endswith("+eps"):
            eps = recorded["protocol"]["profile"]["eps"]
    card = run_evaluate(given["model_spec"], given["data_spec"], profile_name, out,
                        split=given["split"], limit=given["limit"], eps=eps,
                        device=given["device"], executor=executor, workers=workers,
                        address=address, resume=resume, batch_size=batch_size, chunk=chunk,
                        classes_from_data=classes_from_data,
                        on_stage=lambda text: console.print(f"[bold]{text}[/]"))
    print_card(card)
    result_line(str(Path(out) / CARD_JSON))
    result_line(str(Path(out) / CARD_HTML))


def print_card(card: dict) -> None:
    proto = card["protocol"]
    against = card["data"]["scored_against"]
    title = (f"{card['model']['spec']} — {proto['name']} {proto['version']}, profile "
             f"{proto['profile']['name']}, {card['data']['images']} images, scored against {against}")
    floor = {r["eps"]: r["miou"] for r in card["white_box"].get("results", [])}
    rows = [[f"{r['eps']:g}", r["budget"], card["clean"]["miou"], r["miou"], r["image_miou"],
             r["queries"], floor.get(r["eps"], "–")] for r in card["black_box"]]
    console.print(table(title, ["ε", "budget", "clean mIoU %", "worst-case mIoU %",
                                "mean per-image %", "queries", "white-box floor %"], rows))
    if card["edits"]["ran"]:
        console.print(table("attribute edits", ["attribute", "mIoU %", "mR"],
                            [[a, v["miou"], v["mr"]] for a, v in card["edits"]["attributes"].items()]
                            + [["overall (mean of groups)", "", card["edits"]["mr"]]]))
    elif card["edits"].get("reason"):
        console.print(f"edits not run: {card['edits']['reason']}")
    if card["label_free"]:
        console.print("label-free: every score is against the model's clean prediction")


@click.command("leaderboard")
@click.argument("cards", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--out", type=click.Path(file_okay=False), default="runs/leaderboard", show_default=True)
@quiet_option
def leaderboard(cards, out):
    """Rank robustness cards of one protocol version and dataset (HTML, CSV, JSON).

    CARDS: card.json files or `segtk evaluate` folders; writes OUT/leaderboard.html
    (sortable), .csv and .json.

    \b
    Examples:
      segtk leaderboard runs/card-espnet runs/card-segformer --out runs/leaderboard
    """
    rows = run_leaderboard(list(cards), out)
    robust = list(rows[0]["robust"])
    console.print(table(f"ranked by worst-case robust mIoU % at {robust[-1]} (higher: more robust)",
                        ["rank", "model", "clean", *robust, "white-box floor", "mR"],
                        [[r["rank"], r["model"], r["clean_miou"], *(r["robust"][c] for c in robust),
                          "–" if r["white_box_floor"] is None else r["white_box_floor"], r["mr"]]
                         for r in rows]))
    for name in ("leaderboard.html", "leaderboard.csv", "leaderboard.json"):
        result_line(str(Path(out) / name))
