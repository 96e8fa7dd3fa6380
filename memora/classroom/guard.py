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
Every request, reply or summary, is booked once per HTTP try, in one loop
(``_tries``): under a budget the SDK's own retries are turned off and made here
instead, each booked before it is sent, and a try sent but never answered (a
timeout) stays counted at its largest cost, since a server bills an answer the
client stopped waiting for. A reply is tried again only before its streamed
answer began, as the SDK does: never once a delta could have reached the learner.
Every text it hands back (a reply, a summary, an error's message) has the
configured secrets redacted in any form (``redact``), so nothing drawn, stored
or exported holds them. Streamed deltas pass through as they come; the page
redacts the text it draws (``memora.app.page.render``), since a key may be split
across deltas. The offline engine costs nothing and is never counted or refused.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import replace

from memora.backends.redaction import redact
from memora.classroom.server_budget import (
    CappedSpend,
    Reservation,
    ServerBudgetReached,
    ServerBudgetUnavailable,
)
from memora.memory import MAX_REPLY_TOKENS
from memora.memory.backend import (
    Backend,
    BackendError,
    Completion,
    ReplyRequest,
    ServerProfile,
    SummaryRequest,
)
from memora.text.calibration import WORST_KNOWN_RATIO
from memora.text.messages import Message
from memora.text.tokens import LocalTokenCounter, count_text, summary_request_tokens

RETRY_WAIT_S = 0.5
MAX_RETRY_WAIT_S = 8.0
"""The waits between a request's tries when they are made here: the openai SDK's own (0.5 s,
doubling, at most 8 s)."""
RETRIED_STATUSES = (408, 409, 429)
"""With every 5xx, the HTTP statuses the openai SDK retries."""


def retryable(error: BackendError) -> bool:
    """Whether the openai SDK would retry a request that failed so: unanswered (a timeout, a
    connection that failed or broke), or answered 408, 409, 429 or 5xx; never once a streamed answer
    had begun (``ModelServerError.began``), even before its first delta."""
    if getattr(error, "began", False):
        return False
    status = getattr(error, "status_code", None)
    if status is None:
        return getattr(error, "kind", None) in ("timeout", "connection")
    return status in RETRIED_STATUSES or status >= 500


def _may_be_billed(error: BaseException) -> bool:
    """Whether a failed request may still be billed: sent (``ModelServerError.sent``), and not
    answered with an HTTP error. A stop or an unknown failure counts as sent."""
    return getattr(error, "status_code", None) is None and bool(getattr(error, "sent", True))


FOREIGN_TOKENIZER_CEILING = max(WORST_KNOWN_RATIO.values())
"""Booked per local token for a server with another tokenizer: the worst ratio measured for any kind
of text (``memora.text.calibration``, docs/backends.md: SmolLM2 on Korean, 3.89× o200k_base). A
server counting more still has its bill recorded; only then can the total pass the cap, by that one
request's excess."""


class GuardedBackend:
    """``inner`` with the safeguards above. It is a ``Backend``: every member of the Protocol is
    forwarded by name (counting a request by the server, ``count_request``, among them, never
    booked); nothing else passes through."""

    def __init__(
        self,
        inner: Backend,
        secrets: Iterable[str | None] = (),
        server_ledger: CappedSpend | None = None,
    ) -> None:
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

    def count_request(
        self, model: str, instructions: str, messages: Sequence[Message]
    ) -> int | None:
        # Counting is free (no model request), so it is never booked.
        return self.inner.count_request(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return self.inner.counting_source(model)

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """The reply's deltas as they come, then its Completion; each HTTP try booked on its own
        (``_tries``).

        A try is made again only when it failed before its streamed answer began, as the SDK retries
        a stream (``retryable``): the caller has seen none of its text. A failure after that ends
        the reply, as it would without a budget (the memory discards any partial text); a try that
        failed after some deltas is settled to the counted input plus the text received, estimated:
        the server wrote about that much. A reply stopped by the caller (the generator closed) is
        settled so too.
        """
        if self.budgeted and request.max_output_tokens is None:
            # An uncapped reply has no largest cost to book: it gets the default cap instead.
            request = replace(request, max_output_tokens=MAX_REPLY_TOKENS)
        counted = request.counted_input_tokens
        if counted is None:
            counted = LocalTokenCounter().count(
                request.model, request.instructions, request.messages
            )
        yield from self._tries(
            "reply",
            counted,
            request.model,
            request.max_output_tokens,
            lambda sender: sender.stream_reply(request),
        )

    def summarize(self, request: SummaryRequest) -> Completion:
        """The summary; each HTTP try booked on its own (``_tries``). A summary yields nothing
        before its answer, so every failed try that the SDK would retry is made again."""
        counted = summary_request_tokens(request.instructions, request.input_text)

        def send(sender: Backend) -> Iterator[Completion]:
            yield sender.summarize(request)

        with closing(
            self._tries("summary", counted, request.model, request.max_output_tokens, send)
        ) as tries:
            completion = next(tries)
        assert isinstance(completion, Completion)
        return completion

    def _tries(
        self,
        kind: str,
        counted: int,
        model: str,
        max_output_tokens: int | None,
        send: Callable[[Backend], Iterator[str | Completion]],
    ) -> Iterator[str | Completion]:
        """What ``send`` yields (a reply's deltas, then one Completion), each HTTP try of a ``kind``
        request booked.

        Under a server budget the SDK's own retries are turned off (``sending_once``) and the same
        retries (``retryable``, with the SDK's waits) are made here, each booked at its largest cost
        before it is sent: a try the budget cannot book is not sent. A try that yielded anything is
        never made again. A failed try is settled by ``_failed_cost``: one sent but unanswered stays
        counted at its largest cost. The error of the last try says what was sent and booked
        (``_told``). Without a budget nothing is booked, and there is one try, which the SDK retries
        by itself; a backend without ``sending_once`` is tried once either way.
        """
        sender, retries = self._sender()
        largest = self.largest_cost(counted, model, max_output_tokens)
        failed: BackendError | None = None
        unanswered = 0
        for number in range(1, retries + 2):
            if failed is not None:
                time.sleep(min(RETRY_WAIT_S * 2 ** (number - 2), MAX_RETRY_WAIT_S))
            try:
                reservation = self._reserve(largest, kind)
            except (ServerBudgetReached, ServerBudgetUnavailable):
                if failed is None:
                    raise  # nothing was sent: the budget's own refusal says so
                raise self._told(failed, kind, largest, unanswered, refused=number) from None
            received: list[str] = []
            completion: Completion | None = None
            try:
                with closing(send(sender)) as items:
                    for item in items:
                        if isinstance(item, Completion):
                            completion = item
                            break
                        received.append(item)
                        yield item
            except BaseException as error:
                self._settle(
                    reservation,
                    self._failed_cost(error, counted, received, largest),
                    estimated=True,
                )
                if not isinstance(error, BackendError):
                    raise  # a stop (the generator closed), or a bug: never tried again
                failed = self._redacted(error)
                unanswered += not received and _may_be_billed(failed)
                if received or number > retries or not retryable(failed):
                    raise self._told(failed, kind, largest, unanswered, refused=None) from None
                continue
            if completion is None:
                # The stream ended without its final event: the server may still bill what it read
                # and wrote.
                self._settle(reservation, counted + count_text("".join(received)), estimated=True)
                return
            self._settle(
                reservation, completion.usage.total_tokens, estimated=completion.usage.estimated
            )
            yield replace(completion, text=self.redact(completion.text))
            return
        raise AssertionError("unreachable: the last try returns or raises")

    def _sender(self) -> tuple[Backend, int]:
        """The backend that sends a request, and how often to try it again here: under a budget, the
        SDK's own retries, taken over on a client that never retries. Made for each request, so that
        it always sends with the inner backend's client of the moment."""
        sending_once = getattr(self.inner, "sending_once", None)
        if not self.budgeted or sending_once is None:
            return self.inner, 0
        return sending_once(), int(getattr(self.inner, "retries", 0))

    @staticmethod
    def _failed_cost(
        error: BaseException, counted: int, received: Sequence[str], largest: int
    ) -> int:
        """What a failed try is settled to. After some text: the counted input and that text, as the
        server wrote about that much before the stream broke or was closed. Before any: nothing when
        the server answered with an error (no provider bills a refusal) or the request was never
        sent; else its largest cost, since a server that answered after the client stopped waiting
        still bills it, and nothing says how much."""
        if received:
            return counted + count_text("".join(received))
        return largest if _may_be_billed(error) else 0

    def _told(
        self, error: BackendError, kind: str, largest: int, unanswered: int, *, refused: int | None
    ) -> BackendError:
        """``error``, its message followed by what was sent and booked: the page and the REPL show
        it as it is."""
        notes = []
        if self.budgeted and unanswered:
            notes.append(
                f"The {kind} request went unanswered {unanswered} time(s); the class's token "
                f"budget counts each at its largest cost ({largest:,} tokens), since a server may "
                "bill a request it answered after Memora stopped waiting."
            )
        if refused is not None:
            notes.append(
                f"Try {refused} was not sent: the class's token budget has no room for it."
            )
        if notes:
            error.args = (" ".join([str(error), *notes]),)
        return error

    def largest_cost(self, counted_input: int, model: str, max_output_tokens: int | None) -> int:
        """The most a request of ``counted_input`` local tokens, capped at ``max_output_tokens``,
        may be billed."""
        ceiling = (
            1.0
            if getattr(self.inner, "profile", None) is None or self.inner.profile.counts_like_o200k
            else FOREIGN_TOKENIZER_CEILING
        )
        output = max_output_tokens or 0
        billed_cap = getattr(self.inner, "billed_output_cap", None)
        if callable(billed_cap) and output:
            output = billed_cap(model, output)
        return math.ceil(counted_input * ceiling) + output

    def _reserve(self, tokens: int, kind: str) -> Reservation | None:
        if not self.budgeted:
            return None
        assert self.server_ledger is not None
        return self.server_ledger.reserve(tokens, kind)

    def _settle(self, reservation: Reservation | None, tokens: int, *, estimated: bool) -> None:
        if reservation is not None and self.server_ledger is not None:
            self.server_ledger.settle(reservation, tokens, estimated=estimated)

    def _redacted(self, error: BackendError) -> BackendError:
        # The backends already redact; this catches what they cannot know, such as a key typed on
        # the page.
        error.args = (self.redact(str(error)),)
        return error
