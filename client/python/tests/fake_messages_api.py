"""A local fake of Anthropic's Messages API, for the Claude Agent SDK's
bundled CLI and the anthropic SDK (pointed at it with ANTHROPIC_BASE_URL),
streamed or not as the request asks: it answers a scripted
agent that calls read_notes, then write_report, then answers, deciding each
turn from the tool results the request already holds, so a resumed process
gets the turn it is at. Like the real API it answers 400 for a tool_use
without its tool_result right after it. Every request's messages are kept
in ``requests`` (and appended to a JSON-lines log when one is given)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

READ = "toolu_01read"
WRITE = "toolu_02write"


def _blocks(content: Any) -> list[dict[str, Any]]:
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def unpaired(messages: list[dict[str, Any]]) -> str | None:
    """The id of a tool_use not answered by a tool_result in the next
    message, or of a tool_result answering no tool_use: what the real API
    refuses with 400."""
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        uses = [b["id"] for b in _blocks(m["content"]) if b.get("type") == "tool_use"]
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answered = {b.get("tool_use_id") for b in _blocks(nxt["content"])} if nxt and nxt.get("role") == "user" else set()
        for u in uses:
            if u not in answered:
                return u
    return None


def tool_results(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for m in messages:
        if m.get("role") == "user":
            for b in _blocks(m["content"]):
                if b.get("type") == "tool_result":
                    out[b["tool_use_id"]] = b
    return out


def _text_of(block: dict[str, Any]) -> str:
    c = block.get("content")
    if isinstance(c, list):
        return "".join(x.get("text", "") for x in c if isinstance(x, dict))
    return str(c or "")


class FakeMessagesAPI:
    def __init__(self, log_path: str | None = None, tool_prefix: str = "mcp__notes__") -> None:
        self.requests: list[list[dict[str, Any]]] = []
        self.rejected: list[str] = []
        self._log = log_path
        self._prefix = tool_prefix
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                if not self.path.startswith("/v1/messages") or self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": 10})
                    return
                api._handle(self, body)

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.end_headers()

            def _json(self, code: int, v: Any) -> None:
                b = json.dumps(v).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(b)))
                self.end_headers()
                self.wfile.write(b)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handle(self, h: Any, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        tools = [t.get("name") for t in body.get("tools", [])]
        bad = unpaired(messages)
        if bad is not None:
            with self._lock:
                self.rejected.append(bad)
            h._json(400, {"type": "error", "error": {"type": "invalid_request_error",
                                                    "message": f"tool_use ids were found without tool_result blocks immediately after: {bad}"}})
            return
        if self._prefix + "write_report" not in tools:
            # A side request of the CLI (a title, a quota check): plain text.
            self._stream(h, body, [{"type": "text", "text": "Sales report"}], "end_turn")
            return
        with self._lock:
            self.requests.append(messages)
            if self._log:
                with open(self._log, "a") as f:
                    f.write(json.dumps(messages) + "\n")
        done = tool_results(messages)
        if READ not in done:
            content = [{"type": "tool_use", "id": READ, "name": self._prefix + "read_notes", "input": {"path": "sales-notes.txt"}}]
            stop = "tool_use"
        elif WRITE not in done:
            content = [{"type": "tool_use", "id": WRITE, "name": self._prefix + "write_report", "input": {"text": "Q3: " + _text_of(done[READ])}}]
            stop = "tool_use"
        else:
            w = done[WRITE]
            content = [{"type": "text", "text": f"Finished. write_report said{' (error)' if w.get('is_error') else ''}: {_text_of(w)}"}]
            stop = "end_turn"
        self._stream(h, body, content, stop)

    def _stream(self, h: Any, body: dict[str, Any], content: list[dict[str, Any]], stop: str) -> None:
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            h._json(200, {"id": "msg_fake", "type": "message", "role": "assistant", "model": body.get("model", "claude-fake"),
                          "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage})
            return
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("cache-control", "no-cache")
        h.end_headers()

        def ev(name: str, data: dict[str, Any]) -> None:
            h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            h.wfile.flush()

        model = body.get("model", "claude-fake")
        ev("message_start", {"type": "message_start", "message": {"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
                                                                 "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}})
        for i, b in enumerate(content):
            if b["type"] == "text":
                ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                ev("content_block_start", {"type": "content_block_start", "index": i,
                                           "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                           "delta": {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
            ev("content_block_stop", {"type": "content_block_stop", "index": i})
        ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}})
        ev("message_stop", {"type": "message_stop"})
