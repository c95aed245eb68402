"""A small OpenAI-compatible model server for tests: answers decided by the prompt, counted.

    python tests/support/openai_server.py --port P [--model NAME] [--digest D] [--ignore-n]
        [--latency S] [--hold-after K --gate FILE]

It serves `GET /v1/models` (one model, `--model`, with a `digest` field when `--digest` is
given) and `POST /v1/chat/completions` on 127.0.0.1. The last message's content decides the
answer: it holds `A + B` and one mode in brackets:

    [right]      every choice is A+B
    [wrong]      every choice is A+B+1
    [half]       choice i is A+B when i is even, else A+B+1
    [malformed]  prose without a number
    [length]     finish_reason "length"
    [filter]     finish_reason "content_filter", no content
    [slow]       right after `--slow` seconds
    [flaky]      HTTP 503 for the first two requests of this prompt, then right
    [busy]       HTTP 429 with `Retry-After: 0.2` for the first request, then right
    [hang]       sleeps `--hang` seconds in the first request, then right
    [down]       HTTP 500 always
    [refuse]     HTTP 400 always

`--ignore-n` answers one choice whatever `n` asks; `--latency` delays every chat answer;
`--hold-after K` holds every chat request after the K-th until the file `--gate` exists.
`GET /stats` tells what happened: `models` and `chat` (requests received), `in_flight`,
`max_in_flight`, `mean_in_flight` (over time, from the first chat request to the last answer),
`held` (waiting at the gate now), `keys` (the distinct Authorization headers) and `log`, one
`[prompt, n, seed]` per chat request received, in arrival order. Nothing here imports the
project.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SUM = re.compile(r"(-?\d+) \+ (-?\d+)")
MODE = re.compile(r"\[([a-z]+)\]")


class State:
    """The counters `GET /stats` reports, guarded by one lock."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.lock = threading.Lock()
        self.models = 0
        self.chat = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.held = 0
        self.log: list[list[Any]] = []
        self.seen: dict[str, int] = {}  # chat requests per prompt
        self.keys: set[str] = set()  # Authorization headers seen
        self.first = self.last = 0.0  # monotonic times of the first and latest change
        self.in_flight_s = 0.0  # the integral of in_flight over time

    def _tick(self, change: int) -> None:
        now = time.monotonic()
        self.first = self.first or now
        self.in_flight_s += self.in_flight * (now - (self.last or now))
        self.last = now
        self.in_flight += change

    def enter(self, prompt: str, n: int, seed: Any) -> tuple[int, int]:
        """Count a chat request in; (its number from 1, the prompt's count from 1)."""
        with self.lock:
            self.chat += 1
            self._tick(+1)
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.log.append([prompt, n, seed])
            self.seen[prompt] = self.seen.get(prompt, 0) + 1
            return self.chat, self.seen[prompt]

    def leave(self) -> None:
        with self.lock:
            self._tick(-1)

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "models": self.models, "chat": self.chat, "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight, "held": self.held, "log": list(self.log),
                "mean_in_flight": self.in_flight_s / (self.last - self.first or 1.0),
                "keys": sorted(self.keys),
            }  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server
    wbufsize = 1 << 16  # headers and body leave in one write (flushed after each request)
    disable_nagle_algorithm = True
    state: State

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            with self.state.lock:
                self.state.models += 1
            card: dict[str, Any] = {"id": self.state.args.model, "object": "model", "created": 0}
            card |= {"owned_by": "tests", "root": self.state.args.model, "max_model_len": 4096}
            if self.state.args.digest:
                card["digest"] = self.state.args.digest
            self.send({"object": "list", "data": [card]})
        elif self.path == "/stats":
            self.send(self.state.stats())
        else:
            self.send({"error": {"message": f"no route {self.path}"}}, 404)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.rstrip("/") != "/v1/chat/completions":
            self.send({"error": {"message": f"no route {self.path}"}}, 404)
            return
        prompt = str(body["messages"][-1]["content"])
        with self.state.lock:
            self.state.keys.add(self.headers.get("authorization") or "")
        n = 1 if self.state.args.ignore_n else int(body.get("n") or 1)
        number, seen = self.state.enter(prompt, int(body.get("n") or 1), body.get("seed"))
        try:
            self.hold(number)
            self.answer(body, prompt, n, seen)
        finally:
            self.state.leave()

    def hold(self, number: int) -> None:
        """Wait at the gate when this request comes after `--hold-after`."""
        args = self.state.args
        if args.hold_after is None or number <= args.hold_after:
            return
        with self.state.lock:
            self.state.held += 1
        try:
            while not Path(args.gate).exists():
                time.sleep(0.02)
        finally:
            with self.state.lock:
                self.state.held -= 1

    def answer(self, body: dict[str, Any], prompt: str, n: int, seen: int) -> None:
        args = self.state.args
        time.sleep(args.latency)
        mode = (MODE.search(prompt) or _NONE).group(1)
        if mode == "down" or (mode == "flaky" and seen <= 2):
            self.send({"error": {"message": "overloaded"}}, 503 if mode == "flaky" else 500)
            return
        if mode == "refuse":
            self.send({"error": {"message": "this prompt is refused"}}, 400)
            return
        if mode == "busy" and seen == 1:
            self.send({"error": {"message": "slow down"}}, 429, {"Retry-After": "0.2"})
            return
        if mode == "hang" and seen == 1:
            time.sleep(args.hang)
        if mode == "slow":
            time.sleep(args.slow)
        match = SUM.search(prompt)
        total = int(match.group(1)) + int(match.group(2)) if match else 0
        choices = [_choice(i, mode, total) for i in range(n)]
        self.send({
            "id": f"chatcmpl-{self.state.chat}", "object": "chat.completion", "created": 0,
            "model": body.get("model"), "choices": choices,
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })  # fmt: skip

    def send(
        self, doc: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(doc).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client is gone (a killed job)


class _NoMode:
    def group(self, index: int) -> str:
        return "right"


_NONE = _NoMode()


def _choice(index: int, mode: str, total: int) -> dict[str, Any]:
    content: str | None = str(total)
    finish = "stop"
    if mode == "wrong" or (mode == "half" and index % 2):
        content = str(total + 1)
    elif mode == "malformed":
        content = "somewhere around there, I think"
    elif mode == "length":
        content, finish = "The answer is", "length"
    elif mode == "filter":
        content, finish = None, "content_filter"
    message = {"role": "assistant", "content": content}
    return {"index": index, "message": message, "finish_reason": finish}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--digest", default=None)
    parser.add_argument("--ignore-n", action="store_true")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--slow", type=float, default=0.3)
    parser.add_argument("--hang", type=float, default=3.0)
    parser.add_argument("--hold-after", type=int, default=None)
    parser.add_argument("--gate", default=None)
    args = parser.parse_args()
    Handler.state = State(args)
    ThreadingHTTPServer.request_queue_size = 128  # read when the socket listens
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
