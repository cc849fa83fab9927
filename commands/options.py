"""Click options shared by several commands."""

from __future__ import annotations

import click

from segtk.core import DEVICE_OPTION, SegtkError
from segtk.core._data import DEFAULT_MAX_PIXELS, pixel_limit
from segtk.core._device import resolve_device
from segtk.core._eps import check_eps
from segtk.jobs.edit import DEFAULT_PROMPT_WRITER

DEMO_MODEL, DEMO_DATA = "demo", "demo"

model_option = click.option("--model", "model_spec", default=DEMO_MODEL, show_default=True,
                            help="Model spec PLUGIN:ARG (see `segtk models`).")
data_option = click.option("--data", "data_spec", default=DEMO_DATA, show_default=True,
                           help="Dataset spec FORMAT:PATH (see `segtk datasets`).")
split_option = click.option("--split", default=None, help="Dataset split (default: the reader's).")
limit_option = click.option("--limit", type=click.IntRange(min=1), default=None,
                            help="Use only the first N images.")
device_option = click.option("--device", **DEVICE_OPTION)  # one definition: core's


def _pixel_limit(ctx: click.Context, param: click.Parameter, value: int | None) -> None:
    ctx.with_resource(pixel_limit(value))  # for the whole command, its worker processes too


max_pixels_option = click.option(
    "--max-pixels", type=click.IntRange(min=1), default=None, expose_value=False,
    callback=_pixel_limit, metavar="PIXELS",
    help=f"Refuse images and label maps of more pixels (width x height), from their headers, "
         f"before decoding them [default: {DEFAULT_MAX_PIXELS} = {DEFAULT_MAX_PIXELS / 1e6:g} MP, "
         f"or SEGTK_MAX_PIXELS]. Not a setting: a resume may change it.")


def same_device(value: str | None) -> str:
    """A device as run.json records it ("cpu", "cuda:0"), to compare a typed --device with
    the recorded one; one this machine lacks as it is written."""
    try:
        return str(resolve_device(value))
    except SegtkError:
        return str(value).strip().lower()


classes_from_data_option = click.option(
    "--classes-from-data", is_flag=True,
    help="Trust that the model's outputs are the dataset's classes in order, whatever the "
         "model calls them (the names are checked otherwise; see `segtk datasets SPEC`).")


def checked_eps(value: float) -> float:
    """--eps read by the one rule of the Python API (core's check_eps): a value in (0, 1) is
    refused as a fraction of the [0,1] range, naming the 0-255 value to pass."""
    try:
        return check_eps(value, "--eps")
    except SegtkError as exc:
        raise click.BadParameter(exc.message) from exc


def _checked_eps(ctx: click.Context, param: click.Parameter, value: float) -> float:
    return checked_eps(value)


eps_option = click.option("--eps", type=click.FloatRange(0, 255, min_open=True), default=8.0,
                          show_default=True, callback=_checked_eps,
                          help="L∞ bound on the 0–255 scale (stored images keep whole steps).")


def csv_list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def shard_options(command):
    """--chunk, --executor, --workers, --address: how a benchmark's shards are run."""
    for option in reversed([
        click.option("--chunk", type=click.IntRange(min=1), default=8, show_default=True,
                     help="Images per shard."),
        click.option("--executor", type=click.Choice(["local", "inline", "ray"]), default="local",
                     show_default=True, help="local = process pool; ray = Ray cluster."),
        click.option("--workers", type=click.IntRange(min=1), default=None,
                     help="Processes (local) or CPUs (new Ray cluster) [default: all cores]."),
        click.option("--address", default=None,
                     help="Ray cluster address to join (with --executor ray)."),
    ]):
        command = option(command)
    return command


def prompt_options(command):
    """--prompt-model, --prompt-writer: who writes the edit prompts (`edit`, `bench edits`)."""
    for option in reversed([
        click.option("--prompt-model", "prompt_model", default=None, metavar="MODEL",
                     help="Model of the prompt writer that writes the edit prompts instead of "
                          "the editors' templates; for lm (segtk-lm-prompts) a local chat LM "
                          "folder (transformers). Manifest: prompt_writer."),
        click.option("--prompt-writer", "prompt_writer_name", default=None, metavar="NAME",
                     help=f"Prompt-writer plugin that --prompt-model feeds [default: "
                          f"{DEFAULT_PROMPT_WRITER}]; see `segtk plugins`."),
    ]):
        command = option(command)
    return command
