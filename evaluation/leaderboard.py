"""`segtk leaderboard`: cards of one protocol version and dataset, ranked.

Rows are models, ranked by the ensemble's worst-case dataset mIoU at the profile's largest
budget and ε (higher is more robust), with one column per ε and budget, clean mIoU, the
white-box floor and mR, and a link to each card. Cards of different protocol versions,
profiles or data are refused, naming them: their numbers do not compare.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from segtk.core import SegtkError, atomic_write_bytes
from segtk.core._specs import brief_spec
from segtk.evaluation.card import CARD_JSON, read_card
from segtk.evaluation.page import CARD_HTML, _environment
from segtk.storage.runs import atomic_write_json

LEADERBOARD_HTML, LEADERBOARD_CSV, LEADERBOARD_JSON = "leaderboard.html", "leaderboard.csv", "leaderboard.json"


def _where(path: Path) -> Path:
    return path / CARD_JSON if path.is_dir() else path


def check_comparable(cards: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    """Refuse cards that differ in protocol (name, version, profile) or data (sha256)."""
    first_path, first = cards[0]

    def protocol(card: dict[str, Any]) -> str:
        p = card["protocol"]
        return f"{p['name']} {p['version']} profile {p['profile']['name']}"

    for path, card in cards[1:]:
        if protocol(card) != protocol(first) or card["protocol"] != first["protocol"]:
            raise SegtkError(f"{_where(path)} ran {protocol(card)}, {_where(first_path)} ran "
                             f"{protocol(first)}: their numbers do not compare",
                             hint="rank cards of one protocol version and profile (rerun "
                                  "segtk evaluate with the same --profile)")
        if card["data"]["sha256"] != first["data"]["sha256"] \
                or card["data"]["scored_against"] != first["data"]["scored_against"]:
            raise SegtkError(f"{_where(path)} is on data {card['data']['spec']} "
                             f"({card['data']['images']} images, sha256 {card['data']['sha256'][:12]}, "
                             f"against {card['data']['scored_against']}), {_where(first_path)} on "
                             f"{first['data']['spec']} ({first['data']['images']} images, sha256 "
                             f"{first['data']['sha256'][:12]}, against "
                             f"{first['data']['scored_against']})",
                             hint="rank cards made on the same images (same --data, --split and --limit)")


def leaderboard(cards: Sequence[str | Path], out: str | Path) -> list[dict[str, Any]]:
    """Rank the cards (card.json files or `segtk evaluate` folders); write OUT/leaderboard.html,
    .csv and .json; return the rows, best first."""
    if not cards:
        raise SegtkError("no cards to rank", hint="pass card.json files or segtk evaluate --out folders")
    loaded = [(Path(c), read_card(Path(c))) for c in cards]
    check_comparable(loaded)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    columns = [(r["eps"], r["budget"]) for r in loaded[0][1]["black_box"]]
    key = max(columns)
    rows = []
    for path, card in loaded:
        robust = {(r["eps"], r["budget"]): r["miou"] for r in card["black_box"]}
        floor = card["white_box"]["results"][-1]["miou"] if card["white_box"]["ran"] else None
        page = _where(path).parent / CARD_HTML
        rows.append({"model": card["model"]["spec"], "model_sha256": card["model"]["sha256"],
                     "clean_miou": card["clean"]["miou"],
                     "robust": {f"eps={e:g} budget={b}": robust.get((e, b)) for e, b in columns},
                     "white_box_floor": floor, "mr": card["edits"].get("mr"),
                     "card": Path(os.path.relpath(page, out_dir)).as_posix()
                     if page.exists() else None,
                     "_key": robust.get(key)})
    rows.sort(key=lambda r: (-(r["_key"] if r["_key"] is not None else float("-inf")), r["model"]))
    for rank, row in enumerate(rows, 1):
        row.pop("_key")
        row["rank"] = rank
    first = loaded[0][1]
    meta = {"protocol": first["protocol"], "data": {k: first["data"][k] for k in
                                                    ("spec", "split", "limit", "images", "sha256",
                                                     "scored_against")},
            "ranked_by": f"eps={key[0]:g} budget={key[1]}", "rows": rows}
    atomic_write_json(out_dir / LEADERBOARD_JSON, meta, indent=1)
    _write_csv(rows, [f"eps={e:g} budget={b}" for e, b in columns], out_dir / LEADERBOARD_CSV)
    html = _environment().get_template("leaderboard.html.j2").render(
        **_context(meta, [f"eps={e:g} budget={b}" for e, b in columns], rows))
    atomic_write_bytes(out_dir / LEADERBOARD_HTML, html.encode())
    return rows


def _write_csv(rows: list[dict[str, Any]], robust: list[str], path: Path) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["rank", "model", "clean_miou", *(f"robust_miou {c}" for c in robust),
                "white_box_floor", "mr", "model_sha256", "card"])
    for r in rows:
        w.writerow([r["rank"], r["model"], _cell(r["clean_miou"]),
                    *(_cell(r["robust"][c]) for c in robust), _cell(r["white_box_floor"]),
                    _cell(r["mr"]), r["model_sha256"], r["card"] or ""])
    atomic_write_bytes(path, buf.getvalue().encode())


def _cell(v: float | None) -> str:
    return "" if v is None else f"{v:.4f}"


def _context(meta: dict[str, Any], robust: list[str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    proto = meta["protocol"]
    return {"kind": "leaderboard", "title": f"Leaderboard · {brief_spec(meta['data']['spec'])}",
            "run_name": "leaderboard", "run_dir": "",
            "generated": f"{proto['name']} {proto['version']} · {proto['profile']['name']}",
            "command": "", "command_full": "", "versions": [], "plugin_versions": [],
            "config": [("protocol", f"{proto['name']} {proto['version']}"),
                       ("profile", proto["profile"]["name"]),
                       ("data", meta["data"]["spec"]), ("images", str(meta["data"]["images"])),
                       ("data sha256", meta["data"]["sha256"]),
                       ("scored against", meta["data"]["scored_against"]),
                       ("ranked by", f"worst-case mIoU at {meta['ranked_by']}")],
            "notes": [], "robust": robust, "rows": rows, "meta": meta,
            "brief": brief_spec}
