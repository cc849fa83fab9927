"""The image-size guard: every job refuses an image over --max-pixels from its header, before
decoding it (an 8000x8000 photo takes `predict` to 13.7 GB and `attack` past 20 GB)."""

from __future__ import annotations

import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from PIL import ImageFile

import segtk
from segtk.cli import cli
from segtk.core import DataError, read_image, read_label, write_png
from segtk.core._data import DEFAULT_MAX_PIXELS, pixel_limit
from segtk.core._errors import ImageTooLarge
from segtk_demo.scenes import CLASSES as DEMO_CLASSES

ENV = "SEGTK_MAX_PIXELS"


def solid_png(path: Path, width: int, height: int, channels: int = 3) -> Path:
    """A valid black PNG of any size, made in a few MB: each zero row compresses to bytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = bytes(1 + width * channels)  # filter 0 and black samples
    deflate = zlib.compressobj(1, zlib.DEFLATED, 15, 9, zlib.Z_RLE)
    body = b"".join(deflate.compress(row) for _ in range(height)) + deflate.flush()
    colour_type = {1: 0, 3: 2}[channels]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0))
                     + chunk(b"IDAT", body) + chunk(b"IEND", b""))
    return path


@pytest.fixture
def no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding any image file fails the test: what is refused must be refused from the header."""

    def load(self: ImageFile.ImageFile) -> None:
        raise AssertionError(f"decoded {self.filename!r}")

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)


@pytest.fixture(autouse=True)
def default_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


def big_dataset(root: Path) -> Path:
    """A folder dataset of one 8000x8000 image and label (each file about 190 KB)."""
    solid_png(root / "images" / "big.png", 8000, 8000)
    solid_png(root / "labels" / "big.png", 8000, 8000, channels=1)
    (root / "classes.txt").write_text("\n".join(DEMO_CLASSES) + "\n")
    return root


def small_dataset(root: Path, n: int = 2) -> Path:
    """Folder data of the demo model's classes: 24x16 images (384 pixels)."""
    rng = np.random.default_rng(0)
    for i in range(n):
        write_png(root / "images" / f"im{i}.png", rng.integers(0, 256, (16, 24, 3), dtype=np.uint8))
        write_png(root / "labels" / f"im{i}.png", rng.integers(0, len(DEMO_CLASSES), (16, 24)))
    (root / "classes.txt").write_text("\n".join(DEMO_CLASSES) + "\n")
    return root


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_the_default_is_40_megapixels() -> None:
    assert DEFAULT_MAX_PIXELS == 40_000_000


def test_an_8000x8000_png_is_refused_from_its_header(tmp_path: Path, no_decoding: None) -> None:
    root = big_dataset(tmp_path / "data")
    for path, read in ((root / "images" / "big.png", read_image), (root / "labels" / "big.png", read_label)):
        with pytest.raises(ImageTooLarge, match=r"big\.png: 8000x8000 pixels \(64\.0 MP\) is over the "
                                            r"limit of 40000000 pixels \(40 MP\)") as caught:
            read(path)
        assert "--max-pixels 64000000" in (caught.value.hint or "")
    with pixel_limit(64_000_000), pytest.raises(AssertionError, match="decoded .*big.png"):
        read_image(root / "images" / "big.png")  # the limit, raised, lets it through to decoding


def test_pixel_limit_restores_the_limit_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "123")
    with pixel_limit(456):
        assert os.environ[ENV] == "456"
    assert os.environ[ENV] == "123"
    monkeypatch.delenv(ENV)
    with pixel_limit(456):
        pass
    assert ENV not in os.environ


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1e6"])
def test_a_bad_environment_value_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             value: str) -> None:
    monkeypatch.setenv(ENV, value)
    path = small_dataset(tmp_path / "d") / "images" / "im0.png"
    with pytest.raises(DataError, match=rf"{ENV}='{re.escape(value)}' is not a positive whole number"):
        read_image(path)


@pytest.mark.parametrize("command", [["predict"], ["attack", "--plugin", "random", "--budget", "2"]])
def test_the_cli_refuses_an_8000x8000_image_before_decoding_it(tmp_path: Path, no_decoding: None,
                                                               command: list[str]) -> None:
    root = big_dataset(tmp_path / "data")
    result = invoke(*command, "--data", f"folder:{root}", "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    error = re.search(r"Error: (.*)\nhint: (.*)", result.output)
    assert error, result.output
    assert re.search(r"big\.png: 8000x8000 pixels \(64\.0 MP\) is over the limit of 40000000", error[1])
    assert "--max-pixels 64000000" in error[2]


# Each job command, with what makes it a small run of the demo model on folder:DATA.
JOBS = {
    "predict": ["predict"],
    "attack": ["attack", "--plugin", "random", "--budget", "2", "--out", "{out}"],
    "bench attacks": ["bench", "attacks", "--attacks", "random", "--budgets", "2", "--repeats", "1",
                      "--executor", "local", "--workers", "2", "--chunk", "1", "--out", "{out}"],
    "edit": ["edit", "--plugin", "color", "--values", "red", "--out", "{out}"],
    "bench edits": ["bench", "edits", "--attributes", "color", "--values", "color=red",
                    "--all-images", "--executor", "inline", "--out", "{out}"],
    "train": ["train", "--model", "demo", "--epochs", "1", "--out", "{out}"],
    "bench augment": ["bench", "augment", "--model", "demo", "--augment", "baseline", "--attributes", "color",
                      "--values", "color=red", "--out", "{out}"],
}


@pytest.mark.parametrize("job", JOBS)
def test_every_job_refuses_images_over_max_pixels(tmp_path: Path, job: str) -> None:
    data = small_dataset(tmp_path / "data")
    args = [a.replace("{out}", str(tmp_path / "out")) for a in JOBS[job]]
    result = invoke(*args, "--data", f"folder:{data}", "--max-pixels", "383")
    assert result.exit_code == 1, result.output
    assert re.search(r"im\d\.png: 24x16 pixels \(0\.0 MP\) is over the limit of 383 pixels",
                     result.output), result.output
    assert "hint: pass --max-pixels 384" in result.output


@pytest.mark.parametrize("job", ["predict", "bench attacks"])
def test_max_pixels_raises_the_limit_in_worker_processes_too(tmp_path: Path, job: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """bench attacks --workers 2: the shards read the images in forked processes."""
    monkeypatch.setenv(ENV, "100")
    data = small_dataset(tmp_path / "data")
    args = [a.replace("{out}", str(tmp_path / "out")) for a in JOBS[job]]
    assert invoke(*args, "--data", f"folder:{data}").exit_code == 1  # the environment's 100
    result = invoke(*args, "--data", f"folder:{data}", "--max-pixels", "384")
    assert result.exit_code == 0, result.output
    assert os.environ[ENV] == "100"  # the command's limit ends with it


def test_ray_workers_read_under_the_runs_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster started (or joined) before the run has its own environment: here 100 pixels.
    The run's limit goes with each task, so its workers read the second, larger image."""
    ray = pytest.importorskip("ray")
    data = small_dataset(tmp_path / "data")
    write_png(data / "images" / "im1.png", np.zeros((32, 48, 3), np.uint8))  # 1536 pixels
    write_png(data / "labels" / "im1.png", np.zeros((32, 48), np.uint8))
    monkeypatch.setenv(ENV, "100")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        monkeypatch.delenv(ENV)
        table = segtk.bench_attacks("demo", f"folder:{data}", attacks="random", budgets=[2],
                                    repeats=1, chunk=1, executor="ray", max_pixels=1536)
    finally:
        ray.shutdown()
    assert table[0]["images"] == 2


def test_the_python_api_takes_max_pixels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = f"folder:{small_dataset(tmp_path / 'data')}"
    with pytest.raises(ImageTooLarge, match=r"im0\.png: 24x16 pixels .* over the limit of 383 pixels"):
        segtk.predict("demo", data, max_pixels=383)
    assert ENV not in os.environ
    monkeypatch.setenv(ENV, "100")
    assert segtk.predict("demo", data, max_pixels=384)["images"] == 2
    assert os.environ[ENV] == "100"


def test_every_command_that_reads_data_has_max_pixels() -> None:
    def commands(group, path=""):
        for name, command in group.commands.items():
            if hasattr(command, "commands"):
                yield from commands(command, f"{path} {name}")
            else:
                yield f"{path} {name}".strip(), command

    reading = {name: {o for p in command.params for o in p.opts}
               for name, command in commands(cli)
               if any("--data" in p.opts for p in command.params)}
    assert {"predict", "attack", "bench attacks", "edit", "bench edits", "train", "bench augment",
            "report"} <= set(reading)
    assert [name for name, opts in reading.items() if "--max-pixels" not in opts] == []
