"""Webhook deliveries of a real `memkv serve` to a real receiver on loopback, which verifies
every request with the Standard Webhooks specification's own library (PyPI `standardwebhooks`)
and fails some on purpose: each entry arrives signed, in order, at least once, retried with the
same `webhook-id` after a failure; a restarted server resumes after the last acknowledged entry
and replays none."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from standardwebhooks.webhooks import Webhook

import memkv

WAIT = 20.0


class Receiver:
    """An HTTP endpoint that verifies each delivery and answers 500 to the first `fail` attempts
    at each seq in `failing`."""

    def __init__(self, failing: dict[int, int]) -> None:
        self.secret: str | None = None
        self.failing = dict(failing)
        self.attempts: list[tuple[str, int, int]] = []  # (webhook-id, seq, status)
        self.refused: list[str] = []
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["content-length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    assert receiver.secret is not None
                    event = Webhook(receiver.secret).verify(body, headers)
                except Exception as exc:  # a bad signature: refused, and the test fails
                    with receiver.cond:
                        receiver.refused.append(repr(exc))
                        receiver.cond.notify_all()
                    self.send_response(400)
                    self.end_headers()
                    return
                seq = event["data"]["seq"]
                assert event["type"] == event["data"]["type"]
                assert event["timestamp"] == event["data"]["created_at"]
                with receiver.cond:
                    fail = receiver.failing.get(seq, 0) > 0
                    if fail:
                        receiver.failing[seq] -= 1
                    status = 500 if fail else 204
                    receiver.attempts.append((headers["webhook-id"], seq, status))
                    receiver.cond.notify_all()
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def delivered(self) -> list[int]:
        return [seq for _, seq, status in self.attempts if status == 204]

    def wait_for(self, predicate) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: predicate() or self.refused, timeout=WAIT), self.attempts
            assert not self.refused, self.refused

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def call(server: memkv.LocalServer, method: str, path: str, body: object | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        server.base_url + path,
        data=data,
        method=method,
        headers={"x-api-key": server.api_key, "content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return json.loads(response.read())


def create(server: memkv.LocalServer, store: str, path: str) -> None:
    answer = call(server, "POST", f"/v1/memory_stores/{store}/tool",
                  {"command": "create", "path": path, "file_text": "x"})
    assert answer["is_error"] is False, answer


def test_deliveries_are_signed_ordered_retried_and_resumed(tmp_path: Path, memkv_bin: str) -> None:
    db = tmp_path / "hooks.redb"
    receiver = Receiver(failing={2: 2})
    fast = ["--webhook-retry-base", "50ms", "--webhook-retry-max", "200ms", "--webhook-allow-private"]
    try:
        with memkv.serve_local(db, binary=memkv_bin, serve_options=fast) as server:
            hook = call(server, "POST", "/v1/webhooks", {"url": receiver.url, "stores": ["alice"]})
            assert hook["secret"].startswith("whsec_")
            receiver.secret = hook["secret"]
            for i in range(3):
                create(server, "alice", f"/memories/{i}.md")
            create(server, "bob", "/memories/not-for-this-hook.md")
            receiver.wait_for(lambda: len(receiver.delivered()) == 3)
            # In order, each once acknowledged; seq 2 failed twice and came again with the same
            # id; bob's entry (seq 4) was not wanted.
            assert receiver.delivered() == [1, 2, 3]
            attempts_of_2 = [a for a in receiver.attempts if a[1] == 2]
            assert [status for _, _, status in attempts_of_2] == [500, 500, 204]
            assert len({hook_id for hook_id, _, _ in attempts_of_2}) == 1
            listed = call(server, "GET", "/v1/webhooks")["data"]
            assert "secret" not in listed[0]
            # Caught up with the log: bob's entry, passed over, counts as done.
            deadline = time.monotonic() + WAIT
            while call(server, "GET", "/v1/webhooks")["data"][0]["delivered_seq"] != 4:
                assert time.monotonic() < deadline, "the cursor never passed bob's entry"
                time.sleep(0.02)
            assert call(server, "GET", "/v1/webhooks")["data"][0]["failures"] == 0
        before = len(receiver.attempts)
        # A new server on the same database resumes after seq 4: only the new entry comes.
        with memkv.serve_local(db, binary=memkv_bin, serve_options=fast) as server:
            create(server, "alice", "/memories/after-restart.md")
            receiver.wait_for(lambda: len(receiver.delivered()) == 4)
            assert [seq for _, seq, _ in receiver.attempts[before:]] == [5]
            gone = call(server, "DELETE", f"/v1/webhooks/{hook['id']}")
            assert gone == {"type": "webhook_deleted", "id": hook["id"]}
            assert call(server, "GET", "/v1/webhooks")["data"] == []
    finally:
        receiver.close()


def test_the_hosted_format_is_what_the_sdks_unwrap_reads(tmp_path: Path, memkv_bin: str) -> None:
    """An endpoint in the hosted API's format gets `memory_store.*` events that the SDK's own
    `client.beta.webhooks.unwrap()` verifies and parses, as an application written against the
    hosted API's webhooks would; memkv's finer entries (memory.*) are not sent to it."""
    import anthropic

    received: list[object] = []
    failures: list[str] = []
    cond = threading.Condition()
    secret: dict[str, str] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["content-length"])).decode()
            client = anthropic.Anthropic(api_key="unused", webhook_key=secret["key"])
            try:
                event = client.beta.webhooks.unwrap(body, headers=dict(self.headers.items()))
            except Exception as exc:  # a bad signature or shape: the test fails
                with cond:
                    failures.append(repr(exc))
                    cond.notify_all()
                self.send_response(400)
                self.end_headers()
                return
            with cond:
                received.append(event)
                cond.notify_all()
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{http.server_address[1]}/hook"
    try:
        with memkv.serve_local(tmp_path / "h.redb", binary=memkv_bin, serve_options=["--webhook-allow-private"]) as server:
            # The hosted format has no memory.* events: refused, naming the ones it has.
            try:
                call(server, "POST", "/v1/webhooks", {"url": url, "format": "hosted", "events": ["memory.created"]})
                raise AssertionError("a hosted endpoint for memory.created was accepted")
            except urllib.error.HTTPError as e:
                assert e.code == 400 and "memory_store.created" in e.read().decode()
            hook = call(server, "POST", "/v1/webhooks", {"url": url, "format": "hosted"})
            assert hook["format"] == "hosted"
            secret["key"] = hook["secret"]
            store = call(server, "POST", "/v1/memory_stores", {"name": "notes"})["id"]
            create(server, store, "/memories/a.md")
            call(server, "POST", f"/v1/memory_stores/{store}/archive")
            call(server, "DELETE", f"/v1/memory_stores/{store}")
            with cond:
                assert cond.wait_for(lambda: len(received) >= 3 or failures, timeout=WAIT), received
            assert not failures, failures
            assert [(e.type, e.data.type, e.data.id) for e in received] == [
                ("event", "memory_store.created", store),
                ("event", "memory_store.archived", store),
                ("event", "memory_store.deleted", store),
            ]
            assert all(e.id.startswith("msg_") and e.created_at.year >= 2026 for e in received)
            assert call(server, "GET", "/v1/webhooks")["data"][0]["format"] == "hosted"
    finally:
        http.shutdown()
        http.server_close()
