"""segtk-http: `segtk serve` in a subprocess on loopback, DLA through `--model http://...`.

The remote run must equal the in-process run bit for bit, and the server must have labelled
exactly the attack's queries plus the two evaluation passes. Failure modes (server down, slow,
garbage, 5xx) are checked against small stdlib fake servers in threads.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from segtk.cli import cli, pm_commands
from segtk.core import (
    ModelError,
    QueryCounter,
    Segmenter,
    build,
    load_dataset,
    load_segmenter,
)
from segtk.jobs.attack import attack_dataset, run_settings
from segtk.storage.runs import RunDir
from segtk.testing import SegmenterSuite, TinySegmenter
from segtk_http.client import HttpSegmenter, parse
from segtk_http.protocol import dump_npz, load_npz

BUDGET, EPS, SEED, LIMIT = 10, 8.0, 0, 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def specs(tmp_path_factory) -> tuple[str, str]:
    """(model spec, data spec): the demo if segtk_demo is installed, else a TorchScript file."""
    if importlib.util.find_spec("segtk_demo") is not None:
        return "demo", "demo"
    from segtk_torchscript import save_with_metadata
    from segtk_torchscript.segmenter import Preprocessing

    root = tmp_path_factory.mktemp("ts")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 4, 3, padding=1)).eval()
    save_with_metadata(torch.jit.script(net), root / "m.pt",
                       Preprocessing(classes=["a", "b", "c", "d"], mean=(0.5,) * 3, std=(0.25,) * 3))
    g = np.random.default_rng(0)
    for i in range(LIMIT):
        Image.fromarray(g.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(
            _mkdir(root / "data" / "images") / f"im{i}.png")
        Image.fromarray(g.integers(0, 4, (24, 32), dtype=np.uint8)).save(
            _mkdir(root / "data" / "labels") / f"im{i}.png")
    (root / "data" / "classes.txt").write_text("a\nb\nc\nd\n")
    return f"torchscript:{root / 'm.pt'}", f"folder:{root / 'data'}"


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_http(spec: str) -> HttpSegmenter:
    """`load_segmenter(spec)`, the http plugin's client."""
    model = load_segmenter(spec)
    assert isinstance(model, HttpSegmenter)
    return model


def get_json(url: str, timeout: float = 5.0) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class Served(str):
    """The server's URL, with its process."""

    proc: subprocess.Popen


@contextmanager
def segtk_serve(model_spec: str, port: int) -> Iterator[Served]:
    """`segtk serve` in a subprocess; waits for /info; always killed (by its pid) on exit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from segtk.cli import main; main()", "serve", "--model",
         model_spec, "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    url = Served(f"http://127.0.0.1:{port}")
    url.proc = proc
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"segtk serve exited: {proc.stdout.read().decode()}")
            try:
                get_json(url + "/info", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()


def run_attack(model, data_spec: str, out: Path, batch_size: int = 2, **kw):
    attack = build("attack", "dla", budget=BUDGET, eps=EPS, seed=SEED)
    data = load_dataset(data_spec, None, LIMIT)
    run = RunDir(out, cli_config(model if isinstance(model, str) else model.url, data_spec), False, kind="attack")
    return attack_dataset(attack, model if not isinstance(model, str) else load_segmenter(model),
                          data, run, batch_size, **kw)


def cli_config(model_spec: str, data_spec: str) -> dict:
    """The run.json config `segtk attack` writes, so a CLI --resume accepts our run."""
    attack = build("attack", "dla", budget=BUDGET, eps=EPS, seed=SEED)
    return {"attack": "dla", **run_settings(attack.params), "model": model_spec,
            "data": data_spec, "split": None}


@pytest.fixture
def evaluated(monkeypatch) -> list[int]:
    """Counts the images of the job's (uncounted) evaluation passes, whatever the core does."""
    from segtk.jobs import attack as attack_job

    seen = [0]
    original = attack_job.evaluate

    def evaluate(segmenter, images):
        seen[0] += images.shape[0]
        return original(segmenter, images)

    monkeypatch.setattr(attack_job, "evaluate", evaluate)
    return seen


def results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_dla_over_http_equals_in_process_and_server_counts(specs, tmp_path, evaluated) -> None:
    model_spec, data_spec = specs
    local = run_attack(model_spec, data_spec, tmp_path / "local")
    evaluated[0] = 0
    with segtk_serve(model_spec, free_port()) as url:
        info = get_json(url + "/info")
        remote_model = load_http(url)
        assert remote_model.classes == info["classes"] == load_segmenter(model_spec).classes
        remote = run_attack(remote_model, data_spec, tmp_path / "remote")
        served, client_count = get_json(url + "/stats")["served_images"], remote_model.queries
        check_json_and_refusals(url, remote_model)
    assert results(tmp_path / "remote") == results(tmp_path / "local")
    assert remote.table == local.table
    for png in (tmp_path / "local" / "images").iterdir():
        assert (tmp_path / "remote" / "images" / png.name).read_bytes() == png.read_bytes()
    queries = sum(r["queries"] for r in remote.records)
    assert queries == LIMIT * BUDGET  # DLA spends its whole budget
    assert LIMIT <= evaluated[0] <= 2 * LIMIT  # adversarial (and maybe clean) evaluation
    assert served == queries + evaluated[0] == client_count


def test_server_down_then_back_resume_via_cli(specs, tmp_path, evaluated, monkeypatch) -> None:
    model_spec, data_spec = specs
    port = free_port()
    spec = f"http://127.0.0.1:{port},retries=2,backoff=0.01"
    out = tmp_path / "run"
    with segtk_serve(model_spec, port) as url:
        model = load_http(spec)
        stop = [False]

        def kill_after_first(record) -> None:
            stop[0] = True

        with pytest.raises(ModelError) as err:
            attack = build("attack", "dla", budget=BUDGET, eps=EPS, seed=SEED)
            data = load_dataset(data_spec, None, LIMIT)
            original = model.predict

            def predict(images):  # the server dies once the first image is stored
                if stop[0] and url.proc.poll() is None:
                    url.proc.kill()
                    url.proc.wait(10)
                return original(images)

            monkeypatch.setattr(model, "predict", predict)
            with RunDir(out, cli_config(spec, data_spec), False, kind="attack") as run:  # frees the run's lock
                attack_dataset(attack, model, data, run, 1, on_image=kill_after_first)
    message = str(err.value)
    assert f"127.0.0.1:{port}/predict" in message and "cannot connect" in message
    assert "3 tries" in message and "--resume" in message and "segtk serve" in message
    assert len(results(out)) == 1
    first = results(out)[0]["image"]

    pm_commands()
    args = ["attack", "--plugin", "dla", "--model", spec, "--data", data_spec, "--limit", str(LIMIT),
            "--budget", str(BUDGET), "--eps", "8", "--batch-size", "1", "--out", str(out)]
    down = CliRunner().invoke(cli, args + ["--resume"])  # still down: one clear line, exit 1
    assert down.exit_code == 1 and "cannot connect" in down.output, down.output
    with segtk_serve(model_spec, port) as url:
        evaluated[0] = 0
        resumed = CliRunner().invoke(cli, args + ["--resume"])
        served, evals = get_json(url + "/stats")["served_images"], evaluated[0]
    assert resumed.exit_code == 0, resumed.output
    local = run_attack(model_spec, data_spec, tmp_path / "local", batch_size=1)
    lines = [r.to_json() for r in local.records]  # the typed records as their JSON lines
    assert results(out) == [r for r in lines if r["image"] == first] + \
        [r for r in lines if r["image"] != first]
    assert served == (LIMIT - 1) * BUDGET + evals  # only the images left were attacked


def post(url: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def check_json_and_refusals(url: str, model) -> None:
    """8-bit PNG/JSON requests equal npz ones; bad requests get 4xx with a message."""
    g = np.random.default_rng(1)
    u8 = g.integers(0, 256, (2, 20, 28, 3), dtype=np.uint8)
    pngs = []
    for im in u8:
        buf = io.BytesIO()
        Image.fromarray(im).save(buf, format="PNG")
        pngs.append(base64.b64encode(buf.getvalue()).decode())
    status, body = post(url + "/predict", json.dumps({"images": pngs}).encode(), "application/json")
    assert status == 200
    answer = json.loads(body)
    labels = np.stack([np.asarray(Image.open(io.BytesIO(base64.b64decode(t)))) for t in answer["labels"]])
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255
    assert np.array_equal(labels, model.predict(x).numpy())
    status, body = post(url + "/predict", dump_npz(images=u8.transpose(0, 3, 1, 2)), "application/x-npz")
    assert status == 200 and np.array_equal(load_npz(body, "labels"), labels)

    assert post(url + "/predict", b"garbage", "application/x-npz")[0] == 400
    status, body = post(url + "/predict", dump_npz(images=np.zeros((1, 4, 5, 5), np.float32)), "")
    assert status == 400 and b"[N,3,H,W]" in body
    assert post(url + "/predict", b"{}", "application/json")[0] == 400
    assert post(url + "/predict", b"x", "text/plain")[0] == 415
    too_many = dump_npz(images=np.zeros((65, 3, 2, 2), np.float32))
    status, body = post(url + "/predict", too_many, "application/x-npz")
    assert status == 413 and b"at most 64" in body
    assert get_json(url + "/stats")["failed_requests"] == 5
    model.batch = 64
    with pytest.raises(ModelError, match="was refused: HTTP 400"):
        model.request("POST", "/predict", b"garbage", "application/x-npz")
    # A batch larger than the server's limit is split by the client.
    big = torch.rand(70, 3, 4, 4)
    before = model.requests
    assert model.predict(big).shape == (70, 4, 4) and model.requests == before + 2


# --- failure modes against fake servers ---------------------------------------------------------

INFO = json.dumps({"protocol": "segtk-http/1", "name": "fake", "classes": ["a", "b"],
                   "ignore_index": 255, "max_batch": 8}).encode()


def reply_npz(handler: Any, body: bytes) -> None:
    handler.reply(200, body, "application/x-npz")


@contextmanager
def fake_server(behaviour: Callable[[Any], None], info: Callable[[Any], None] | None = None,
                ) -> Iterator[tuple[str, list[str]]]:
    """A stdlib HTTP server in a thread; `behaviour(handler)` answers POST /predict, `info`,
    where given, GET /info; its URL and the paths asked."""

    class Handler(BaseHTTPRequestHandler):
        calls: list[str] = []

        def log_message(self, *args) -> None:
            pass

        def reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            Handler.calls.append(self.path)
            if self.path == "/info" and info is not None:
                return info(self)
            self.reply(200, INFO)

        def do_POST(self) -> None:
            Handler.calls.append(self.path)
            self.body = self.rfile.read(int(self.headers["Content-Length"]))
            behaviour(self)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield url, Handler.calls
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_server_down_is_a_clear_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    with pytest.raises(ModelError) as err:
        load_segmenter(f"{url},retries=2,backoff=0.05")
    assert time.monotonic() - start >= 0.05 + 0.1  # exponential backoff: 0.05 then 0.1 s
    assert f"GET {url}/info failed after 3 tries: cannot connect" in err.value.message
    assert "segtk serve" in str(err.value.hint) and "--resume" not in str(err.value.hint)


def test_slow_server_times_out() -> None:
    def slow(handler) -> None:
        time.sleep(1.5)
        handler.reply(200, dump_npz(labels=np.zeros((1, 2, 2), np.uint8)), "application/x-npz")

    with fake_server(slow) as (url, calls):
        model = load_http(f"{url},timeout=0.3,retries=1,backoff=0")
        with pytest.raises(ModelError) as err:
            model.predict(torch.rand(1, 3, 2, 2))
    assert "no answer within 0.3 s" in err.value.message and "2 tries" in err.value.message
    assert "timeout=" in str(err.value.hint) and calls.count("/predict") == 2


def test_garbage_answers_are_clear_errors() -> None:
    def garbage(handler) -> None:
        handler.reply(200, b"<html>hello</html>", "text/html")

    with fake_server(garbage) as (url, _):
        model = load_http(url)
        assert model.classes == ["a", "b"] and model.batch == 8 and model.name == f"fake@{url}"
        with pytest.raises(ModelError, match=r"/predict sent an invalid answer: body is not a valid npz"):
            model.predict(torch.rand(1, 3, 2, 2))

    def wrong_shape(handler) -> None:
        handler.reply(200, dump_npz(labels=np.zeros((1, 3, 3), np.uint8)), "application/x-npz")

    with fake_server(wrong_shape) as (url, _):
        with pytest.raises(ModelError, match=r"sent labels uint8 \[1, 3, 3\], expected"):
            load_segmenter(url).predict(torch.rand(1, 3, 2, 2))

    def not_segtk(handler) -> None:
        handler.reply(200, b"hello")

    def web_page(handler: Any) -> None:
        handler.reply(200, b"<html>a web page</html>", "text/html")

    with fake_server(not_segtk, web_page) as (url, _):
        with pytest.raises(ModelError, match="is not a segtk-http server's answer"):
            load_segmenter(url)


def test_5xx_is_retried_with_backoff_then_succeeds() -> None:
    answers = [503, 502, 200]

    def flaky(handler) -> None:
        status = answers.pop(0)
        if status == 200:
            handler.reply(200, dump_npz(labels=np.ones((2, 2, 3), np.uint8)), "application/x-npz")
        else:
            handler.reply(status, b'{"error": "busy"}')

    with fake_server(flaky) as (url, calls):
        model = load_http(f"{url},retries=2,backoff=0.01")
        labels = model.predict(torch.rand(2, 3, 2, 3))
        assert labels.dtype == torch.int64 and labels.tolist() == [[[1] * 3] * 2] * 2
        assert calls.count("/predict") == 3 and model.queries == 2 and model.requests == 1
        answers[:] = [500, 500]
        with pytest.raises(ModelError, match=r"failed after 2 tries: HTTP 500: busy"):
            load_segmenter(f"{url},retries=1,backoff=0").predict(torch.rand(1, 3, 2, 2))


def test_client_splits_batches_to_fit_the_servers_limits() -> None:
    """/info's max_request_pixels, max_body_bytes and max_forward_pixels bound each request;
    too big an image is refused before sending."""
    sent: list[int] = []

    def record(handler) -> None:
        images = load_npz(handler.body, "images")
        assert len(handler.body) <= limits["max_body_bytes"]
        sent.append(images.shape[0])
        handler.reply(200, dump_npz(labels=np.zeros((images.shape[0], *images.shape[2:]), np.uint8)),
                      "application/x-npz")

    limits = {"max_batch": 8, "max_pixels": 100, "max_request_pixels": 250, "max_body_bytes": 10**6}
    def info(handler: Any) -> None:
        handler.reply(200, json.dumps({**json.loads(INFO), **limits}).encode())

    with fake_server(record, info) as (url, _):
        model = load_http(url)
        assert model.predict(torch.rand(5, 3, 10, 10)).shape == (5, 10, 10)
        assert sent == [2, 2, 1]  # 250 pixels per request
        sent.clear()
        limits.update(max_request_pixels=10**6, max_body_bytes=4096 + 3 * 12 * 100)
        model = load_http(url)
        assert model.predict(torch.rand(5, 3, 10, 10)).shape == (5, 10, 10)
        assert sent == [3, 2]  # 3 float32 images of 100 pixels per body
        sent.clear()
        limits.update(max_body_bytes=10**6, max_forward_pixels=200)
        model = load_http(url)
        assert model.predict(torch.rand(5, 3, 10, 10)).shape == (5, 10, 10)
        assert sent == [2, 2, 1]  # one forward pass per request: the model sees our batches
        sent.clear()
        with pytest.raises(ModelError, match="takes images of at most 100 pixels, these are 11x10") as err:
            model.predict(torch.rand(1, 3, 11, 10))
        assert "--max-pixels" in str(err.value.hint) and sent == []


@pytest.mark.parametrize("outputs", [None, 3])
def test_a_served_models_extra_output_is_an_answer_only_if_its_server_says_so(outputs) -> None:
    """Ids past the classes (a "void" output) pass where /info's `outputs` counts them; any
    other id is refused, naming the served model, before it is scored."""
    def void(handler) -> None:
        images = load_npz(handler.body, "images")
        handler.reply(200, dump_npz(labels=np.full((images.shape[0], *images.shape[2:]), 2, np.uint8)),
                      "application/x-npz")

    def info(handler: Any) -> None:
        extra = {} if outputs is None else {"outputs": outputs}
        handler.reply(200, json.dumps({**json.loads(INFO), **extra}).encode())

    with fake_server(void, info) as (url, _):
        model = load_http(url)
        counter = QueryCounter(model, 1, 1)
        if outputs is None:
            with pytest.raises(ModelError) as err:
                counter.predict(torch.rand(1, 3, 2, 2))
            assert err.value.message == f"model fake@{url} returned class ids 2..2, outside its " \
                                        "2 outputs (0..1)"
        else:
            assert counter.predict(torch.rand(1, 3, 2, 2)).unique().tolist() == [2]


def test_the_server_says_how_many_outputs_its_model_has() -> None:
    from segtk_http.limits import Limits
    from segtk_http.server import ServedModel

    class Void(TinySegmenter):
        @property
        def num_outputs(self) -> int:
            return 5

    assert ServedModel(Void(), Limits()).info()["outputs"] == 5


def test_json_label_pngs_round_trip_8_and_16_bit() -> None:
    """JSON answers carry labels as grey PNGs: uint8 -> L, uint16 (ids >= 256) -> I;16."""
    from segtk_http.protocol import encode_png

    for labels in (np.array([[0, 7], [255, 1]], np.uint8), np.array([[300, 1], [65535, 0]], np.uint16)):
        img = Image.open(io.BytesIO(base64.b64decode(encode_png(labels))))
        assert img.mode == ("L" if labels.dtype == np.uint8 else "I;16")
        assert np.array_equal(np.asarray(img), labels)


def test_spec_parsing_and_listing() -> None:
    assert parse("http://h:1/x,timeout=5,retries=0,backoff=1,batch=4") == (
        "http://h:1/x", {"timeout": 5.0, "retries": 0, "backoff": 1.0, "batch": 4})
    assert parse("127.0.0.1:8000") == ("http://127.0.0.1:8000", {})
    with pytest.raises(ModelError, match="unknown http option 'colour'"):
        parse("http://h:1,colour=red")
    with pytest.raises(ModelError, match="cannot read timeout=.soon.: expected a number"):
        parse("http://h:1,timeout=soon")
    with pytest.raises(ModelError, match="bad client options"):
        load_segmenter("http://h:1,timeout=0")
    pm_commands()
    listing = json.loads(CliRunner().invoke(cli, ["plugins", "--json"]).output)
    assert [r["status"] for r in listing if r["name"] == "http"] == ["ok"]
    assert "serve" in cli.commands
    assert "--port" in CliRunner().invoke(cli, ["serve", "--help"]).output


# --- the client does not trust the server (issue 21) ----------------------------------------------

def deflated_npz(key: str, shape: tuple[int, ...]) -> bytes:
    """An npz whose deflated uint8 `key`.npy of zeros declares `shape`: ~1 KB per MiB, built
    from one repeated full-flush deflate segment (a bomb costs only its CRC to make)."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "|u1", "fortran_order": False,
                                                "shape": shape})
    header, block = head.getvalue(), bytes(2**20)
    blocks, rest = divmod(int(np.prod(shape)), len(block))
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = comp.compress(header) + comp.flush(zlib.Z_FULL_FLUSH)
    segment = comp.compress(block) + comp.flush(zlib.Z_FULL_FLUSH)
    data += segment * blocks + comp.compress(bytes(rest)) + comp.flush()
    crc = zlib.crc32(header)
    for _ in range(blocks):
        crc = zlib.crc32(block, crc)
    crc = zlib.crc32(bytes(rest), crc)
    name, size = f"{key}.npy".encode(), len(header) + blocks * len(block) + rest
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0, crc, len(data), size,
                        len(name), 0) + name
    central = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0, crc, len(data),
                          size, len(name), 0, 0, 0, 0, 0, 0) + name
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 1, 1, len(central),
                      len(local) + len(data), 0)
    return local + data + central + end


def test_an_answer_larger_than_the_labels_can_be_is_refused_unread() -> None:
    """Labels of 1 image of 8x8 take under 64 KiB: 50 MB (400 MB declared) are not read."""
    written: list[int] = []
    finished = threading.Semaphore(0)

    def flood(handler, declare: bool) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-npz")
        handler.send_header("Content-Length" if declare else "Connection",
                            "400000000" if declare else "close")
        handler.end_headers()
        sent = 0
        try:
            for _ in range(50):
                handler.wfile.write(bytes(2**20))
                sent += 2**20
        except OSError:
            pass  # the client hung up
        written.append(sent)
        finished.release()
        handler.close_connection = True

    for declare, message in [(True, "an answer of 400000000 bytes, more than the 66048"),
                             (False, "an answer of more than 66048 bytes")]:
        with fake_server(functools.partial(flood, declare=declare)) as (url, calls):
            model = load_http(f"{url},retries=2,backoff=0")
            with pytest.raises(ModelError, match=message) as err:
                model.predict(torch.rand(1, 3, 8, 8))
            assert "segtk-http/1" in str(err.value.hint) and calls.count("/predict") == 1
        assert finished.acquire(timeout=30)  # the server stopped writing: how far did it get?
        assert written[-1] < 50 * 2**20, "the client read the whole flood"


def test_an_npz_bomb_answer_is_refused_from_its_npy_header() -> None:
    """1 MB of deflate declaring 1 GiB of labels: refused before a byte is inflated."""
    bomb = deflated_npz("labels", (1, 32768, 32768))
    assert len(bomb) < 1.1e6
    with fake_server(lambda h: h.reply(200, bomb, "application/x-npz")) as (url, _):
        model = load_http(url)
        images = torch.rand(1, 3, 512, 512)  # its labels may take up to 2.1 MB: the bomb fits
        tracemalloc.start()
        try:
            with pytest.raises(ModelError, match=r"labels uint8 \[1, 32768, 32768\], expected "
                                                 r"uint8/uint16 \[1, 512, 512\] \(from the npy"):
                model.predict(images)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 64 * 2**20, f"the client allocated {peak // 2**20} MiB"


def test_labels_are_checked_from_the_header_and_the_zip_directory() -> None:
    answers = {
        "float labels": dump_npz(labels=np.zeros((1, 2, 2), np.float32)),
        "a lying zip entry": deflated_npz("labels", (1, 2, 2)).replace(
            struct.pack("<L", 128 + 4), struct.pack("<L", 128 + 2**20)),
        "a 100-entry zip": b"".join([dump_npz(labels=np.zeros((1, 2, 2), np.uint8))[:-22],
                                     struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 100, 100,
                                                 46 * 100, 0, 0)]),
    }
    messages = {"float labels": r"sent labels float32 \[1, 2, 2\], expected",
                "a lying zip entry": r"invalid answer: npz answer: member labels.npy declares "
                                     r"1048704 bytes, its npy header 132",
                "a 100-entry zip": "invalid answer: the answer is a zip declaring 100 entries"}
    for what, body in answers.items():
        with fake_server(functools.partial(reply_npz, body=body)) as (url, _):
            with pytest.raises(ModelError, match=messages[what]):
                load_segmenter(url).predict(torch.rand(1, 3, 2, 2))


@pytest.mark.parametrize("where", ["headers", "body"])
def test_a_trickling_server_is_cut_off_at_the_timeout(where: str) -> None:
    """A byte every 0.05 s (each socket read well within timeout=1): each try still ends
    after 1 s, so 2 tries take about 2 s, not the 4-14 s the whole answer would take."""
    answer = dump_npz(labels=np.zeros((1, 2, 2), np.uint8))
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/x-npz\r\n"
            b"Content-Length: %d\r\n\r\n" % len(answer))

    def trickle(handler) -> None:
        try:
            for part in (head, answer):
                slow = (part is head) == (where == "headers")
                for piece in ([part[i:i + 1] for i in range(len(part))] if slow else [part]):
                    handler.wfile.write(piece)
                    handler.wfile.flush()
                    time.sleep(0.05 if slow else 0)
        except OSError:
            pass  # the client hung up
        handler.close_connection = True

    with fake_server(trickle) as (url, calls):
        model = load_http(f"{url},timeout=1,retries=1,backoff=0")
        start = time.monotonic()
        with pytest.raises(ModelError) as err:
            model.predict(torch.rand(1, 3, 2, 2))
        took = time.monotonic() - start
    assert "no answer within 1 s" in err.value.message and "2 tries" in err.value.message
    assert calls.count("/predict") == 2 and took < 5, took


@pytest.fixture(scope="module")
def served(specs) -> Iterator[str]:
    """`segtk serve` of the test model, for the whole module."""
    with segtk_serve(specs[0], free_port()) as url:
        yield url


class TestHttpContract(SegmenterSuite):
    """The segmenter contract (segtk.testing) through `--model http://...`: what the server's
    model promises holds on the client's side of the wire."""

    @pytest.fixture(autouse=True)
    def _server(self, served: str) -> None:
        self.url = served

    def make(self) -> Segmenter:
        return load_segmenter(self.url)
