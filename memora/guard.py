"""A backend behind the classroom's safeguards: the server-wide budget and key redaction.

``GuardedBackend`` wraps any backend. Before each request (reply or summary,
whether a turn, a prefold or the probe sends it) it asks the server-wide
``ServerLedger``, and after it records what the request cost there, even when
a stream was stopped part-way (then estimated from local counts). Every text
it hands back (a reply, a summary, an error's message) has the configured keys
redacted in any form (``redact``), so nothing drawn, stored or exported holds
them. Streamed deltas pass through as they come; the page redacts the text it
draws (``memora.ui.render``), since a key may be split across deltas.
The offline engine costs nothing and is never counted or refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from memora.backends.base import Backend, BackendError, Completion, ReplyRequest, SummaryRequest
from memora.backends.openai_errors import redact
from memora.server_budget import CappedSpend
from memora.tokens import LocalTokenCounter, count_text


class GuardedBackend:
    """``inner`` with the safeguards above; other attributes (``count_input_tokens``, ``client``) are ``inner``'s."""

    def __init__(self, inner: Backend, secrets: Iterable[str | None] = (), server_ledger: CappedSpend | None = None) -> None:
        self.inner = inner.inner if isinstance(inner, GuardedBackend) else inner
        self.secrets = tuple(s for s in secrets if s)
        self.server_ledger = server_ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def offline(self) -> bool:
        return bool(self.inner.offline)

    def redact(self, text: str) -> str:
        return redact(text, self.secrets)

    def check_budget(self) -> None:
        """Raises ServerBudgetReached when the server's budget is spent; the offline engine is never refused."""
        if self.server_ledger is not None and not self.offline:
            self.server_ledger.check()

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.check_budget()
        received: list[str] = []
        recorded = False
        try:
            for item in self._redacting_errors(self.inner.stream_reply(request)):
                if isinstance(item, Completion):
                    self._record(item.usage.total_tokens, "reply")
                    recorded = True
                    yield replace(item, text=self.redact(item.text))
                    return
                received.append(item)
                yield item
        finally:
            if not recorded:
                # Stopped, interrupted or failed: the server may still bill what it read and wrote.
                counted = request.counted_input_tokens
                if counted is None:
                    counted = LocalTokenCounter().count(request.model, request.instructions, request.messages)
                self._record(counted + count_text("".join(received)), "reply", estimated=True)

    def summarize(self, request: SummaryRequest) -> Completion:
        self.check_budget()
        try:
            completion = self.inner.summarize(request)
        except BackendError as error:
            raise self._redacted(error) from None
        self._record(completion.usage.total_tokens, "summary")
        return replace(completion, text=self.redact(completion.text))

    def _redacting_errors(self, stream: Iterator[str | Completion]) -> Iterator[str | Completion]:
        try:
            yield from stream
        except BackendError as error:
            raise self._redacted(error) from None

    def _redacted(self, error: BackendError) -> BackendError:
        # The backends already redact; this catches what they cannot know, such as a key typed on the page.
        error.args = (self.redact(str(error)),)
        return error

    def _record(self, tokens: int, kind: str, *, estimated: bool = False) -> None:
        if self.server_ledger is not None and not self.offline:
            self.server_ledger.record(tokens, kind, estimated=estimated)
