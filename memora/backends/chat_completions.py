"""Any OpenAI-compatible Chat Completions server: Ollama, LM Studio, vLLM, llama.cpp's server.

Such servers accept ``system``, ``user`` and ``assistant`` roles, and many reject
``developer``. Many chat templates also keep only the FIRST system message
(llama-cpp-python's ``chatml`` and 15 other built-in formats drop the rest without
an error), so this backend's ``profile`` tells the memory to put the summary inside
the one system message; any ``developer`` message still given is sent as ``system``.

Replies are capped with ``max_tokens`` so that none can run to the end of the
server's context; a reply or summary stopped there (``finish_reason="length"``)
comes back as a ``Completion`` with ``cut=True``.

Usage comes from the stream's last chunk when the server honours
``stream_options={"include_usage": True}``. When it reports none, input and output
are counted locally with o200k_base and marked ``estimated``: a local model has its
own tokenizer, so the figure is an estimate, and the UI says so.

Where the server offers its own tokenizer (``server_tokenizer``: llama.cpp, llama-cpp-python, vLLM),
``count_request`` gives the server's count of a request, template included, before it is sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import openai

from memora.backends.base import SDKClientRetries
from memora.backends.openai_errors import explain_error, stream_ended_early
from memora.backends.server_tokenizer import ServerTokenizer, ServerTokenizerError, probed
from memora.memory.backend import (
    CHAT_SERVER_PROFILE,
    BackendError,
    Completion,
    ContextOverflowError,
    ReplyRequest,
    SummaryRequest,
)
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter, count_text
from memora.text.usage import Usage

NO_KEY = "not-needed"
"""Sent as the key to servers that need none; the SDK refuses to run without one."""

_ROLE_FOR_SERVER = {"developer": "system"}


def chat_messages(instructions: str, messages: Sequence[Message]) -> list[dict[str, str]]:
    """The instructions as a leading system message, then ``messages`` with ``developer`` sent as
    ``system``.

    Empty instructions add no message.
    """
    leading = [{"role": "system", "content": instructions}] if instructions else []
    return leading + [
        {"role": _ROLE_FOR_SERVER.get(m.role, m.role), "content": m.content} for m in messages
    ]


def usage_of(usage: Any, estimate: Usage, *, by: str | None = None, teaches: bool = True) -> Usage:
    """Reads a Chat Completions ``usage`` object reported ``by`` the server, or returns ``estimate``
    when there is none.

    No such server bills by its figures: they are "reported", never "billed"."""
    if usage is None:
        return estimate
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        reasoning_tokens=getattr(completion_details, "reasoning_tokens", 0) or 0,
        cached_tokens=getattr(prompt_details, "cached_tokens", 0) or 0,
        by=by,
        teaches=teaches,
    )


def estimate_usage(instructions: str, messages: Sequence[Message], text: str) -> Usage:
    """Local o200k_base counts of a request and its reply, marked estimated."""
    counted = LocalTokenCounter().count("", instructions, messages)
    return Usage(counted, count_text(text), estimated=True)


class ChatCompletionsBackend(SDKClientRetries):
    """Talks to ``client.chat.completions`` of an ``openai.OpenAI`` client pointed at the server.

    Errors are re-raised as ``ModelServerError`` naming MEMORA_BASE_URL and
    MEMORA_API_KEY; the key never appears in them.
    """

    offline = False
    profile = CHAT_SERVER_PROFILE

    def __init__(
        self,
        client: openai.OpenAI,
        label: str = "OpenAI-compatible chat server",
        *,
        tokenizer: ServerTokenizer | None = None,
        probe: bool = True,
    ) -> None:
        """``tokenizer`` counts for the server; without one, ``probe`` finds the server's own on
        first use."""
        self.client = client
        self.label = label
        self._tokenizer = tokenizer
        self._probe = probe

    # -- the server's own count -----------------------------------------------------

    def server_tokenizer(self, model: str) -> ServerTokenizer | None:
        """The server's tokenizer endpoint, probed once per server and model; None where it has
        none."""
        if self._tokenizer is not None or not self._probe:
            return self._tokenizer
        return probed(self.client, model)

    def counting_source(self, model: str) -> str | None:
        """The server's tokenizer endpoint in words; None where it has none."""
        tokenizer = self.server_tokenizer(model)
        return None if tokenizer is None else tokenizer.source

    def count_request(
        self, model: str, instructions: str, messages: Sequence[Message]
    ) -> int | None:
        """The server's own count of this request's prompt, as it will render it; None when it
        cannot count."""
        tokenizer = self.server_tokenizer(model)
        if tokenizer is None:
            return None
        try:
            return tokenizer.count(chat_messages(instructions, messages))
        except ServerTokenizerError:
            # the plan then rests on the learned margin, as for a server without a tokenizer
            return None

    # -- request bodies ---------------------------------------------------------

    @staticmethod
    def reply_params(request: ReplyRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model,
            "messages": chat_messages(request.instructions, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.max_output_tokens is not None:
            params["max_tokens"] = request.max_output_tokens
        return params

    @staticmethod
    def summary_params(request: SummaryRequest) -> dict[str, Any]:
        """A non-streamed request bounded by ``max_tokens``, which every such server understands."""
        return {
            "model": request.model,
            "messages": chat_messages(request.instructions, [Message("user", request.input_text)]),
            "max_tokens": request.max_output_tokens,
        }

    # -- the Backend protocol -----------------------------------------------------

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """Yields text deltas, then one Completion.

        The reply is complete once a choice carries a ``finish_reason``; the usage
        chunk that may follow is read before the Completion is yielded. A stream
        that ends or breaks before any ``finish_reason`` raises ModelServerError.
        """
        parts: list[str] = []
        finished: str | None = None
        usage: Any = None
        opened = started = False
        try:
            with self.client.chat.completions.create(**self.reply_params(request)) as stream:
                opened = True  # the SDK retried what failed before this; nothing after it
                for chunk in stream:
                    started = True
                    if chunk.usage is not None:
                        usage = chunk.usage
                    for choice in chunk.choices:
                        if choice.index != 0:
                            continue
                        if choice.delta is not None and choice.delta.content:
                            parts.append(choice.delta.content)
                            yield choice.delta.content
                        if choice.finish_reason is not None:
                            finished = choice.finish_reason
        except openai.OpenAIError as error:
            # A break after finish_reason loses only the usage chunk; the reply is whole.
            if not (finished and isinstance(error, openai.APIConnectionError)):
                raise self._explain(error, during_stream=started, answer_began=opened) from None
        if not finished:
            if not started:
                self._diagnose(request)
            raise stream_ended_early()
        text = "".join(parts)
        usage_read = usage_of(
            usage, estimate_usage(request.instructions, request.messages, text), by="the server"
        )
        yield Completion(text, usage_read, cut=finished == "length")

    def summarize(self, request: SummaryRequest) -> Completion:
        try:
            response = self.client.chat.completions.create(**self.summary_params(request))
        except openai.OpenAIError as error:
            raise self._explain(error) from None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice else ""
        estimate = estimate_usage(request.instructions, [Message("user", request.input_text)], text)
        usage = usage_of(response.usage, estimate, by="the server")
        return Completion(text, usage, cut=bool(choice and choice.finish_reason == "length"))

    def _diagnose(self, request: ReplyRequest) -> None:
        """Raises ContextOverflowError when a stream that ended before its first chunk was refused
        for its length.

        llama-cpp-python starts a streamed reply before it checks the prompt against its context
        window, then ends the stream with nothing in it ("Requested tokens (2378) exceed context
        window of 2048" stays in its log). The same request without streaming, for one token, gets
        the refusal with its figures (HTTP 400), which the memory learns from; any other answer
        leaves the stream's own error.
        """
        params = {**self.reply_params(request), "stream": False, "max_tokens": 1}
        params.pop("stream_options", None)
        # The broken stream's connection may be handed out again and found closed: one retry opens a
        # new one.
        client = self.client.with_options(max_retries=max(1, self.client.max_retries))
        try:
            client.chat.completions.create(**params)
        except openai.OpenAIError as error:
            explained = self._explain(error)
            if isinstance(explained, ContextOverflowError):
                raise explained from None

    def _explain(
        self, error: Exception, during_stream: bool = False, answer_began: bool = False
    ) -> BackendError:
        key = getattr(self.client, "api_key", None)
        return explain_error(
            error,
            key_name="MEMORA_API_KEY",
            url_name="MEMORA_BASE_URL",
            secrets=(key if isinstance(key, str) else None,),
            during_stream=during_stream,
            answer_began=answer_began,
        )
