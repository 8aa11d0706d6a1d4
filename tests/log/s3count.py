"""A counting HTTP proxy in front of the moto S3 server: every request an S3 client makes
through it is recorded as ``(method, path, query)`` before it is forwarded unchanged.

It counts what actually crosses the wire (one ``open_input_file`` may be a HEAD and a
GET; one listing may be several pages), which a wrapper around the pyarrow filesystem
cannot see. Point an ``S3FileSystem`` (``s3.endpoint`` option) at :attr:`endpoint`.
"""
from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# hop-by-hop headers are the proxy's own business (RFC 9110 7.6.1)
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
        "trailer", "upgrade"}


class CountingProxy:
    """Forwards to ``target`` (``http://host:port``); :attr:`requests` lists what passed."""

    def __init__(self, target: str):
        parts = urlsplit(target)
        self._target = (parts.hostname, parts.port)
        self.requests: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):   # quiet
                pass

            def _forward(self):
                url = urlsplit(self.path)
                with proxy._lock:
                    proxy.requests.append((self.command, url.path, url.query))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = getattr(self, "_upstream", None)
                if conn is None:
                    conn = self._upstream = http.client.HTTPConnection(*proxy._target,
                                                                       timeout=60)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in _HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                # a HEAD's Content-Length is the object's size, not the (empty) body's
                if self.command == "HEAD":
                    self.send_header("Content-Length", resp.getheader("Content-Length", "0"))
                else:
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def by_method(self) -> Counter:
        with self._lock:
            return Counter(m for m, _, _ in self.requests)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
