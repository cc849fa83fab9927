"""`segtk predict`: labels, overlays and dataset mIoU of a model on a dataset."""

from __future__ import annotations

import json

import click

from segtk import api
from segtk.class_names import check_compatible
from segtk.commands.console import console, pct, progress, quiet_option, table
from segtk.commands.options import (
    classes_from_data_option,
    data_option,
    device_option,
    limit_option,
    max_pixels_option,
    model_option,
    split_option,
)
from segtk.core import load_dataset, load_segmenter


@click.command()
@model_option
@data_option
@split_option
@limit_option
@max_pixels_option
@classes_from_data_option
@device_option
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Write labels/overlays here.")
@click.option("--batch-size", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--json", "as_json", is_flag=True,
              help="Print the result as one JSON line instead of the table.")
@quiet_option
def predict(model_spec, data_spec, split, limit, classes_from_data, device, out, batch_size,
            as_json) -> None:
    """Predict a dataset; print dataset mIoU and pixel accuracy (a table, or JSON).

    \b
    Examples:
      segtk predict
      segtk predict --model espnet:camvid=../shared/models/espnet_camvid.safetensors \\
                    --data camvid:../shared/data/camvid --out runs/predict
      segtk predict --json --quiet          # one JSON line, nothing else
    """

    model = load_segmenter(model_spec, device)
    data = load_dataset(data_spec, split, limit)
    check_compatible(model, data, classes_from_data)  # before the progress bar and --out
    with progress() as bar:
        task = bar.add_task("predict", total=len(data), status="", unit="images")
        summary = api.predict(model, data, out, batch_size=batch_size,
                              classes_from_data=classes_from_data,
                              on_batch=lambda n: bar.advance(task, n))
    if as_json:
        click.echo(json.dumps({k: v for k, v in summary.items() if k != "iou"}))
        return
    console.print(table(f"{model_spec} on {data_spec}", ["", "value"], [
        ["images", summary["images"]], ["mIoU %", pct(summary["miou"])],
        ["pixel acc %", pct(summary["pacc"])]]))
