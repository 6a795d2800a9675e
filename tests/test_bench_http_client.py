"""bench.http_client, the load generator's lean HTTP/1.1 client, against a real local server."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import pytest
from bench.http_client import Connection, HTTPError


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn

    def do_POST(self):  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/chunked":  # an answer the client does not read: no Content-Length
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"2\r\nok\r\n0\r\n\r\n")
            return
        answer = json.dumps(
            {"path": self.path, "echo": json.loads(body), "peer": self.client_address[1]}
        ).encode()
        self.send_response(200 if self.path == "/ok" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        if self.path == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def test_posts_share_one_connection_and_read_status_and_body(server):
    async def go():
        c = Connection("127.0.0.1", server, timeout=10)
        answers = [await c.post("/ok", json.dumps({"i": i}).encode()) for i in range(3)]
        missing = await c.post("/nowhere", b"{}")
        await c.close()
        return answers, missing

    answers, missing = asyncio.run(go())
    assert [status for status, _ in answers] == [200, 200, 200]
    bodies = [json.loads(body) for _, body in answers]
    assert [b["echo"] for b in bodies] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert len({b["peer"] for b in bodies}) == 1  # the same client port: one keep-alive connection
    assert missing[0] == 404 and json.loads(missing[1])["path"] == "/nowhere"


def test_a_closed_connection_is_reopened_and_unreadable_answers_raise(server):
    async def go():
        c = Connection("127.0.0.1", server, timeout=10)
        first = json.loads((await c.post("/close", b"{}"))[1])["peer"]
        second = json.loads((await c.post("/ok", b"{}"))[1])["peer"]
        with pytest.raises(HTTPError, match="Content-Length"):
            await c.post("/chunked", b"{}")
        after = await c.post("/ok", json.dumps({"after": "chunked"}).encode())  # not the chunk's leftovers
        await c.close()
        return first, second, after

    first, second, after = asyncio.run(go())
    assert first != second  # the server said close: the next request opened a new connection
    assert after[0] == 200 and json.loads(after[1])["echo"] == {"after": "chunked"}


def test_a_refused_connection_raises_http_error():
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def go():
        c = Connection("127.0.0.1", port, timeout=5)
        await c.post("/ok", b"{}")

    with pytest.raises(HTTPError):
        asyncio.run(go())
