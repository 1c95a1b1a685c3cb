"""A scripted Messages API on loopback: the real SDK talks HTTP to it, it answers from a script.

Each `POST /v1/messages` is recorded (the JSON body the SDK sent, and its headers) and answered
with the next assistant turn of the script, as JSON or, for `"stream": true`, as server-sent
events. A request beyond the script gets a 500 (the client is built with `max_retries=0`, so the
run fails instead of looping). The Messages API itself is not reachable here; memkv, on the
other side of the tool, always is the real server.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "claude-sonnet-5-5"


def tool_use(id: str, input: dict[str, Any], name: str = "memory") -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def assistant(content: Sequence[dict[str, Any]], n: int) -> dict[str, Any]:
    """One assistant message; `stop_reason` is `tool_use` when it holds tool_use blocks."""
    calls = any(block["type"] == "tool_use" for block in content)
    return {
        "id": f"msg_{n:04}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": list(content),
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 10},
    }


def final(text: str = "Done.") -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


class ScriptedAPI:
    """The turns to answer with, and the requests received, in order."""

    def __init__(self, turns: Sequence[Sequence[dict[str, Any]]]) -> None:
        self.turns = [assistant(content, i + 1) for i, content in enumerate(turns)]
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.base_url = ""
        self._lock = threading.Lock()

    def answer(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any] | None:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
            self.headers.append(headers)
            n = len(self.requests)
            return self.turns[n - 1] if n <= len(self.turns) else None

    def tool_results(self) -> list[list[dict[str, Any]]]:
        """The tool_result blocks the SDK sent back, per request after the first."""
        out = []
        for body in self.requests[1:]:
            last = body["messages"][-1]
            assert last["role"] == "user", last
            out.append([block for block in last["content"] if block.get("type") == "tool_result"])
        return out

    def all_tool_results(self) -> list[dict[str, Any]]:
        return [block for turn in self.tool_results() for block in turn]


def sse_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The message as the server-sent events of a streamed reply; a tool_use input arrives in
    two `input_json_delta` pieces."""
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            events.append({"type": "content_block_start", "index": index, "content_block": {**block, "input": {}}})
            raw = json.dumps(block["input"])
            for piece in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}})
            delta = {"type": "text_delta", "text": block["text"]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def _handler(api: ScriptedAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length))
            headers = {name.lower(): value for name, value in self.headers.items()}
            reply = api.answer(self.path, body, headers) if self.path.split("?")[0] == "/v1/messages" else None
            if reply is None:
                status = 500
                reply = {"type": "error", "error": {"type": "api_error", "message": f"unscripted request {self.path}"}}
            else:
                status = 200
            if status == 200 and body.get("stream"):
                data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in sse_events(reply)).encode()
                content_type = "text/event-stream"
            else:
                data = json.dumps(reply).encode()
                content_type = "application/json"
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def scripted_api(turns: Sequence[Sequence[dict[str, Any]]]) -> Iterator[ScriptedAPI]:
    api = ScriptedAPI(turns)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    api.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield api
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
