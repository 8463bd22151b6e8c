"""A test's route for HTTPS, set in the environment as a network's is: through a proxy.

urllib, and so the migration step's answer to CloudFormation, sends an https
request through the proxy ``https_proxy`` names, asking it to CONNECT to the
URL's own host; the host name is never resolved on this side. ``route_https``
sets that route (and drops the opener urlopen built from the environment
before); ``tunnel_to_this_machine`` is a proxy that answers for any host from
127.0.0.1, so a URL naming an S3 host reaches a local stand-in for S3, its
TLS checked against that host name as S3's would be.
"""

from __future__ import annotations

import http.server
import select
import socket
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

_IDLE_S = 10  # a tunnel with nothing to carry for this long is closed


@contextmanager
def route_https(monkeypatch: pytest.MonkeyPatch, proxy: str) -> Iterator[None]:
    """Every https request urlopen makes inside the block goes through ``proxy``."""
    for name in ("HTTPS_PROXY", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("https_proxy", proxy)
    # urlopen keeps its first opener, and the proxies it read then, for the
    # whole process: a fresh one reads this route, and the next test's reads its own.
    urllib.request.install_opener(None)
    try:
        yield
    finally:
        urllib.request.install_opener(None)


class _Tunnel(http.server.BaseHTTPRequestHandler):
    """CONNECT host:port: a tunnel to 127.0.0.1 at that port, whatever the host."""

    def do_CONNECT(self) -> None:
        port = int(self.path.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=_IDLE_S) as upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            _carry(self.connection, upstream)

    def log_message(self, *_: object) -> None:
        return None


def _carry(client: socket.socket, upstream: socket.socket) -> None:
    """Pass bytes both ways until either side closes or both fall quiet."""
    ends = {client: upstream, upstream: client}
    while True:
        readable, _, _ = select.select(list(ends), [], [], _IDLE_S)
        if not readable:
            return
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            ends[source].sendall(data)


@contextmanager
def tunnel_to_this_machine() -> Iterator[str]:
    """A local CONNECT proxy, running for the block: its URL, for ``route_https``."""
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Tunnel)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()
        proxy.server_close()
