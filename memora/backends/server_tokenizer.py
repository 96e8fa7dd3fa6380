"""The chat server's own tokenizer, where the server offers one: the exact count of a request.

A local model counts with its own tokenizer (SmolLM2 counts Chinese at 2.05x o200k_base), and its
chat template adds tokens of its own around each message. Several servers can count for us:

- llama.cpp's server: ``/apply-template`` renders the messages with the server's template, and
  ``/tokenize`` counts the rendered prompt: the exact prompt of the request.
- vLLM: ``/tokenize`` takes the chat messages and counts them with the template.
- llama-cpp-python's server: ``/extras/tokenize/count`` counts a text. Its template is not exposed,
  so the tokens it adds are measured once, from two one-token requests whose ``prompt_tokens``
  the server reports, and each message's text is counted once and cached.
- LiteLLM's proxy: ``/utils/token_counter`` takes the messages; its count is taken only when LiteLLM
  says it came from the upstream provider (``count_source: "provider"``), not its
  ``local_estimate``.

``probe`` tries them in that order, once per server and model (``probed``), and returns None for a
server with none of them (Ollama, OpenAI's chat endpoint, LM Studio): Memora then plans with a
learned margin instead (``memora.text.calibration``). Every endpoint is posted through the chat
backend's own SDK client: its connection pool, proxy, headers and key, with a timeout of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai

Wire = Sequence[dict[str, str]]
"""Chat messages as the chat backend sends them (``chat_messages``)."""

PROBE_TIMEOUT_S = 5.0
"""For the tokenizer endpoints, which answer in milliseconds."""

MEASURE_TIMEOUT_S = 120.0
"""For the two one-token chat requests that measure a template: a server's first request may load
its model."""

BOUNDARY_SLACK = 1
"""Tokens added per message where each text is counted apart from its template (llama-cpp-python):
a text tokenized alone may split one token differently where it meets the template's tokens."""


class ServerTokenizerError(RuntimeError):
    """The server's tokenizer did not answer as it did when probed."""


class ServerTokenizer(Protocol):
    """Counts what a chat request's messages cost by the server's own count, template included."""

    source: str
    """Which endpoint counts, for the Status panel and the REPL (``"llama.cpp /apply-template +
    /tokenize"``)."""

    def count(self, messages: Wire) -> int:
        """The request's prompt tokens. Raises ServerTokenizerError when the server cannot count."""
        ...


@dataclass
class Endpoint:
    """The server's root URL (its ``/v1`` taken off), posted to through ``client``, the chat
    backend's SDK client (its connection pool, proxy, default headers and key), within ``timeout_s``
    and without the SDK's retries: a tokenizer that does not answer at once is not waited for."""

    root: str
    client: openai.OpenAI = field(repr=False)
    timeout_s: float = PROBE_TIMEOUT_S

    def __post_init__(self) -> None:
        self._posting = self.client.with_options(timeout=self.timeout_s, max_retries=0)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON answer of ``POST root+path``. Raises ServerTokenizerError for any failure (no
        secret in it)."""
        try:
            answer = self._posting.post(self.root + path, cast_to=object, body=body)
            # The SDK parses a JSON content type; a server that labels its JSON otherwise gets its
            # text back.
            return json.loads(answer) if isinstance(answer, str) else answer
        except openai.APIStatusError as error:
            raise ServerTokenizerError(f"POST {path} failed (HTTP {error.status_code})") from None
        except (
            openai.OpenAIError,
            ValueError,
        ):  # no connection, a timeout, an answer that is no JSON
            raise ServerTokenizerError(f"POST {path} failed") from None


def _count(value: Any, key: str) -> int:
    count = value.get(key) if isinstance(value, dict) else None
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ServerTokenizerError(f"the answer has no {key} count")
    return count


@dataclass
class LlamaCppTokenizer:
    """llama.cpp's server: the exact prompt, rendered by ``/apply-template`` and counted by
    ``/tokenize``."""

    endpoint: Endpoint
    source: str = "llama.cpp /apply-template + /tokenize"

    def count(self, messages: Wire) -> int:
        prompt = self.endpoint.post("/apply-template", {"messages": list(messages)}).get("prompt")
        if not isinstance(prompt, str):
            raise ServerTokenizerError("/apply-template gave no prompt")
        # The server tokenizes a chat prompt with its special tokens (BOS) and parses the template's
        # own.
        tokens = self.endpoint.post(
            "/tokenize", {"content": prompt, "add_special": True, "parse_special": True}
        ).get("tokens")
        if not isinstance(tokens, list):
            raise ServerTokenizerError("/tokenize gave no tokens")
        return len(tokens)


@dataclass
class MessagesTokenizer:
    """A server that counts chat messages in one call: vLLM's ``/tokenize``, LiteLLM's
    ``/utils/token_counter``."""

    endpoint: Endpoint
    model: str
    path: str
    key: str
    source: str

    def count(self, messages: Wire) -> int:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if self.path == "/tokenize":
            body["add_generation_prompt"] = (
                True  # as the chat endpoint renders it: the assistant's turn opened
            )
        answer = self.endpoint.post(self.path, body)
        # LiteLLM 1.108 says whose count it is: "provider" (the upstream's counting API) or
        # "local_estimate" (its own tokenizer, tiktoken by default, without the chat template): only
        # the first is a count.
        if self.path == "/utils/token_counter" and answer.get("count_source") != "provider":
            raise ServerTokenizerError("LiteLLM only estimated this count")
        return _count(answer, self.key)


@dataclass
class TemplateOverhead:
    """Tokens a chat template adds: ``fixed`` per request, ``per_message`` per message (BOS, roles,
    separators)."""

    fixed: int
    per_message: int


@dataclass
class LlamaCppPythonTokenizer:
    """llama-cpp-python's server: each text counted once by ``/extras/tokenize/count``, plus the
    template's tokens.

    The template's tokens are measured once (``measure_overhead``) from the ``prompt_tokens`` of two
    one-token requests of 2 and 4 messages, which the server counts itself; ``BOUNDARY_SLACK`` per
    message covers a token split differently where a text meets the template.
    """

    endpoint: Endpoint
    model: str
    overhead: TemplateOverhead
    source: str = "llama-cpp-python /extras/tokenize/count"
    _texts: dict[str, int] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count_text(self, text: str) -> int:
        """Tokens of ``text`` alone, BOS included when the model adds one; each text asked for
        once."""
        with self._lock:
            known = self._texts.get(text)
        if known is None:
            known = _count(
                self.endpoint.post("/extras/tokenize/count", {"model": self.model, "input": text}),
                "count",
            )
            with self._lock:
                if len(self._texts) >= TEXT_CACHE_ENTRIES:
                    # a crude bound: a classroom's texts are counted again, never wrongly
                    self._texts.clear()
                self._texts[text] = known
        return known

    def count(self, messages: Wire) -> int:
        texts = sum(self.count_text(m["content"]) for m in messages)
        return (
            self.overhead.fixed
            + len(messages) * (self.overhead.per_message + BOUNDARY_SLACK)
            + texts
        )

    @classmethod
    def measure_overhead(cls, endpoint: Endpoint, model: str) -> TemplateOverhead:
        """The template's tokens, from what the server counts for two small requests (one output
        token each)."""
        contents = ["You help.", "Hi.", "Hello.", "Bye."]
        roles = ["system", "user", "assistant", "user"]
        prompts = []
        chat = Endpoint(endpoint.root, endpoint.client, MEASURE_TIMEOUT_S)
        for n in (2, 4):
            messages = [
                {"role": r, "content": c} for r, c in zip(roles[:n], contents[:n], strict=True)
            ]
            answer = chat.post(
                "/v1/chat/completions", {"model": model, "messages": messages, "max_tokens": 1}
            )
            usage = answer.get("usage") if isinstance(answer, dict) else None
            texts = sum(
                _count(
                    endpoint.post("/extras/tokenize/count", {"model": model, "input": c}), "count"
                )
                for c in contents[:n]
            )
            prompts.append(_count(usage, "prompt_tokens") - texts)
        per_message = max(0, -(-(prompts[1] - prompts[0]) // 2))
        return TemplateOverhead(max(0, prompts[0] - 2 * per_message), per_message)


TEXT_CACHE_ENTRIES = 16384

_PROBE_MESSAGES = [{"role": "user", "content": "Hello."}]


def probe(client: openai.OpenAI, model: str) -> ServerTokenizer | None:
    """The first tokenizer the server of ``client`` (the chat backend's SDK client, its base URL
    ending in ``/v1``) answers for, or None.

    Each candidate is asked to count one short message; a candidate that fails is skipped.
    Raises ServerTokenizerError when the server cannot be reached at all, so that a server
    that is down is probed again later instead of being taken for one without a tokenizer.
    """
    endpoint = Endpoint(str(client.base_url).rstrip("/").removesuffix("/v1"), client)
    try:
        endpoint.post("/__memora_probe__", {})
    except ServerTokenizerError as error:
        if "HTTP" not in str(error):
            raise ServerTokenizerError("the server did not answer") from None
    candidates: list[ServerTokenizer] = [
        LlamaCppTokenizer(endpoint),
        MessagesTokenizer(endpoint, model, "/tokenize", "count", "vLLM /tokenize"),
        MessagesTokenizer(
            endpoint, model, "/utils/token_counter", "total_tokens", "LiteLLM /utils/token_counter"
        ),
    ]
    for candidate in candidates:
        try:
            candidate.count(_PROBE_MESSAGES)
            return candidate
        except ServerTokenizerError:
            continue
    try:
        _count(
            endpoint.post("/extras/tokenize/count", {"model": model, "input": "Hello."}), "count"
        )
        return LlamaCppPythonTokenizer(
            endpoint, model, LlamaCppPythonTokenizer.measure_overhead(endpoint, model)
        )
    except (ServerTokenizerError, AttributeError):
        return None


_probed: dict[tuple[str, str], ServerTokenizer | None] = {}
_unreachable: dict[tuple[str, str], float] = {}
_probed_lock = threading.Lock()

REPROBE_AFTER_S = 30.0
"""A server that did not answer is probed again after this long, not on every count of every
turn."""


def probed(client: openai.OpenAI, model: str) -> ServerTokenizer | None:
    """``probe``, once per server and model for the whole process (every session shares the answer).

    A server that did not answer is not taken for one without a tokenizer: None for now, and probed
    again after ``REPROBE_AFTER_S``.
    """
    key = (str(client.base_url), model)
    with _probed_lock:
        if key in _probed:
            return _probed[key]
        if time.monotonic() - _unreachable.get(key, -REPROBE_AFTER_S) < REPROBE_AFTER_S:
            return None
    try:
        found = probe(client, model)
    except ServerTokenizerError:
        with _probed_lock:
            _unreachable[key] = time.monotonic()
        return None
    with _probed_lock:
        _probed[key] = found
    return found
