"""Small threaded HTTP servers on 127.0.0.1 that speak just enough of two model APIs. Tests only.

The openai SDK here runs on httpx2, which an httpx mock does not intercept, so the
tests talk to these real servers through the real SDK instead.

``ResponsesServer`` answers ``POST /responses`` (streamed as server-sent events when
the body asks for ``stream``, else one JSON response) and ``POST /responses/input_tokens``.
``ChatServer`` answers ``POST /chat/completions``, streamed or not, with or without
a usage chunk. Both bill input as the local o200k_base count plus ``input_overhead``,
so a test can tell exactly what the gap between counted and billed should be.

Every request is recorded (``server.requests``), and every usage the server reports, or bills for an answer
the client left before reading it (``slow_start``), in ``server.billed``. ``server.queue(behaviour)`` makes the
next request misbehave, and ``server.queue_for(kind, behaviour)`` the next request of one kind (count, summary, reply):
``status``, ``stall``, ``cut_after``, ``stall_after``, ``error_after``, ``drip`` or ``slow_start``.
"""

from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter, count_text


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Behaviour = Callable[["Handler", Recorded], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        recorded = Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw or b"{}"))
        model = self.server.model
        (model.requests if model.routes(recorded.path) else model.side_requests).append(recorded)
        behaviour = model.next_behaviour(recorded) if model.routes(recorded.path) else None
        try:
            if behaviour is not None:
                behaviour(self, recorded)
            else:
                model.answer(self, recorded)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test); nothing left to say
        self.close_connection = True

    # -- writing ------------------------------------------------------------------

    def send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()

    def send_event(self, data: Any, event: str | None = None) -> None:
        text = (f"event: {event}\n" if event else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        chunk = text.encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def drop_connection(self) -> None:
        """Closes the socket mid-body: the client sees a chunked body that never ends properly.

        It first gives the client a moment to read what was sent, as a real server's
        death comes some time after its last byte; otherwise the client's reader may
        meet the broken body before it has handed out the events already received.
        """
        self.wfile.flush()
        time.sleep(0.2)
        self.connection.shutdown(socket.SHUT_RDWR)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    model: ModelServer


# -- behaviours for ``queue`` ------------------------------------------------------------


def status(code: int, message: str, headers: dict[str, str] | None = None) -> Behaviour:
    """Answers with an OpenAI-style error body."""

    def behave(handler: Handler, request: Recorded) -> None:
        handler.send_json(code, {"error": {"message": message, "type": "error", "param": None, "code": None}}, headers)

    return behave


def stall(seconds: float) -> Behaviour:
    """Says nothing for ``seconds``, then closes: longer than the client's timeout, it is a timeout."""

    def behave(handler: Handler, request: Recorded) -> None:
        handler.server.model.stop_event.wait(seconds)

    return behave


def cut_after(deltas: int, *, cleanly: bool = False) -> Behaviour:
    """Streams ``deltas`` text deltas of the normal reply, then drops the connection;
    with ``cleanly``, ends the body properly instead, but still without the final event."""

    def behave(handler: Handler, request: Recorded) -> None:
        handler.server.model.stream(handler, request, cut_after=deltas, cleanly=cleanly)

    return behave


def stall_after(deltas: int, seconds: float) -> Behaviour:
    """Streams ``deltas`` text deltas, then says nothing for ``seconds``: a read timeout mid-stream."""

    def behave(handler: Handler, request: Recorded) -> None:
        handler.server.model.stream(handler, request, cut_after=deltas, stall_s=seconds)

    return behave


def error_after(deltas: int, code: str, message: str) -> Behaviour:
    """Streams ``deltas`` text deltas, then the API's own error event with ``code``
    (``rate_limit_exceeded``, ``server_error``): how a 429 or 500 shows once the stream has begun."""

    def behave(handler: Handler, request: Recorded) -> None:
        handler.server.model.stream(handler, request, cut_after=deltas, error=(code, message))

    return behave


def drip(seconds: float) -> Behaviour:
    """Answers normally, but waits ``seconds`` before each streamed event: a reply slow enough to interrupt."""

    def behave(handler: Handler, request: Recorded) -> None:
        send = handler.send_event

        def slowly(*args: Any, **kwargs: Any) -> None:
            time.sleep(seconds)
            send(*args, **kwargs)

        handler.send_event = slowly  # type: ignore[method-assign]
        handler.server.model.answer(handler, request)

    return behave


def slow_start(seconds: float) -> Behaviour:
    """Waits ``seconds`` before the first byte, then answers normally; the whole answer is billed even when the
    client stopped waiting and never reads it, as a provider bills what it generated (``ModelServer.bill_unread``).
    """

    def behave(handler: Handler, request: Recorded) -> None:
        time.sleep(seconds)
        model = handler.server.model
        bills = len(model.billed)
        try:
            model.answer(handler, request)
        except (BrokenPipeError, ConnectionResetError):
            # A stream bills at its end, and the client's leaving made a write before it fail.
            if len(model.billed) == bills:
                model.bill_unread(request)
            raise

    return behave


# -- the servers -------------------------------------------------------------------------


@dataclass
class ModelServer:
    """A model server on 127.0.0.1 and a free port; use it as a context manager.

    ``deltas`` is the streamed reply; ``summary_text`` answers non-streamed requests.
    """

    deltas: Sequence[str] = ("Hello", "! Let's ", "practise.")
    summary_text: str = "- The user is learning English."
    input_overhead: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    requests: list[Recorded] = field(default_factory=list)
    side_requests: list[Recorded] = field(default_factory=list)
    """Requests outside the model API (``routes``): tokenizer endpoints and their probes."""
    billed: list[tuple[str, int]] = field(default_factory=list)
    """``(kind, total_tokens)`` for every usage the server reported or billed unread (``bill_unread``), in order."""
    behaviours: deque[Behaviour] = field(default_factory=deque)
    targeted: dict[str, deque[Behaviour]] = field(default_factory=dict)
    stop_event: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> ModelServer:
        self._http = _HTTPServer(("127.0.0.1", 0), Handler)
        self._http.model = self
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self._http.shutdown()
        self._http.server_close()

    @property
    def port(self) -> int:
        return self._http.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def routes(self, path: str) -> bool:
        """Whether ``path`` is the model API's, recorded in ``requests``; anything else goes to ``side_requests``."""
        return True

    def queue(self, *behaviours: Behaviour) -> None:
        """The next requests get these behaviours, one each, in order."""
        self.behaviours.extend(behaviours)

    def queue_for(self, kind: str, behaviour: Behaviour) -> None:
        """The next request of ``kind`` (``count``, ``summary`` or ``reply``; see ``kind_of``) gets ``behaviour``."""
        self.targeted.setdefault(kind, deque()).append(behaviour)

    def next_behaviour(self, request: Recorded | None = None) -> Behaviour | None:
        if request is not None and self.targeted.get(self.kind_of(request)):
            return self.targeted[self.kind_of(request)].popleft()
        try:
            return self.behaviours.popleft()
        except IndexError:
            return None

    def kind_of(self, request: Recorded) -> str:
        """``count`` (the count endpoint), ``reply`` (streamed) or ``summary`` (not streamed)."""
        if request.path.endswith("/input_tokens"):
            return "count"
        return "reply" if request.body.get("stream") else "summary"

    def bill(self, request: Recorded, total_tokens: int) -> None:
        """Notes a usage the server reported: what the client was really charged."""
        self.billed.append((self.kind_of(request), total_tokens))

    def bill_unread(self, request: Recorded) -> None:
        """Bills the whole answer to ``request`` (the streamed reply, or the summary text) that nobody read."""
        self._usage(request, self.reply_text if request.body.get("stream") else self.summary_text)

    def paths(self) -> list[str]:
        return [r.path for r in self.requests]

    @property
    def reply_text(self) -> str:
        return "".join(self.deltas)

    def billed_input(self, instructions: str, messages: Sequence[Message]) -> int:
        return LocalTokenCounter().count("", instructions, messages) + self.input_overhead

    def answer(self, handler: Handler, request: Recorded) -> None:
        raise NotImplementedError

    def _usage(self, request: Recorded, text: str) -> dict[str, Any]:
        """The usage of ``request`` answered with ``text``, billed (``bill``) as it is made."""
        raise NotImplementedError

    def stream(
        self,
        handler: Handler,
        request: Recorded,
        cut_after: int | None = None,
        cleanly: bool = False,
        stall_s: float | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        """The streamed reply; at delta ``cut_after`` it drops the connection, ends the body
        (``cleanly``), stalls ``stall_s`` seconds, or sends ``error`` = (code, message)."""
        raise NotImplementedError

    def _break_stream(self, handler: Handler, cleanly: bool, stall_s: float | None, error_event: Any) -> None:
        if error_event is not None:
            handler.send_event(*error_event)
            handler.end_stream()
        elif stall_s is not None:
            self.stop_event.wait(stall_s)
        elif cleanly:
            handler.end_stream()
        else:
            handler.drop_connection()


def _messages(items: Any) -> list[Message]:
    if isinstance(items, str):
        return [Message("user", items)]
    return [Message(item["role"], item["content"]) for item in items]


@dataclass
class ResponsesServer(ModelServer):
    """OpenAI's Responses API: ``/v1/responses`` and ``/v1/responses/input_tokens``."""

    def answer(self, handler: Handler, request: Recorded) -> None:
        if request.path.endswith("/responses/input_tokens"):
            body = request.body
            counted = self.billed_input(body.get("instructions") or "", _messages(body["input"]))
            handler.send_json(200, {"object": "response.input_tokens", "input_tokens": counted})
        elif request.path.endswith("/responses") and request.body.get("stream"):
            self.stream(handler, request)
        elif request.path.endswith("/responses"):
            text = self.summary_text
            handler.send_json(200, self._response(request, "completed", text, self._usage(request, text)))
        else:
            handler.send_json(404, {"error": {"message": f"no route {request.path}", "type": "invalid_request_error"}})

    def stream(
        self,
        handler: Handler,
        request: Recorded,
        cut_after: int | None = None,
        cleanly: bool = False,
        stall_s: float | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        handler.start_stream()
        sequence = iter(range(10_000))
        created = self._response(request, "in_progress", "", None)
        handler.send_event({"type": "response.created", "sequence_number": next(sequence), "response": created}, "response.created")
        for i, delta in enumerate(self.deltas):
            if cut_after is not None and i == cut_after:
                failed = None
                if error is not None:
                    body = {
                        "id": "resp_1",
                        "object": "response",
                        "status": "failed",
                        "output": [],
                        "error": {"code": error[0], "message": error[1]},
                    }
                    failed = ({"type": "response.failed", "sequence_number": next(sequence), "response": body}, "response.failed")
                self._break_stream(handler, cleanly, stall_s, failed)
                return
            event = {
                "type": "response.output_text.delta",
                "sequence_number": next(sequence),
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            }
            handler.send_event(event, event["type"])
        text = self.reply_text
        done = self._response(request, "completed", text, self._usage(request, text))
        handler.send_event({"type": "response.completed", "sequence_number": next(sequence), "response": done}, "response.completed")
        handler.end_stream()

    def _usage(self, request: Recorded, text: str) -> dict[str, Any]:
        body = request.body
        billed = self.billed_input(body.get("instructions") or "", _messages(body["input"]))
        output = count_text(text) + self.reasoning_tokens
        self.bill(request, billed + output)
        return {
            "input_tokens": billed,
            "input_tokens_details": {"cached_tokens": self.cached_tokens, "cache_write_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": billed + output,
        }

    @staticmethod
    def _response(request: Recorded, status: str, text: str, usage: dict[str, Any] | None) -> dict[str, Any]:
        output = (
            [
                {
                    "type": "message",
                    "id": "msg_1",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
                }
            ]
            if text
            else []
        )
        return {
            "id": "resp_1",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "model": request.body.get("model"),
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": usage,
        }


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SPECIAL = re.compile(r"<\|im_start\|>|<\|im_end\|>")


def han_weighted_count(text: str, han_ratio: float) -> int:
    """A tokenizer unlike o200k_base: Han runs cost ``han_ratio`` times their o200k_base tokens, and chatml's
    special tokens one each; the rest as o200k_base. SmolLM2 counts Chinese at 2.05x o200k_base."""
    specials = len(_SPECIAL.findall(text))
    total = 0
    for piece in _SPECIAL.split(text):
        han = sum(count_text(run) for run in _HAN.findall(piece))
        total += count_text(_HAN.sub("", piece)) + math.ceil(han * han_ratio)
    return total + specials


def chatml(messages: Sequence[dict[str, str]]) -> str:
    """The prompt chatml renders: each message framed, then the assistant's turn opened."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


@dataclass
class ChatServer(ModelServer):
    """OpenAI-compatible ``/v1/chat/completions``; ``report_usage=False`` acts like a server that never reports usage.

    With ``han_ratio`` set, it counts like a local model's tokenizer (``han_weighted_count``) over the chatml
    prompt, in its usage and its tokenizer endpoint; ``tokenizer="llama.cpp"`` serves llama.cpp's
    ``/apply-template`` and ``/tokenize`` (recorded in ``side_requests``), ``"vllm"`` vLLM's ``/tokenize`` of chat
    messages, ``"litellm-provider"`` or
    ``"litellm-estimate"`` LiteLLM's ``/utils/token_counter`` with that ``count_source``. ``context_window`` refuses a
    prompt of that many tokens or more as llama-cpp-python 0.3.36 does: a streamed request gets a stream
    that ends with nothing in it, a non-streamed one HTTP 400 with the figures.
    """

    report_usage: bool = True
    han_ratio: float | None = None
    tokenizer: str | None = None
    context_window: int | None = None
    newline_tokens: int = 0
    overflows: int = 0

    def routes(self, path: str) -> bool:
        return path.endswith("/chat/completions")

    def prompt_tokens(self, messages: Sequence[dict[str, str]]) -> int:
        """The server's own count of a chat request's prompt."""
        return self.count(chatml(messages))

    def count(self, text: str) -> int:
        """The server's own count of ``text``, as its tokenizer endpoints and its usage give it."""
        return han_weighted_count(text, self.han_ratio or 1.0) + self.newline_tokens * text.count("\n")

    def answer(self, handler: Handler, request: Recorded) -> None:
        if self.tokenizer == "llama.cpp" and request.path == "/apply-template":
            handler.send_json(200, {"prompt": chatml(request.body["messages"])})
        elif self.tokenizer == "llama.cpp" and request.path == "/tokenize":
            handler.send_json(200, {"tokens": list(range(self.count(request.body["content"])))})
        elif self.tokenizer == "vllm" and request.path == "/tokenize":
            count = self.prompt_tokens(request.body["messages"])
            handler.send_json(200, {"count": count, "max_model_len": 4096, "tokens": list(range(count))})
        elif self.tokenizer and self.tokenizer.startswith("litellm") and request.path == "/utils/token_counter":
            # LiteLLM 1.108.7's answer: "provider" when the upstream counted, else its own "local_estimate".
            source = "provider" if self.tokenizer == "litellm-provider" else "local_estimate"
            count = self.prompt_tokens(request.body["messages"])
            handler.send_json(200, {"total_tokens": count, "tokenizer_type": "openai_tokenizer", "count_source": source})
        elif not request.path.endswith("/chat/completions"):
            handler.send_json(404, {"error": {"message": f"no route {request.path}", "type": "invalid_request_error"}})
        elif self.context_window is not None and (prompt := self.prompt_tokens(request.body["messages"])) >= self.context_window:
            self.overflows += 1
            if request.body.get("stream"):
                handler.start_stream()  # the check runs inside the stream's generator: it ends empty
                handler.end_stream()
                return
            completion = request.body.get("max_tokens") or 0
            message = (
                f"This model's maximum context length is {self.context_window} tokens. However, you requested "
                f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                "Please reduce the length of the messages or completion."
            )
            error = {"message": message, "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}
            handler.send_json(400, {"error": error})
        elif request.body.get("stream"):
            self.stream(handler, request)
        else:
            text = self.summary_text
            handler.send_json(
                200,
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1_700_000_000,
                    "model": request.body.get("model"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                    **({"usage": self._usage(request, text)} if self.report_usage else {}),
                },
            )

    def stream(
        self,
        handler: Handler,
        request: Recorded,
        cut_after: int | None = None,
        cleanly: bool = False,
        stall_s: float | None = None,
        error: tuple[str, str] | None = None,
    ) -> None:
        handler.start_stream()

        def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": request.body.get("model"),
                "choices": choices,
                "usage": usage,
            }

        handler.send_event(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]))
        for i, delta in enumerate(self.deltas):
            if cut_after is not None and i == cut_after:
                failed = ({"error": {"message": error[1], "type": error[0], "code": error[0]}},) if error else None
                self._break_stream(handler, cleanly, stall_s, failed)
                return
            handler.send_event(chunk([{"index": 0, "delta": {"content": delta}, "finish_reason": None}]))
        handler.send_event(chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}]))
        wants_usage = (request.body.get("stream_options") or {}).get("include_usage")
        if self.report_usage and wants_usage:
            handler.send_event(chunk([], self._usage(request, self.reply_text)))
        handler.send_event("[DONE]")
        handler.end_stream()

    def _usage(self, request: Recorded, text: str) -> dict[str, Any]:
        messages = _messages(request.body["messages"])
        # Bill as the Responses server does: the leading system message is the instructions.
        instructions = messages[0].content if messages and messages[0].role == "system" else ""
        billed = self.billed_input(instructions, messages[1:] if instructions else messages)
        if self.han_ratio is not None or self.newline_tokens:
            billed = self.prompt_tokens(request.body["messages"])
        output = count_text(text) + self.reasoning_tokens
        self.bill(request, billed + output)
        return {
            "prompt_tokens": billed,
            "completion_tokens": output,
            "total_tokens": billed + output,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (it was free a moment ago)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
