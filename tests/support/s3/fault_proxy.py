"""A loopback reverse proxy that injects HTTP faults between an S3 client and an S3 server.

It listens on 127.0.0.1 (a free port), forwards every request to one upstream endpoint and
applies the first :class:`Rule` that fires for it. One thread accepts, one thread serves each
client connection (keep-alive: botocore/aiohttp reuse connections), each with its own keep-alive
connection upstream. Bodies are read in full (``Content-Length`` or chunked, ``Expect:
100-continue`` answered by the proxy itself: botocore sends it on PutObject and waits) and
forwarded with a ``Content-Length``; the request line, the path and every signed header are sent
unchanged, so SigV4 signatures still verify upstream (``Expect`` is never signed).

Actions:

* ``pass``: forward unchanged (with :attr:`Rule.before`, e.g. to let another writer commit
  first);
* ``drop_request``: read the request, then close the client connection; nothing is forwarded;
* ``drop_response``: forward, read the server's full answer (the server applied the request),
  then close the client connection without answering: the ambiguous outcome;
* ``status_503`` / ``status_500``: answer ``SlowDown`` / ``InternalError`` without forwarding;
* ``delay=<ms>``: wait, then forward;
* ``reset_midway``: forward, send the first half of the answer, then reset the connection.

Every request is recorded (:class:`Exchange`) with the action applied, so tests can assert what
happened. Use as a context manager; :meth:`FaultProxy.stop` closes the listener and every
connection.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import BinaryIO

ACTIONS = ("pass", "drop_request", "drop_response", "status_503", "status_500", "delay", "reset_midway")
# Headers kept in the record (lower case).
INTERESTING = ("if-none-match", "if-match", "expect", "content-length", "transfer-encoding", "range",
               "connection")
# Hop-by-hop headers: never forwarded as they are (the body is re-framed with Content-Length).
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "expect", "content-length"}
_MAX_HEAD = 64 * 1024

_ERROR_BODIES = {
    503: ("Slow Down", "SlowDown", "Please reduce your request rate."),
    500: ("Internal Server Error", "InternalError", "We encountered an internal error. Please try again."),
}


@dataclass
class Exchange:
    """One request the proxy received, and what it did with it."""

    seq: int
    connection: int
    method: str
    target: str  # unquoted path and query
    headers: dict[str, str]  # INTERESTING headers only, lower-case names
    action: str | None = None  # None: forwarded untouched
    rule: str | None = None
    status: int | None = None  # the upstream status (even when the client never saw it), or ours
    answered: bool = False  # whether the client got a complete answer
    started: float = field(default_factory=time.monotonic)
    body: bytes = field(default=b"", repr=False)  # POST bodies only (e.g. DeleteObjects' key list)

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def query(self) -> str:
        return self.target.split("?", 1)[1] if "?" in self.target else ""


@dataclass
class Rule:
    """Which requests get which fault.

    A request matches when its method equals :attr:`method` (None: any), :attr:`path` (a regex)
    is found in its unquoted ``path?query``, it carries :attr:`header` (if set) and satisfies
    :attr:`predicate` (if set), and, with :attr:`after_status`, its path already got that status
    through this proxy (e.g. 412: the read-back GET after a refused create), and, with
    :attr:`after_method`, its path already got a request with that method (e.g. the GET of a
    snapshot after a create-PUT of it, whatever became of that PUT). A match fires on
    occurrences ``nth .. nth + times - 1`` (``times=None``: every one from ``nth``), or, with
    :attr:`probability`, at random from a RNG seeded with :attr:`seed`.
    """

    action: str
    method: str | None = None
    path: str = ""
    header: str | None = None
    predicate: Callable[[Exchange], bool] | None = None
    after_status: int | None = None
    after_method: str | None = None
    nth: int = 1
    times: int | None = 1
    probability: float | None = None
    seed: int = 0
    before: Callable[[Exchange], None] | None = None
    name: str = ""
    delay_ms: int = 0
    matched: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)
    _rng: random.Random = field(init=False, repr=False)
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.action.startswith("delay="):
            self.delay_ms = int(self.action.split("=", 1)[1])
            self.action = "delay"
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r} (one of {ACTIONS})")
        self._rng = random.Random(self.seed)
        self._regex = re.compile(self.path)
        if not self.name:
            self.name = f"{self.method or '*'} {self.path} {self.label}"

    @property
    def label(self) -> str:
        return f"delay={self.delay_ms}" if self.action == "delay" else self.action

    def matches(self, exchange: Exchange, statuses: Mapping[str, set[int]],
                methods: Mapping[str, set[str]]) -> bool:
        if self.method is not None and exchange.method != self.method.upper():
            return False
        if not self._regex.search(exchange.target):
            return False
        if self.header is not None and self.header.lower() not in exchange.headers:
            return False
        if self.after_status is not None and self.after_status not in statuses.get(exchange.path, ()):
            return False
        if self.after_method is not None and self.after_method.upper() not in methods.get(exchange.path, ()):
            return False
        return self.predicate is None or self.predicate(exchange)

    def fires(self) -> bool:
        """Called once per match (counts it)."""
        self.matched += 1
        if self.probability is not None:
            hit = self._rng.random() < self.probability
        else:
            hit = self.matched >= self.nth and (self.times is None or self.matched < self.nth + self.times)
        if hit:
            self.fired += 1
        return hit


class _Dropped(Exception):
    """The client connection is to be closed now (a fault, or the client went away)."""


class FaultProxy:
    """``with FaultProxy("http://127.0.0.1:8333", [Rule(...)]) as proxy: proxy.endpoint``."""

    def __init__(self, upstream: str, rules: Iterable[Rule] = (), *, upstream_timeout_s: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http:// endpoint, not {upstream!r}")
        self.upstream_host = parsed.hostname
        self.upstream_port = parsed.port or 80
        self.upstream_timeout_s = upstream_timeout_s
        self._lock = threading.RLock()  # predicates may call requests()
        self._rules: list[Rule] = list(rules)
        self.exchanges: list[Exchange] = []
        self._statuses: dict[str, set[int]] = {}
        self._methods: dict[str, set[str]] = {}
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._clients: dict[int, socket.socket] = {}
        self._upstreams: dict[int, http.client.HTTPConnection] = {}
        self._threads: list[threading.Thread] = []
        self._next_connection = 0
        self.port = 0

    # ---- control ----------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FaultProxy:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"fault-proxy-{self.port}",
                                               daemon=True)
        self._accept_thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and every connection, and wait for the threads."""
        self._stopping.set()
        if self._accept_thread is not None:
            self._accept_thread.join(5)
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            clients = list(self._clients.values())
            upstreams = list(self._upstreams.values())
            threads = list(self._threads)
        for sock in clients:
            _shutdown(sock)
        for conn in upstreams:
            conn.close()
        for thread in threads:
            thread.join(5)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def set_rules(self, rules: Iterable[Rule]) -> None:
        """Replace the rules, and forget what was recorded (a new trial)."""
        with self._lock:
            self._rules = list(rules)
            self.exchanges = []
            self._statuses = {}
            self._methods = {}

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def faults(self) -> list[Exchange]:
        """The exchanges a fault was applied to."""
        with self._lock:
            return [e for e in self.exchanges if e.action is not None]

    def requests(self, method: str | None = None, path: str = "") -> list[Exchange]:
        regex = re.compile(path)
        with self._lock:
            return [e for e in self.exchanges
                    if (method is None or e.method == method) and regex.search(e.target)]

    # ---- serving ----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self._stopping.is_set():
                    client.close()
                    return
                self._next_connection += 1
                connection = self._next_connection
                self._clients[connection] = client
                thread = threading.Thread(target=self._serve, args=(connection, client),
                                          name=f"fault-proxy-{self.port}-{connection}", daemon=True)
                self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _serve(self, connection: int, client: socket.socket) -> None:
        reader = client.makefile("rb")
        try:
            while not self._stopping.is_set():
                keep_alive = self._one_exchange(connection, client, reader)
                if not keep_alive:
                    break
        except (_Dropped, OSError, ValueError):
            pass
        finally:
            reader.close()
            with self._lock:
                self._clients.pop(connection, None)
                upstream = self._upstreams.pop(connection, None)
            if upstream is not None:
                upstream.close()
            client.close()

    def _one_exchange(self, connection: int, client: socket.socket, reader: BinaryIO) -> bool:
        """Serve one request; False when the client connection is to be closed."""
        head = _read_head(reader)
        if head is None:
            return False
        method, raw_target, version, headers = head
        lower = {k.lower(): v for k, v in headers}
        if lower.get("expect", "").lower() == "100-continue":
            client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = _read_body(reader, lower)
        client_keep_alive = _keep_alive(version, lower)
        exchange, rule = self._record(connection, method, raw_target, lower, body if method == "POST" else b"")
        if rule is not None and rule.before is not None:
            rule.before(exchange)
        action = rule.action if rule is not None else None
        if action == "drop_request":
            _shutdown(client)
            raise _Dropped
        if action in ("status_503", "status_500"):
            status = 503 if action == "status_503" else 500
            self._note_status(exchange, status)
            client.sendall(_error_response(status, method, raw_target))
            exchange.answered = True
            return client_keep_alive
        if action == "delay":
            assert rule is not None
            if self._stopping.wait(rule.delay_ms / 1000):
                raise _Dropped
        status, reason, response_headers, response_body = self._forward(connection, method, raw_target,
                                                                         headers, body)
        self._note_status(exchange, status)
        if action == "drop_response":
            _shutdown(client)
            raise _Dropped
        response = _response_bytes(status, reason, response_headers, response_body, method)
        if action == "reset_midway":
            client.sendall(response[:max(1, len(response) // 2)])
            _reset(client)
            raise _Dropped
        client.sendall(response)
        exchange.answered = True
        return client_keep_alive

    def _record(self, connection: int, method: str, raw_target: str, lower: Mapping[str, str],
                body: bytes) -> tuple[Exchange, Rule | None]:
        with self._lock:
            exchange = Exchange(len(self.exchanges) + 1, connection, method, urllib.parse.unquote(raw_target),
                                {k: v for k, v in lower.items() if k in INTERESTING}, body=body)
            chosen: Rule | None = None
            for rule in self._rules:
                if rule.matches(exchange, self._statuses, self._methods) and rule.fires() and chosen is None:
                    chosen = rule
            self._methods.setdefault(exchange.path, set()).add(method)
            if chosen is not None:
                exchange.action, exchange.rule = chosen.label, chosen.name
            self.exchanges.append(exchange)
            return exchange, chosen

    def _note_status(self, exchange: Exchange, status: int) -> None:
        with self._lock:
            exchange.status = status
            self._statuses.setdefault(exchange.path, set()).add(status)

    def _forward(self, connection: int, method: str, target: str, headers: list[tuple[str, str]],
                 body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        framed = any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers)
        for attempt in range(2):
            with self._lock:
                upstream = self._upstreams.get(connection)
                reused = upstream is not None
                if upstream is None:
                    upstream = http.client.HTTPConnection(self.upstream_host, self.upstream_port,
                                                          timeout=self.upstream_timeout_s)
                    self._upstreams[connection] = upstream
            try:
                upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                for name, value in headers:
                    if name.lower() not in _HOP:
                        upstream.putheader(name, value)
                if framed or body:
                    upstream.putheader("Content-Length", str(len(body)))
                upstream.endheaders(body or None)
                response = upstream.getresponse()
                data = response.read()
                result = (response.status, response.reason, response.getheaders(), data)
                if response.will_close:
                    upstream.close()
                return result
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                upstream.close()
                with self._lock:
                    self._upstreams.pop(connection, None)
                if self._stopping.is_set() or not reused or attempt:
                    raise _Dropped from None
                # A keep-alive connection the server had closed while idle: once more on a new one.
            except (OSError, http.client.HTTPException):
                upstream.close()
                with self._lock:
                    self._upstreams.pop(connection, None)
                raise _Dropped from None
        raise _Dropped


def _read_head(reader: BinaryIO) -> tuple[str, str, str, list[tuple[str, str]]] | None:
    line = reader.readline(_MAX_HEAD)
    while line in (b"\r\n", b"\n"):  # tolerate stray blank lines between requests
        line = reader.readline(_MAX_HEAD)
    if not line:
        return None
    parts = line.decode("latin-1").rstrip("\r\n").split(" ")
    if len(parts) != 3:
        raise ValueError(f"bad request line {line!r}")
    method, target, version = parts
    headers: list[tuple[str, str]] = []
    while True:
        raw = reader.readline(_MAX_HEAD)
        if not raw:
            raise _Dropped
        if raw in (b"\r\n", b"\n"):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return method.upper(), target, version, headers


def _read_body(reader: BinaryIO, lower: Mapping[str, str]) -> bytes:
    if "chunked" in lower.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size_line = reader.readline(_MAX_HEAD)
            if not size_line:
                raise _Dropped
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while reader.readline(_MAX_HEAD) not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)
            chunks.append(_read_exactly(reader, size))
            reader.readline(_MAX_HEAD)  # the CRLF after the chunk
    length = int(lower.get("content-length", "0") or 0)
    return _read_exactly(reader, length) if length else b""


def _read_exactly(reader: BinaryIO, size: int) -> bytes:
    data = reader.read(size)
    if data is None or len(data) != size:
        raise _Dropped
    return data


def _keep_alive(version: str, lower: Mapping[str, str]) -> bool:
    connection = lower.get("connection", "").lower()
    if version == "HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


def _response_bytes(status: int, reason: str, headers: list[tuple[str, str]], body: bytes, method: str) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason}"]
    bodyless = method == "HEAD" or status in (204, 304) or 100 <= status < 200
    for name, value in headers:
        lname = name.lower()
        if lname in _HOP and not (lname == "content-length" and bodyless):
            continue
        lines.append(f"{name}: {value}")
    if not bodyless:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if bodyless else head + body


def _error_response(status: int, method: str, target: str) -> bytes:
    reason, code, message = _ERROR_BODIES[status]
    resource = urllib.parse.unquote(target.split("?", 1)[0])
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<Resource>{resource}</Resource><RequestId>fault-proxy</RequestId></Error>").encode()
    headers = [("Content-Type", "application/xml"), ("x-amz-request-id", "fault-proxy")]
    if method == "HEAD":
        headers.append(("Content-Length", str(len(body))))
    return _response_bytes(status, reason, headers, body, method)


def _shutdown(sock: socket.socket) -> None:
    """Close a connection now (FIN), waking any thread blocked reading it."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _reset(sock: socket.socket) -> None:
    """Abort a connection (RST instead of FIN)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()
