"""`segtk report`: write a run directory's HTML report, a page of that folder."""

from __future__ import annotations

from pathlib import Path

import click

from segtk import api
from segtk.commands.console import console
from segtk.commands.options import max_pixels_option


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--data", "data_spec", default=None, metavar="FORMAT:PATH",
              help="Dataset for clean images and labels, and a train run's validation data "
                   "[default: the one in RUN_DIR/run.json].")
@max_pixels_option
@click.option("--open", "open_", is_flag=True, help="Open the report in the default browser.")
def report(run_dir: str, data_spec: str | None, open_: bool) -> None:
    """Write RUN_DIR/report.html for a run of segtk attack, bench attacks, edit, bench edits,
    train or bench augment (run.json says which).

    The page works offline: pictures it needs are written to RUN_DIR/report_files/ and linked
    relatively, and every path it prints is relative to RUN_DIR, so the run folder can be
    zipped and shared as it is. A train run's page scores each epoch's checkpoint on the
    validation data (--data, else the run's data at its val split) once, keeping the scores
    in RUN_DIR/val_scores.json.

    \b
    Examples:
      segtk report runs/attack-dla --open
      segtk report runs/bench-attacks
      segtk report runs/bench-edits      # also writes edits/ATTR/report.html
      segtk report runs/train-cutmix     # loss and val mIoU per epoch
      segtk report runs/bench-augment    # also writes train/NAME/ and edits/ATTR/report.html
      segtk report runs/dla --data camvid:../shared/data/camvid   # dataset moved since the run
    """

    root = Path(run_dir)
    with console.status("writing the report") as status:
        path = api.report(run_dir, data_spec, on_page=lambda run: status.update(
            f"writing the report of {run.relative_to(root) if run != root else run}"))
    console.print(f"wrote {path}")
    if open_:
        click.launch(str(path))
