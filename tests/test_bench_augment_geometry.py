"""`bench augment --attributes ...,size` gives Tab. IV's geometry columns: the size levels,
Original-object as their reference and an mR per group, for every row."""

from __future__ import annotations

import csv

import pytest

import segtk


@pytest.mark.slow
def test_size_adds_geometry_columns_and_their_mr(tmp_path) -> None:
    out = tmp_path / "bench"
    table = segtk.bench_augment("demo", "demo", "baseline", out, split="", limit=4,
                                eval_split="", eval_limit=2, attributes="weather,size",
                                values={"weather": ["fog"], "size": ["0.2", "0.4"]}, epochs=1,
                                batch_size=4, crop=(64, 48))
    details = table.details
    assert details["groups"] == ["appearance", "geometry"]
    assert {"original-object", "size-0.2", "size-0.4"} <= set(details["subsets"])
    header = next(csv.reader((out / "table.csv").open()))
    assert {"size-0.2", "size-0.4", "mR_geometry"} <= set(header)
    for row in details["rows"]:  # start and baseline alike
        reference = row["miou"]["original-object"]
        edited = [row["miou"]["size-0.2"], row["miou"]["size-0.4"]]
        assert row["mr_geometry"] == pytest.approx(sum(edited) / len(edited) / reference)
