"""A local fake of Anthropic's Messages API (POST /v1/messages) that plays
the seed's task: read_notes, count_words, write_report, then the final
answer. It is stateless (each reply follows from the history it is sent),
so an agent killed and resumed by a new process gets the same replies, and
it checks what the real API checks: each tool_use answered by exactly one
tool_result in the next user message, no other tool_result, no tool_use id
twice (400 invalid_request_error otherwise). It also checks that each
assistant message comes back exactly as it sent it (no field added, none
lost, the thinking block's signature kept)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Callable
from typing import Any

REPORT = "Sales report: 3 deals closed, 12 words of notes."
FINAL = "Report written to report.txt."
UNSURE = "I could not confirm whether report.txt was written; please check it before writing it again."


def turn(k: int, hist: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The reply to a history holding k assistant messages: its content and
    stop_reason."""
    if k == 0:
        return [
            {"type": "thinking", "thinking": "Read the notes first.", "signature": "sig-0"},
            {"type": "text", "text": "I will read the notes."},
            {"type": "tool_use", "id": "toolu_01", "name": "read_notes", "input": {"path": "sales-notes.txt"}},
        ], "tool_use"
    if k == 1:
        return [{"type": "tool_use", "id": "toolu_02", "name": "count_words", "input": {"path": "sales-notes.txt"}}], "tool_use"
    if k == 2:
        return [{"type": "tool_use", "id": "toolu_03", "name": "write_report", "input": {"text": REPORT}}], "tool_use"
    last = hist[-1]["content"] if hist else []
    in_doubt = any(isinstance(b, dict) and b.get("tool_use_id") == "toolu_03" and b.get("is_error") for b in last)
    return [{"type": "text", "text": UNSURE if in_doubt else FINAL}], "end_turn"


def pairing_error(messages: list[dict[str, Any]]) -> str:
    """What the real API would refuse in this history, or ""."""
    seen: set[str] = set()
    for i, m in enumerate(messages):
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        if m.get("role") == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            for tid in ids:
                if tid in seen:
                    return f"messages.{i}: tool_use ids must be unique: {tid}"
                seen.add(tid)
            if ids:
                nxt = messages[i + 1] if i + 1 < len(messages) else None
                if nxt is None:
                    return f"messages.{i}: tool_use ids were found without tool_result blocks immediately after: {ids}"
                res = [b.get("tool_use_id") for b in (nxt.get("content") if isinstance(nxt.get("content"), list) else []) if b.get("type") == "tool_result"]
                if sorted(res) != sorted(ids) or nxt.get("role") != "user":
                    return f"messages.{i + 1}: tool_use ids {ids} need exactly one tool_result each, got {res}"
        elif m.get("role") == "user":
            res = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            prev = messages[i - 1] if i > 0 else {}
            prev_ids = [b["id"] for b in (prev.get("content") or []) if isinstance(b, dict) and b.get("type") == "tool_use"] if prev.get("role") == "assistant" else []
            for tid in res:
                if tid not in prev_ids:
                    return f"messages.{i}: unexpected tool_use_id found in tool_result blocks: {tid}"
    return ""


def check(body: dict[str, Any]) -> str:
    msgs = body.get("messages") or []
    err = pairing_error(msgs)
    if err:
        return err
    k = 0
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            want, _ = turn(k, msgs[:i])
            if m["content"] != want:
                return f"messages.{i}: assistant content differs from the reply it came from: {json.dumps(m['content'])}"
            k += 1
    return ""


class Fake:
    """The server, on 127.0.0.1 at a free port; ``requests`` keeps every
    request body and ``errors`` every 400 it answered. ``reply``, when
    given, plays another agent: it gets a request's messages and returns the
    reply's content and stop_reason (the pairing checks still apply)."""

    def __init__(self, reply: Callable[[list[dict[str, Any]]], tuple[list[dict[str, Any]], str]] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append(body)
                err = check(body) if reply is None else pairing_error(body.get("messages") or [])
                if err:
                    fake.errors.append(err)
                    self._send(400, {"type": "error", "error": {"type": "invalid_request_error", "message": err}})
                    return
                msgs = body["messages"]
                if reply is not None:
                    content, reason = reply(msgs)
                else:
                    content, reason = turn(sum(1 for m in msgs if m["role"] == "assistant"), msgs)
                self._send(200, {
                    "id": f"msg_{len(fake.requests):03d}", "type": "message", "role": "assistant", "model": body.get("model", "fake"),
                    "content": content, "stop_reason": reason, "stop_sequence": None,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                })

            def _send(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
