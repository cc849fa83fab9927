"""What keeps untrusted clients of `segtk serve` from locking others out or reaching it unasked.

* Connections: at most `max_connections` sockets are open at once, counted when they are
  accepted (below the open-file limit, so accept() never fails with EMFILE). At the cap, a new
  connection closes the longest-idle one (no request in progress); if every one is busy, it is
  answered 503 and closed at once. A connection whose request headers have not arrived
  `header_timeout` seconds after it opened (or after its last answer) is closed.
* Requests: on a loopback bind only Host names of this machine are served (403 otherwise), so a
  web page that rebinds its DNS name to 127.0.0.1 cannot query the model; with a token, every
  request needs `Authorization: Bearer TOKEN` (401 otherwise), compared in constant time.
* Logs: each cause is logged once, then at most once a minute with a count of the ones left out.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from segtk.core import SegtkError

try:
    import resource
except ImportError:  # Windows: no open-file limit to read
    resource = None  # type: ignore[assignment]

LOGGER = "uvicorn.error"  # the server's messages share uvicorn's log and its format
FD_RESERVE = 64  # open files kept free of connections: the model, logs, worker threads
DEFAULT_MAX_CONNECTIONS = 1000
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
BUSY_ANSWER = json.dumps({"error": "the server is busy: every connection it takes is in use "
                                   "(segtk serve --max-connections); retry"}).encode()


# --- connections -------------------------------------------------------------------------------

def open_file_room(reserve: int = FD_RESERVE) -> int | None:
    """File descriptors this process may still open, less `reserve`; None where unlimited or
    not knowable (no `resource` module)."""
    if resource is None:
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            in_use = len(os.listdir(folder))
            break
        except OSError:
            continue
    else:
        in_use = reserve
    return soft - in_use - reserve


def connection_cap(requested: int | None) -> int:
    """--max-connections, checked against the open-file limit (None: what the limit leaves, at
    most 1000), so accepting a connection never fails for want of a file descriptor."""
    room = open_file_room()
    if requested is None:
        requested = DEFAULT_MAX_CONNECTIONS if room is None else min(DEFAULT_MAX_CONNECTIONS, room)
    if room is not None and requested > room:
        raise SegtkError(
            f"--max-connections {requested} does not fit the open-file limit: {max(room, 0)} "
            f"connections fit beside the files open now and {FD_RESERVE} kept free",
            hint="raise the limit (ulimit -n 4096) or lower --max-connections")
    if requested < 1:
        raise SegtkError("--max-connections must be at least 1",
                         hint="raise the open-file limit (ulimit -n 4096)")
    return requested


class ConnectionGuard:
    """The open connections of one server: the cap, eviction, the header deadline."""

    def __init__(self, max_connections: int, header_timeout: float) -> None:
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.sockets = 0  # accepted and not yet closed: file descriptors in use for clients
        self.evicting = 0  # closed for room, their descriptors not yet freed
        self.pending = 0  # accepted, not yet handed to their protocol (so not yet evictable)
        self.idle_since: dict[Any, float] = {}  # open connection -> when it last had no request

    def accept(self, listener: socket.socket) -> tuple[socket.socket, Any]:
        """The next connection to serve (BlockingIOError when none waits): counted, or made
        room for by closing the longest-idle one; refused (503) when all are busy."""
        while True:
            if self.sockets >= self.max_connections and (self.evicting or self.pending):
                raise BlockingIOError  # the next loop turn frees descriptors, opens connections
            conn, address = socket.socket.accept(listener)
            if self.sockets < self.max_connections or self._evict_idle():
                self.sockets += 1
                self.pending += 1
                return conn, address
            log_cause(logging.WARNING, "every one of %d connections is in use "
                      "(segtk serve --max-connections): new ones get 503", self.max_connections)
            refuse(conn)

    def _evict_idle(self) -> bool:
        idle = [(since, proto) for proto, since in self.idle_since.items() if not busy(proto)]
        if not idle:
            return False
        _, oldest = min(idle, key=lambda pair: pair[0])
        log_cause(logging.INFO, "%d connections open (segtk serve --max-connections): each "
                  "new one closes the longest-idle one", self.max_connections)
        self.evicting += 1
        oldest.guard_evicted = True
        self.forget(oldest)
        oldest.transport.abort()
        return True

    def opened(self, proto: Any) -> None:
        self.pending -= 1
        proto.guard_opened = True
        self.idle_since[proto] = loop_time()
        proto.guard_timer = asyncio.get_running_loop().call_later(
            self.header_timeout, self._check_headers, proto)

    def idle(self, proto: Any) -> None:
        if proto in self.idle_since:
            self.idle_since[proto] = loop_time()

    def closed(self, proto: Any) -> None:
        self.sockets -= 1
        if not getattr(proto, "guard_opened", False):
            self.pending -= 1
        if getattr(proto, "guard_evicted", False):
            self.evicting -= 1
        self.forget(proto)

    def forget(self, proto: Any) -> None:
        self.idle_since.pop(proto, None)
        timer = getattr(proto, "guard_timer", None)
        if timer is not None:
            timer.cancel()

    def _check_headers(self, proto: Any) -> None:
        """Close `proto` if no request arrived within the deadline; else look again later."""
        since = self.idle_since.get(proto)
        if since is None:
            return
        waited = loop_time() - since
        if not busy(proto) and waited >= self.header_timeout:
            self.forget(proto)
            proto.transport.abort()
            return
        wait = self.header_timeout if busy(proto) else self.header_timeout - waited
        proto.guard_timer = asyncio.get_running_loop().call_later(wait, self._check_headers, proto)


def loop_time() -> float:
    return asyncio.get_running_loop().time()


def busy(proto: Any) -> bool:
    """A request in progress, or an answer not yet sent out: not idle."""
    cycle = proto.cycle
    return (cycle is not None and not cycle.response_complete) or \
        proto.transport.get_write_buffer_size() > 0


def refuse(conn: socket.socket) -> None:
    """Answer 503 (the segtk client retries) and close at once, freeing the descriptor."""
    head = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(BUSY_ANSWER))
    try:
        conn.setblocking(False)
        conn.send(head + BUSY_ANSWER)
    except OSError:
        pass
    finally:
        conn.close()


class GuardedSocket(socket.socket):
    """A listening socket whose accept() goes through a ConnectionGuard (asyncio calls it)."""

    guard: ConnectionGuard

    def accept(self) -> tuple[socket.socket, Any]:
        return self.guard.accept(self)


def guarded(sock: socket.socket, guard: ConnectionGuard) -> GuardedSocket:
    """`sock` (listening) as a GuardedSocket; `sock` itself is detached."""
    out = GuardedSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    out.guard = guard
    return out


def guarded_protocol(guard: ConnectionGuard) -> type:
    """uvicorn's h11 protocol, telling `guard` when a connection opens, closes and is idle."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            guard.opened(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            guard.idle(self)

    return GuardedH11Protocol


# --- requests: Host and token ------------------------------------------------------------------

def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name) is this machine only."""
    try:
        addresses = {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:  # a name: every address it resolves to must be loopback
        try:
            addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0])
                         for info in socket.getaddrinfo(host, None)}
        except (OSError, ValueError):
            addresses = set()
    return bool(addresses) and all(a.is_loopback for a in addresses)


def host_name(value: str) -> str:
    """The name part of a Host header value, lower case: 'LocalHost:80' -> 'localhost',
    '[::1]:8000' -> '[::1]'."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[:value.find("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_hosts(host: str, extra: Iterable[str]) -> frozenset[str] | None:
    """The Host names served (None: any): on a loopback bind the loopback names and `host`,
    plus `extra` (--allow-host); '*' in `extra` turns the check off."""
    extra = {host_name(name) for name in extra}
    if "*" in extra or not (extra or is_loopback(host)):
        return None
    own = host_name(f"[{host}]" if ":" in host.strip("[]") else host)
    return frozenset(LOOPBACK_NAMES | {own} | extra)


def check_token(token: str | None) -> str | None:
    """The token, if any ('' is none); one that cannot travel in a header is refused."""
    if not token:
        return None
    if not token.isascii() or not token.isprintable() or " " in token:
        raise SegtkError("--token (or SEGTK_TOKEN) must be printable ASCII without spaces",
                         hint='e.g. export SEGTK_TOKEN="$(python -c \'import secrets; '
                              'print(secrets.token_urlsafe(32))\')"')
    return token


@dataclass(frozen=True)
class Access:
    """Who may query the server: a bearer token (None: anyone) and the Host names served
    (None: any)."""

    token: str | None = None
    hosts: frozenset[str] | None = None

    def refusal(self, headers: list[tuple[bytes, bytes]]) -> tuple[int, str] | None:
        """(status, message) for a request these headers do not admit, else None."""
        values = dict(headers)
        if self.hosts is not None:
            name = host_name(values.get(b"host", b"").decode("latin-1"))
            if name not in self.hosts:
                return 403, (f"Host {name[:100]!r} is not served here (only "
                             f"{', '.join(sorted(self.hosts))}); a web page cannot query this "
                             "server: start it with --allow-host NAME to serve another name")
        if self.token is not None:
            scheme, _, given = values.get(b"authorization", b"").partition(b" ")
            if scheme.lower() != b"bearer" or not given:
                return 401, ("this server needs a token: send Authorization: Bearer TOKEN "
                             "(the segtk client sends $SEGTK_TOKEN)")
            if not hmac.compare_digest(given.strip(), self.token.encode()):
                return 401, "wrong token (Authorization: Bearer TOKEN; the segtk client sends " \
                            "$SEGTK_TOKEN)"
        return None


Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


class AccessGate:
    """ASGI middleware refusing requests `access` does not admit, before any body is read."""

    def __init__(self, app: Callable[..., Awaitable[None]], access: Access,
                 refused: Callable[[], None] = lambda: None) -> None:
        self.app, self.access, self.refused = app, access, refused

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.access.refusal(scope["headers"])
            if refusal is not None:
                self.refused()
                status, message = refusal
                body = json.dumps({"error": message}).encode()
                headers = [(b"content-type", b"application/json"),
                           (b"content-length", str(len(body)).encode()),
                           (b"connection", b"close")]  # a body may follow, unread
                if status == 401:
                    headers.append((b"www-authenticate", b"Bearer"))
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


# --- logs ---------------------------------------------------------------------------------------

class OncePerCause(logging.Filter):
    """Lets the first record of each cause through (with its traceback), then one per `every`
    seconds saying how many were left out: a flood of failing connections logs a few lines,
    not a traceback each. A cause is the logger, the level, the message's first line (before
    its arguments) and the exception's type."""

    MAX_CAUSES = 256

    def __init__(self, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every, self.clock = every, clock
        self.causes: dict[tuple[str, int, str, str], list[float]] = {}  # -> [shown at, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        kind = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, record.levelno, str(record.msg).partition("\n")[0][:200], kind)
        now, seen = self.clock(), self.causes.get(key)
        if seen is None:
            if len(self.causes) >= self.MAX_CAUSES:
                self.causes.pop(next(iter(self.causes)))
            self.causes[key] = [now, 0]
            return True
        if now - seen[0] < self.every:
            seen[1] += 1
            return False
        left_out, elapsed = int(seen[1]), now - seen[0]
        seen[:] = [now, 0]
        if left_out:
            record.msg = (f"{record.getMessage().partition(chr(10))[0]} (and {left_out} more like "
                          f"this in the last {elapsed:.0f} s, not shown)")
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


ONCE_PER_CAUSE = OncePerCause()


def log_once_per_cause(names: Iterable[str] = (LOGGER, "asyncio")) -> None:
    """Install the filter on the server's loggers (once)."""
    for name in names:
        logger = logging.getLogger(name)
        if ONCE_PER_CAUSE not in logger.filters:
            logger.addFilter(ONCE_PER_CAUSE)


def log_cause(level: int, message: str, *args: object, exc: BaseException | None = None) -> None:
    """Log on the server's logger; ONCE_PER_CAUSE keeps repeats of `message` out."""
    logging.getLogger(LOGGER).log(level, message, *args,
                                  exc_info=(type(exc), exc, exc.__traceback__) if exc else None)
