"""A backend behind the classroom's safeguards: the server-wide budget and key redaction.

``GuardedBackend`` wraps any backend. Before each request (reply or summary,
whether a turn, a prefold or the probe sends it) it books the request's largest
possible cost in the server-wide ledger (``memora.classroom.server_budget``): its input,
counted locally (times ``FOREIGN_TOKENIZER_CEILING`` for a server whose
tokenizer is not o200k_base), plus its output cap as the server bills it. A
request the ledger cannot book is never sent. Once answered, the booking is
settled to what the server billed, or to an estimate from local counts when it
reported nothing (a stopped stream, say). Settling never raises: a store that
cannot take it holds it in memory, so a billed reply is always handed back.
Every text it hands back (a reply, a summary, an error's message) has the
configured secrets redacted in any form (``redact``), so nothing drawn, stored
or exported holds them. Streamed deltas pass through as they come; the page
redacts the text it draws (``memora.app.page.render``), since a key may be split
across deltas. The offline engine costs nothing and is never counted or refused.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace

from memora.backends.base import Backend, BackendError, Completion, ReplyRequest, ServerProfile, SummaryRequest
from memora.backends.redaction import redact
from memora.classroom.server_budget import CappedSpend, Reservation
from memora.memory import MAX_REPLY_TOKENS
from memora.text.calibration import WORST_KNOWN_RATIO
from memora.text.messages import Message
from memora.text.tokens import REPLY_PRIMING_TOKENS, LocalTokenCounter, count_message, count_once, count_text

FOREIGN_TOKENIZER_CEILING = max(WORST_KNOWN_RATIO.values())
"""Booked per local token for a server with another tokenizer: the worst ratio measured for any kind of text
(``memora.text.calibration``, docs/backends.md: SmolLM2 on Korean, 3.89× o200k_base). A server counting more
still has its bill recorded; only then can the total pass the cap, by that one request's excess."""


class GuardedBackend:
    """``inner`` with the safeguards above. It is a ``Backend``: every member of the Protocol is forwarded by name
    (counting a request by the server, ``count_request``, among them, never booked); nothing else passes through."""

    def __init__(self, inner: Backend, secrets: Iterable[str | None] = (), server_ledger: CappedSpend | None = None) -> None:
        self.inner = inner.inner if isinstance(inner, GuardedBackend) else inner
        self.secrets = tuple(s for s in secrets if s)
        self.server_ledger = server_ledger

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def profile(self) -> ServerProfile:
        return self.inner.profile

    @property
    def offline(self) -> bool:
        return bool(self.inner.offline)

    @property
    def budgeted(self) -> bool:
        """Whether requests are booked in a server-wide ledger (never for the offline engine)."""
        return self.server_ledger is not None and not self.offline

    def count_request(self, model: str, instructions: str, messages: Sequence[Message]) -> int | None:
        # Counting is free (no model request), so it is never booked.
        return self.inner.count_request(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return self.inner.counting_source(model)

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        if self.budgeted and request.max_output_tokens is None:
            # An uncapped reply has no largest cost to book: it gets the default cap instead.
            request = replace(request, max_output_tokens=MAX_REPLY_TOKENS)
        counted = request.counted_input_tokens
        if counted is None:
            counted = LocalTokenCounter().count(request.model, request.instructions, request.messages)
        reservation = self._reserve(counted, request.model, request.max_output_tokens, "reply")
        received: list[str] = []
        settled = False
        try:
            for item in self._redacting_errors(self.inner.stream_reply(request)):
                if isinstance(item, Completion):
                    self._settle(reservation, item.usage.total_tokens, estimated=item.usage.estimated)
                    settled = True
                    yield replace(item, text=self.redact(item.text))
                    return
                received.append(item)
                yield item
        finally:
            if not settled:
                # Stopped, interrupted or failed: the server may still bill what it read and wrote.
                self._settle(reservation, counted + count_text("".join(received)), estimated=True)

    def summarize(self, request: SummaryRequest) -> Completion:
        # Counted as the summarizer counts it: the instructions, one user message holding the input, the priming.
        counted = count_message("system", request.instructions) + count_message("user", "") + count_once(request.input_text)
        reservation = self._reserve(counted + REPLY_PRIMING_TOKENS, request.model, request.max_output_tokens, "summary")
        try:
            completion = self.inner.summarize(request)
        except BaseException as error:
            # As before bookings: a summary request that failed is recorded as costing nothing.
            self._settle(reservation, 0, estimated=True)
            if isinstance(error, BackendError):
                raise self._redacted(error) from None
            raise
        self._settle(reservation, completion.usage.total_tokens, estimated=completion.usage.estimated)
        return replace(completion, text=self.redact(completion.text))

    def largest_cost(self, counted_input: int, model: str, max_output_tokens: int | None) -> int:
        """The most a request of ``counted_input`` local tokens, capped at ``max_output_tokens``, may be billed."""
        ceiling = 1.0 if getattr(self.inner, "profile", None) is None or self.inner.profile.counts_like_o200k else FOREIGN_TOKENIZER_CEILING
        output = max_output_tokens or 0
        billed_cap = getattr(self.inner, "billed_output_cap", None)
        if callable(billed_cap) and output:
            output = billed_cap(model, output)
        return math.ceil(counted_input * ceiling) + output

    def _reserve(self, counted_input: int, model: str, max_output_tokens: int | None, kind: str) -> Reservation | None:
        if not self.budgeted:
            return None
        assert self.server_ledger is not None
        return self.server_ledger.reserve(self.largest_cost(counted_input, model, max_output_tokens), kind)

    def _settle(self, reservation: Reservation | None, tokens: int, *, estimated: bool) -> None:
        if reservation is not None and self.server_ledger is not None:
            self.server_ledger.settle(reservation, tokens, estimated=estimated)

    def _redacting_errors(self, stream: Iterator[str | Completion]) -> Iterator[str | Completion]:
        try:
            yield from stream
        except BackendError as error:
            raise self._redacted(error) from None

    def _redacted(self, error: BackendError) -> BackendError:
        # The backends already redact; this catches what they cannot know, such as a key typed on the page.
        error.args = (self.redact(str(error)),)
        return error
