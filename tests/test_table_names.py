"""Plugin READMEs and docs/results.md name the papers' tables the same way: each Table 3 row the
DLA README maps to parameters is the row docs/results.md reports under that name (or says it is
not run), every dla row results.md labels with a Table 3 name is the README's mapping, and every
table a plugin README cites is one the docs report or describe (figures may be pictures only)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = (REPO / "docs" / "results.md").read_text()
DOCS = RESULTS + "".join(p.read_text() for p in (REPO / "docs").glob("*.md"))


def table_3_rows() -> dict[str, str]:
    """The DLA README's Table 3 rows: row name -> the bench spec of its parameters."""
    text = (REPO / "plugins" / "attacks" / "dla" / "README.md").read_text()
    block = text.split("| Table 3 row (exploration / calibration) | parameters |", 1)[1]
    rows = {}
    for line in block.splitlines()[2:]:
        if not line.startswith("|"):
            break
        name, params = (cell.strip() for cell in line.strip("|").split("|"))
        name = name.removesuffix(" (DLA)")
        pairs = re.findall(r"(\w+=\w+)", params)
        rows[name] = "dla" + (":" + ";".join(pairs) if pairs else "")
    return rows


def test_the_readme_rows_are_the_rows_results_reports() -> None:
    rows = table_3_rows()
    assert len(rows) == 6 and rows["iterative / flip"] == "dla"
    for name, spec in rows.items():
        reported = f"| `{spec}` ({name}" in RESULTS
        not_run = f"Table 3's {name} row is not run" in RESULTS
        assert reported or not_run, f"docs/results.md has no Table 3 row {name!r} as `{spec}`"


def test_every_table_3_label_in_results_is_the_readme_mapping() -> None:
    rows = table_3_rows()
    labelled = re.findall(r"^\| `(dla[^`]*)` \(([a-z]+ / [a-z]+)", RESULTS, re.MULTILINE)
    assert labelled, "docs/results.md labels no dla row with its Table 3 name"
    for spec, name in labelled:
        assert rows.get(name) == spec, f"results.md calls `{spec}` Table 3's {name!r} row"


def test_every_table_a_plugin_readme_cites_is_in_the_docs() -> None:
    for readme in sorted(REPO.glob("plugins/*/*/README.md")):
        for cited in set(re.findall(r"\bTable [0-9IVX]+\b", readme.read_text())):
            assert cited in DOCS, f"{readme.relative_to(REPO)} cites {cited}, which no docs page reports"
