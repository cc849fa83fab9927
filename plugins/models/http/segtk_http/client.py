"""The black-box client: `--model http://HOST:PORT[,timeout=S][,retries=N][,backoff=S][,batch=N]`.

Images travel as float32 npz, so a remote model sees exactly the tensors an in-process one
would. The server is not trusted: `timeout` bounds each try as a whole (connect, send, the
complete answer), an answer longer than the request's labels can take is refused unread, and
the labels' npy header (shape, dtype) is checked before anything is inflated. Connection
errors, timeouts, 408 and 5xx answers are retried `retries` times with exponential backoff
(backoff, 2*backoff, 4*backoff, ...), so a call takes at most (retries+1) x timeout plus the
backoff; anything else fails at once with a ModelError that names the URL and what went wrong.
The token of a server started with `segtk serve --token` is read from $SEGTK_TOKEN (never from
the spec, which runs record) and sent as `Authorization: Bearer TOKEN`.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import socket
import threading
import time
import urllib.parse
import zipfile
from typing import Any

import numpy as np
import torch

from segtk.core import ModelError, Segmenter, convert, parse_pairs
from segtk_http.npzfile import NPZ_ERRORS, Header, as_array, check_directory, open_member
from segtk_http.protocol import NPZ, PROTOCOL, ProtocolError, bounded, dump_npz

SYNTAX = "http://HOST:PORT[,timeout=SECONDS][,retries=N][,backoff=SECONDS][,batch=N]"
SERVE_HINT = "start one with `segtk serve --model SPEC --port PORT`, or check the URL"
NPZ_OVERHEAD = 4096  # zip and npy headers of a request body, generously
ANSWER_OVERHEAD = 64 * 1024  # zip and npy headers of an answer, very generously
INFO_LIMIT = 4 * 2**20  # GET /info and /stats answers (a class list)
ERROR_LIMIT = 64 * 1024  # bytes read of an error answer: only its message is wanted
RETRY_STATUS = frozenset({408, 500, 502, 503, 504})
TOKEN_ENV = "SEGTK_TOKEN"


class HttpSegmenter(Segmenter):
    """A segmenter behind a segtk-http/1 server.

    `queries` counts the images this client had labelled (`requests` the successful POSTs);
    the core QueryCounter still enforces attack budgets on its own count.
    """

    def __init__(self, url: str, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5,
                 batch: int | None = None) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ModelError(f"not an http(s) URL: {url!r}", hint=f"syntax: {SYNTAX}")
        if timeout <= 0 or retries < 0 or backoff < 0 or (batch is not None and batch < 1):
            raise ModelError(f"bad client options for {url}: timeout={timeout}, retries={retries}, "
                             f"backoff={backoff}, batch={batch}",
                             hint="timeout > 0, retries >= 0, backoff >= 0, batch >= 1")
        self.url = url.rstrip("/")
        self._scheme, self._host = parsed.scheme, parsed.hostname
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self._prefix = parsed.path.rstrip("/")
        self.timeout, self.retries, self.backoff = float(timeout), int(retries), float(backoff)
        self.queries = 0
        self.requests = 0
        self._token = os.environ.get(TOKEN_ENV) or None
        self._local = threading.local()
        self._count_lock = threading.Lock()
        self.info = self._info()
        self.remote_name = str(self.info.get("name", "?"))
        self.name = f"{self.remote_name}@{self.url}"
        self.classes = list(self.info["classes"])
        self._outputs = _positive(self.info, "outputs")  # past the classes: e.g. a void channel
        self.ignore_index = int(self.info.get("ignore_index", 255))
        self.batch = batch or _positive(self.info, "max_batch") or 64
        # The server's size limits (segtk serve --max-pixels, ...); absent from other servers.
        self.max_pixels = _positive(self.info, "max_pixels")
        self.max_request_pixels = _positive(self.info, "max_request_pixels")
        self.max_forward_pixels = _positive(self.info, "max_forward_pixels")
        self.max_body_bytes = _positive(self.info, "max_body_bytes")

    # --- transport -------------------------------------------------------------------------

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=self.timeout)
        self._local.conn = conn
        return conn, False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self._drop()

    def _once(self, method: str, path: str, body: bytes | None, headers: dict[str, str],
              limit: int) -> tuple[int, str, bytes]:
        """One attempt, cut off `timeout` seconds after it starts (TimeoutError)."""
        deadline = Deadline(self.timeout)
        conn, reused = self._connection()
        try:
            try:
                status, ctype, data, done = self._exchange(conn, method, path, body, headers,
                                                           limit, deadline)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if not reused or deadline.expired:
                    raise
                # A kept-alive connection the server had closed: reconnect once, not a retry.
                self._drop()
                conn, _ = self._connection()
                status, ctype, data, done = self._exchange(conn, method, path, body, headers,
                                                           limit, deadline)
            if deadline.expired:  # cut mid-answer: what arrived may look complete
                raise TimeoutError("the deadline passed while reading the answer")
        except BaseException as exc:
            self._drop()
            if deadline.expired and not isinstance(exc, AnswerTooLarge):
                raise TimeoutError(f"cut off after {self.timeout:g} s") from exc
            raise
        finally:
            deadline.cancel()
        if done:
            self._drop()
        return status, ctype, data

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str,
                  body: bytes | None, headers: dict[str, str], limit: int,
                  deadline: Deadline) -> tuple[int, str, bytes, bool]:
        """(status, content type, body, whether the connection is done) of one request."""
        deadline.watch(conn)
        conn.request(method, self._prefix + path, body=body, headers=headers)
        resp = conn.getresponse()
        ctype = resp.getheader("content-type", "")
        if 200 <= resp.status < 300:
            try:
                data = read_bounded(resp, limit)
            except BaseException:
                resp.close()  # it may own the socket (Connection: close): hang up now
                raise
            return resp.status, ctype, data, resp.will_close
        data = resp.read(ERROR_LIMIT)  # only a message is wanted: the rest is dropped
        resp.close()
        return resp.status, ctype, data, True

    def request(self, method: str, path: str, body: bytes | None = None,
                content_type: str | None = None, limit: int = INFO_LIMIT) -> tuple[str, bytes]:
        """One call with bounded retries; returns (content type, body) of a 2xx answer of at
        most `limit` bytes. Each try is cut off `timeout` seconds after it starts."""
        headers = {"Accept": NPZ if path == "/predict" else "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        tries = self.retries + 1
        what = f"{method} {self.url}{path}"
        for attempt in range(tries):
            try:
                status, ctype, data = self._once(method, path, body, headers, limit)
            except AnswerTooLarge as exc:
                raise ModelError(f"{what} sent an invalid answer: {exc}",
                                 hint=f"the server must speak {PROTOCOL} (README of "
                                      "segtk-http); `segtk serve` does") from exc
            except TimeoutError:
                problem, hint = (f"no answer within {self.timeout:g} s",
                                 "the server is slow or stuck: raise timeout= in the model spec "
                                 f"({self.url},timeout=120) or send smaller batches")
            except (OSError, http.client.HTTPException) as exc:
                problem, hint = (f"cannot connect ({type(exc).__name__}: {bounded(str(exc))})",
                                 f"is the server running? {SERVE_HINT}")
            else:
                if 200 <= status < 300:
                    return ctype, data
                problem = f"HTTP {status}: {_server_message(data)}"
                hint = "the server failed; see its log"
                if status == 413:
                    hint = ("the request is over the server's limits (see its /info); send "
                            "smaller batches (batch=N in the model spec) or raise the server's "
                            "limits (segtk serve --help)")
                elif status == 401:
                    hint = (f"the server needs its token: set {TOKEN_ENV} to the token it was "
                            f"started with (segtk serve --token, or {TOKEN_ENV})")
                elif status == 403:
                    hint = ("the server does not serve the host name of this URL: use "
                            "127.0.0.1 or localhost, or restart it with --allow-host NAME")
                elif status == 408:
                    hint = ("the server's body deadline passed before the request arrived: "
                            "send smaller batches (batch=N) or raise segtk serve --body-timeout")
                elif status < 500:
                    hint = ("the request does not follow segtk-http/1 for this server "
                            "(see plugins/models/http/README.md)")
                if status not in RETRY_STATUS:
                    raise ModelError(f"{what} was refused: {problem}", hint=hint)
            if attempt + 1 < tries:
                time.sleep(self.backoff * 2**attempt)
        if method == "POST":
            hint += "; results written so far are kept, rerun with --resume"
        raise ModelError(f"{what} failed after {tries} tr{'y' if tries == 1 else 'ies'}: {problem}",
                         hint=hint)

    # --- protocol --------------------------------------------------------------------------

    def _info(self) -> dict[str, Any]:
        _, data = self.request("GET", "/info")
        try:
            info = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            info = None
        classes = info.get("classes") if isinstance(info, dict) else None
        if not (isinstance(classes, list) and classes and all(isinstance(c, str) for c in classes)):
            raise ModelError(f"{self.url}/info is not a segtk-http server's answer "
                             f"(no class list): {data[:120]!r}",
                             hint=f"the URL must point at a {PROTOCOL} server; {SERVE_HINT}")
        return info

    def stats(self) -> dict[str, Any]:
        """The server's own counters (GET /stats)."""
        return json.loads(self.request("GET", "/stats")[1])

    def _predict_chunk(self, chunk: np.ndarray) -> np.ndarray:
        n, _, h, w = chunk.shape
        ctype, data = self.request("POST", "/predict", dump_npz(images=chunk), NPZ,
                                   limit=answer_limit(n, h, w))
        try:
            return read_labels(data, (n, h, w))
        except WrongLabels as exc:
            raise ModelError(f"{self.url}/predict sent {exc}",
                             hint=f"the server must speak {PROTOCOL}") from exc
        except ProtocolError as exc:
            raise ModelError(f"{self.url}/predict sent an invalid answer: {exc} "
                             f"(content type {bounded(ctype, 60)!r}, {len(data)} bytes: "
                             f"{data[:60]!r})",
                             hint=f"the server must speak {PROTOCOL} (README of segtk-http); "
                                  "`segtk serve` does") from exc

    def per_request(self, height: int, width: int) -> int:
        """Images of height x width that one request may carry within the server's limits."""
        pixels = height * width
        if self.max_pixels and pixels > self.max_pixels:
            raise ModelError(f"{self.url} takes images of at most {self.max_pixels} pixels, "
                             f"these are {height}x{width}",
                             hint="use smaller images, or restart the server with a larger "
                                  "`segtk serve --max-pixels`")
        fit = self.batch
        for most in (self.max_request_pixels, self.max_forward_pixels):
            if most:  # one forward pass per request: the model sees this client's batches
                fit = min(fit, most // max(pixels, 1))
        if self.max_body_bytes:  # float32 RGB plus the npz's headers
            fit = min(fit, (self.max_body_bytes - NPZ_OVERHEAD) // max(12 * pixels, 1))
        return max(fit, 1)

    @property
    def num_outputs(self) -> int:
        """The served model's outputs, as its server says (the classes if it does not)."""
        return self._outputs or self.num_classes

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        array = np.ascontiguousarray(images.detach().to("cpu", torch.float32).numpy())
        if array.shape[0] == 0:
            return torch.empty(0, *images.shape[2:], dtype=torch.long)
        step = self.per_request(*array.shape[2:])
        parts = []
        for start in range(0, array.shape[0], step):
            chunk = array[start:start + step]
            parts.append(self._predict_chunk(chunk))
            with self._count_lock:
                self.queries += chunk.shape[0]
                self.requests += 1
        return torch.from_numpy(np.concatenate(parts).astype(np.int64)).to(images.device)


def _positive(info: dict[str, Any], key: str) -> int | None:
    value = info.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _server_message(data: bytes) -> str:
    try:
        payload = json.loads(data)
        if isinstance(payload, dict) and "error" in payload:
            return bounded(str(payload["error"]))
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    return repr(data[:200])


class AnswerTooLarge(ValueError):
    """An answer longer than what the request can legitimately get back."""


class WrongLabels(ValueError):
    """Labels whose npy header has another shape or dtype than the request implies."""


def answer_limit(n: int, height: int, width: int) -> int:
    """The most bytes labels for n images of height x width take as npz (int64 at worst)."""
    return 8 * n * height * width + ANSWER_OVERHEAD


def read_bounded(resp: http.client.HTTPResponse, limit: int) -> bytes:
    """The answer's body, refused (AnswerTooLarge) as soon as it passes `limit` bytes."""
    declared = (resp.getheader("content-length") or "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise AnswerTooLarge(f"an answer of {declared} bytes, more than the {limit} this "
                             "request's labels can take")
    data = resp.read(limit + 1)
    if len(data) > limit:
        raise AnswerTooLarge(f"an answer of more than {limit} bytes, the most this request's "
                             "labels can take")
    return data


def read_labels(data: bytes, expected: tuple[int, int, int]) -> np.ndarray:
    """`labels` [N,H,W] from an npz answer; its zip directory and npy header (shape, dtype)
    are checked before a byte is inflated, so a deflate bomb costs nothing."""
    body = io.BytesIO(data)
    try:
        check_directory(body, "the answer")
        with zipfile.ZipFile(body) as zf:
            fp, header = open_member(zf, "labels", "npz answer",
                                     lambda h: check_labels_header(h, expected))
            with fp:
                raw = fp.read(header.nbytes)
    except (ProtocolError, WrongLabels):
        raise
    except NPZ_ERRORS as exc:
        raise ProtocolError(f"body is not a valid npz file ({type(exc).__name__}: "
                            f"{bounded(str(exc), 200)})") from exc
    if len(raw) != header.nbytes:
        raise ProtocolError(f"labels.npy ends early ({len(raw)} of {header.nbytes} bytes)")
    return as_array(raw, header)


def check_labels_header(header: Header, expected: tuple[int, int, int]) -> None:
    if header.shape != expected or header.dtype.kind not in "ui" or header.dtype.itemsize > 8:
        raise WrongLabels(f"labels {header.dtype} {list(header.shape)}, expected uint8/uint16 "
                          f"{list(expected)} (from the npy header, nothing inflated)")


class Deadline:
    """Cuts an attempt's connection `seconds` after the attempt starts: `timeout=` bounds the
    whole exchange, not each socket read, so a server trickling bytes cannot hold the caller."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, conn: http.client.HTTPConnection) -> None:
        """Cut `conn` at the deadline; connects it now so there is a socket to cut."""
        with self._lock:
            self._conn = conn
        if conn.sock is None:
            conn.connect()
        if self.expired:
            raise TimeoutError("the deadline passed while connecting")

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sock = self._conn.sock if self._conn is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked read or write at once
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


OPTION_KINDS: dict[str, Any] = {"timeout": float, "retries": int, "backoff": float, "batch": int}


def parse(arg: str) -> tuple[str, dict[str, Any]]:
    """'http://h:1,timeout=5' -> ('http://h:1', {'timeout': 5.0}); 'h:1' gets http:// added."""
    url, *options = [part.strip() for part in arg.split(",")] if arg else [""]
    if not url:
        raise ModelError("no server URL given", hint=f"syntax: {SYNTAX}")
    if "://" not in url:
        url = "http://" + url.lstrip("/")
    given = parse_pairs(options, "http option", OPTION_KINDS, error=ModelError,
                        hint=f"syntax: {SYNTAX}")
    kwargs = {key: convert(value, OPTION_KINDS[key], key, error=ModelError, hint=f"syntax: {SYNTAX}")
              for key, value in given.items()}
    return url, kwargs


def load(arg: str) -> HttpSegmenter:
    url, kwargs = parse(arg)
    return HttpSegmenter(url, **kwargs)
