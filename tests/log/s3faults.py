"""A fault-injecting HTTP proxy in front of the moto S3 server (127.0.0.1 only).

Every request an S3 client sends through it is forwarded unchanged unless the current
:class:`Faults` rule picks it; a picked request gets, instead of moto's answer:

* ``500``: ``500 InternalError``; ``503``: ``503 ServiceUnavailable``;
* ``slowdown``: ``503 SlowDown`` (S3's throttling answer);
* ``reset``: the connection closed with an RST, nothing answered;
* ``short``: moto's status and headers (its full ``Content-Length``), then only the
  first half of the body, then the connection closed (a response cut short);
* ``truncated``: moto's status and headers, but half the body with a ``Content-Length``
  that says so (a well-formed response that holds less than was asked for; its
  ``Content-Range`` still names the whole range);
* ``latency``: moto's answer, after a delay.

A rule picks at most ``count`` requests (``None``: every one) among those whose method
is in ``methods`` (and whose path contains ``path_part``): every fault is bounded, and the
proxy never retries on its own.
"""
from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
        "trailer", "upgrade"}
KINDS = ("500", "503", "slowdown", "reset", "short", "truncated", "latency")
_ERRORS = {"500": (500, "InternalError", "We encountered an internal error."),
           "503": (503, "ServiceUnavailable", "Service is unable to handle request."),
           "slowdown": (503, "SlowDown", "Please reduce your request rate.")}


@dataclass
class Faults:
    kind: str
    methods: tuple = ("GET",)
    count: int | None = 1            # requests to fault (None: all of them)
    path_part: str = ""
    delay_s: float = 0.3              # latency
    after: int = 0                    # matching requests passed through first
    picked: list = field(default_factory=list)
    matched: int = 0

    def pick(self, method: str, path: str) -> bool:
        if method not in self.methods or self.path_part not in path:
            return False
        self.matched += 1
        if self.matched <= self.after:
            return False
        if self.count is not None and len(self.picked) >= self.count:
            return False
        self.picked.append((method, path))
        return True


class FaultProxy:
    """Forwards to ``target`` (``http://host:port``), applying :attr:`faults` (None:
    none). :attr:`requests` lists ``(method, path, fault kind or "")``."""

    def __init__(self, target: str):
        parts = urlsplit(target)
        self._target = (parts.hostname, parts.port)
        self.faults: Faults | None = None
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _body(self):
                """The request's body: by its Content-Length, or chunked (the S3
                client streams an upload's parts so)."""
                if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                    out = bytearray()
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass            # trailers
                            return bytes(out)
                        out += self.rfile.read(size)
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            def _reset(self):
                # SO_LINGER 0: close() sends an RST, the client sees a connection reset
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True

            def _forward(self):
                url = urlsplit(self.path)
                body = self._body()
                with proxy._lock:
                    rule = proxy.faults
                    kind = rule.kind if rule is not None and rule.pick(self.command,
                                                                       url.path) else ""
                    proxy.requests.append((self.command, url.path, kind))
                if kind == "reset":
                    return self._reset()
                if kind in _ERRORS:
                    status, code, message = _ERRORS[kind]
                    xml = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                           f"<Message>{message}</Message><RequestId>fault</RequestId>"
                           "</Error>").encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(xml)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(xml)
                    return None
                if kind == "latency":
                    time.sleep(rule.delay_s)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = http.client.HTTPConnection(*proxy._target, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                if kind == "truncated" and self.command != "HEAD":
                    data = data[:len(data) // 2]
                if self.command == "HEAD":
                    self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return None
                if kind == "short" and len(data) > 1:
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    return self._reset()
                self.wfile.write(data)
                return None

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass        # a client that gave up (a fault's point): not news

        self._server = Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"

    def set(self, faults: Faults | None) -> Faults | None:
        with self._lock:
            self.faults = faults
            self.requests.clear()
        return faults

    def faulted(self) -> int:
        with self._lock:
            return sum(1 for *_, k in self.requests if k)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
