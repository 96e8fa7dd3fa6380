"""What the memory knows of its model server, and the summary requests it sends it.

``ServerKnowledge`` (``memory.server``) holds the backend and model, and is the seam between the
local tokens a plan counts and the server's: the memory makes a new one for each backend, and only
what the server itself counted changes it: its tokenizer endpoint where it has one, the usage it
reports, and the figures of a context-overflow error. It is no server: every computation is
``plan``'s (pure); it only keeps what was learned.

``Summarizer`` sends one summary request: the old summary plus the messages to fold, bounded both
ways. Its input fits the budget (the largest messages' middles are cut, with a marker, when they do
not), and its output fits ``max_summary_tokens`` (a summary the model did not finish is trimmed to
its last whole sentence and marked ``cut``). The ledger records the request whatever its text.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from memora.memory import budgets, plan
from memora.memory.backend import Backend, BackendError, ContextOverflowError, SummaryRequest
from memora.memory.plan import Sizes, TurnPlan
from memora.memory.values import PreparedContext, SummaryError, SummaryVersion
from memora.text.calibration import Calibration, request_kinds
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INPUT
from memora.text.tokens import (
    clip_middle,
    count_message,
    count_text,
    summary_request_tokens,
    truncate_text,
)
from memora.text.usage import Ledger, RequestParts, SentMessage, UsageRecord


class ServerKnowledge:
    """What a memory knows of its model server: the ``backend`` and ``model`` it sends to, and what
    the server's own counts teach, the seam between local tokens and its own.

    ``calibration`` turns the local o200k_base tokens a plan counts into the server's, per kind of
    text, learned only from figures the server itself counted (``memora.text.calibration``);
    ``server_window`` is the server's context window once an overflow error gave it, which then
    lowers the budget in force beside ``output`` (the most one request of the memory may write: a
    reply or a summary). Where the backend counts a request itself (``Backend.count_request``), that
    count holds the budget and the plan only has to be close.
    """

    def __init__(self, backend: Backend, model: str, output: int) -> None:
        self.backend = backend
        self.model = model
        self.output = output
        self.calibration = Calibration(exact=backend.profile.counts_like_o200k)
        self.server_window: int | None = None

    def budgets(self, max_input_tokens: int, texts: Sequence[str]) -> tuple[int, int]:
        """The budget in force (``budgets.budget_in_force``: in the server's tokens) and the local
        budget a plan weighs (``budgets.local_budget``), from what this server taught: its window
        and its calibration. ``texts``, what a request may carry, are weighed only where the server
        counts each request itself."""
        in_force = budgets.budget_in_force(max_input_tokens, self.server_window, self.output)
        weighed = texts if self.source() is not None else None
        return in_force, budgets.local_budget(self.calibration, in_force, weighed)

    def too_small(self) -> bool:
        """Whether no fold or cut can make a request fit the server's window beside ``output``: only
        a setting can."""
        return budgets.window_too_small(self.server_window, self.output)

    def source(self) -> str | None:
        """The server's endpoint that counts each request before it is sent (``"llama.cpp
        /apply-template + /tokenize"``, or OpenAI's count endpoint where asked to): a capability
        every backend declares; None where it has none."""
        return self.backend.counting_source(self.model)

    def counter(self) -> Callable[[str, str, Sequence[Message]], int | None] | None:
        """The backend's ``count_request(model, instructions, messages)`` where it has a ``source``;
        None otherwise."""
        return None if self.source() is None else self.backend.count_request

    def summary_counter(self) -> Callable[[str, str, Sequence[Message]], int | None] | None:
        """``counter`` for a summary request, except where local counts are the server's own
        (o200k_base): the reply request is the one the article counts, and a summary request is
        bounded by the exact local count."""
        return None if self.calibration.exact else self.counter()

    def exact(self, instructions: str, messages: Sequence[Message]) -> int | None:
        """The server's own count of a request, template included; None where local counts must
        do."""
        count = self.counter()
        return None if count is None else count(self.model, instructions, messages)

    def see(self, texts: Sequence[str]) -> None:
        self.calibration = self.calibration.seeing(texts)

    def learn(self, local: int, server: int, texts: Sequence[str]) -> None:
        """Learns a count the server itself made of a request of ``local`` tokens carrying
        ``texts``."""
        self.calibration = self.calibration.learn(local, server, request_kinds(local, texts))

    def learn_overflow(
        self, overflow: ContextOverflowError, local: int, texts: Sequence[str]
    ) -> None:
        """Learns the server's count and window from an overflow error on a request of ``local``
        tokens and ``texts``."""
        self.calibration, self.server_window = budgets.overflow_learned(
            overflow, local, self.calibration, self.server_window, texts
        )

    def counted(self, prepared: PreparedContext) -> PreparedContext:
        """``prepared`` with the server's own count of it, where it counts requests; that count is
        learned."""
        if (exact := self.exact(prepared.instructions, prepared.context_messages)) is None:
            return prepared
        self.learn(prepared.input_tokens, exact, prepared.texts)
        return replace(prepared, server_input_tokens=exact)

    def check_alone(
        self, turn_plan: TurnPlan, text: str | None, system_prompt: str, summary: str, in_force: int
    ) -> None:
        """Raises ContextBudgetError unless the plan's message fits beside the instructions: by the
        plan, else by the server's own count where it has one (``text``; None for the message a fold
        ahead expects)."""
        if turn_plan.message_fits:
            return
        exact = None if text is None else self.exact(system_prompt, [Message("user", text)])
        if exact is None or exact > in_force:
            raise budgets.budget_error(
                self.calibration, turn_plan.alone + plan.summary_tokens(summary), exact, in_force
            )

    def record(self, ledger: Ledger, record: UsageRecord, texts: Sequence[str]) -> None:
        """Appends ``record`` to ``ledger``; a trusted figure the server counted itself (not one it
        estimated, nor one its tokenizer's own count contradicts) is learned, by the kinds of
        ``texts``."""
        if (
            record.trusted
            and record.teaches
            and record.server_counted_input_tokens is None
            and record.input_tokens is not None
        ):
            self.learn(record.counted_input_tokens, record.input_tokens, texts)
        ledger.append(record)


def overflow_error() -> BackendError:
    """The error for a server whose context window no fold or cut can fit: only a setting can."""
    return BackendError(
        "The model server's context window is smaller than Memora's budget, even after folding "
        "and cutting to the figures it gave. Lower MEMORA_MAX_INPUT_TOKENS or set "
        "MEMORA_CONTEXT_WINDOW to the server's context size (llama.cpp: --n_ctx). "
        "Your message is kept."
    )


# -- one summary request ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Summarizer:
    """What every summary request of one memory shares: model, instructions and bounds."""

    model: str
    instructions: str
    max_summary_tokens: int

    def fold(
        self,
        backend: Backend,
        summary: str,
        messages: tuple[Message, ...],
        span: tuple[int, int],
        room: int,
        *,
        message_tokens: tuple[int, ...],
        turn: int,
        served_by: str,
        input_budget: int,
        exact: ExactCount | None = None,
        counts: list[ServerCount] | None = None,
        local_budget: int | None = None,
        version: int = 0,
        reason: str = "none",
    ) -> tuple[SummaryVersion, UsageRecord]:
        """Folds ``messages`` (history ``span``) into ``summary``, within ``room`` local tokens of
        messages.

        ``message_tokens`` are the messages' local tokens, as the memory counted them (so that none
        is tokenized again). ``turn``, ``served_by`` and ``input_budget`` go into the ledger record.
        ``exact`` is the server's own count of a request (its tokenizer endpoint): a request it
        counts over ``input_budget`` is cut further before anything is sent, and each such count is
        appended to ``counts`` (a ``ServerCount``), for the memory to learn from, even on failure.
        ``local_budget`` (``input_budget`` when None), ``version`` and ``reason`` go into the
        record's parts (``summary_parts``): the budget the room came from, the version this fold
        makes and why it folds. Returns the new version and the request's record. Raises
        BackendError when the request fails or cannot be cut to fit (nothing is recorded then), and
        SummaryError, after the record, when the model returned no summary for new messages.
        """
        request, counted, server_count = self._fitted(
            summary, messages, room, message_tokens, input_budget, exact, counts
        )
        began = time.perf_counter()
        completion = backend.summarize(request)
        record = UsageRecord.of(
            turn=turn,
            kind="summary",
            model=served_by,
            counted_input_tokens=counted,
            usage=completion.usage,
            latency_s=time.perf_counter() - began,
            cut=completion.cut,
            input_budget=input_budget,
            server_counted_input_tokens=server_count,
            parts=summary_parts(
                request,
                counted,
                span[0],
                budget=input_budget if local_budget is None else local_budget,
                version=version,
                reason=reason,
            ),
        )
        text = completion.text.strip()
        bounded = truncate_text(text, self.max_summary_tokens)
        cut = completion.cut or bounded != text
        text = whole_sentences(bounded) if cut else text
        clipped = sum(a is not b for a, b in zip(messages, request.new_messages, strict=True))
        return SummaryVersion(
            text, span[1], span, completion.usage.total_tokens, turn, cut, clipped
        ), record

    def summarize(
        self,
        server: ServerKnowledge,
        summary: str,
        messages: tuple[Message, ...],
        span: tuple[int, int],
        *,
        sizes: Sizes,
        message_tokens: tuple[int, ...],
        turn: int,
        served_by: str,
        max_input_tokens: int,
        plan_texts: Sequence[str],
        version: int = 0,
        reason: str = "none",
    ) -> tuple[SummaryVersion, UsageRecord]:
        """``fold`` within the budget in force, the room for messages from the local budget for
        ``plan_texts`` (``ServerKnowledge.budgets``, asked again after an overflow taught the
        server's figures); ``version`` and ``reason`` label the record's parts.

        A context-overflow error teaches ``server`` its figures, and the request is cut to the room
        they leave and sent once more; ``overflow_error`` when no cut can fit the server's window,
        or on a second overflow. Every count the server made of a request is learned, even when the
        request then fails. Records nothing in the ledger."""

        def send() -> tuple[SummaryVersion, UsageRecord]:
            in_force, local = server.budgets(max_input_tokens, plan_texts)
            room = sizes.fold_room(local)
            counts: list[ServerCount] = []
            try:
                return self.fold(
                    server.backend,
                    summary,
                    messages,
                    span,
                    room,
                    message_tokens=message_tokens,
                    turn=turn,
                    served_by=served_by,
                    input_budget=in_force,
                    exact=server.summary_counter(),
                    counts=counts,
                    local_budget=local,
                    version=version,
                    reason=reason,
                )
            finally:
                # What the server counted is learned even when the request then fails or is refused.
                for count in counts:
                    server.learn(count.local_tokens, count.server_tokens, count.texts)

        try:
            return send()
        except ContextOverflowError as overflow:
            local = sizes.summary_request + sum(message_tokens)
            server.learn_overflow(overflow, local, summary_texts(summary, messages))
        if server.too_small():
            raise overflow_error()
        try:
            return send()
        except ContextOverflowError:
            raise overflow_error() from None

    def _fitted(
        self,
        summary: str,
        messages: tuple[Message, ...],
        room: int,
        message_tokens: tuple[int, ...],
        input_budget: int,
        exact: ExactCount | None,
        counts: list[ServerCount] | None,
    ) -> tuple[SummaryRequest, int, int | None]:
        """The request with ``messages`` cut to ``room``, then further while the server's ``exact``
        count is over ``input_budget``; with its local count and the server's (None without
        ``exact``). Raises BackendError when ``MAX_RECUTS`` cuts leave it over."""
        request, counted = self._request(summary, clip_for_summary(messages, room, message_tokens))
        server_count = (
            None
            if exact is None
            else exact(self.model, request.instructions, [Message("user", request.input_text)])
        )
        for _ in range(MAX_RECUTS):
            if server_count is None or server_count <= input_budget:
                return request, counted, server_count
            if counts is not None:
                counts.append(
                    ServerCount(counted, server_count, (request.instructions, request.input_text))
                )
            # The room shrinks by the share the server counted over, and a little more: counts are
            # not proportional. From what the messages take now, not from the room, which they may
            # not have filled.
            taken = min(room, sum(message_tokens))
            room = max(
                1,
                taken
                - math.ceil((server_count - input_budget) * counted / server_count)
                - RECUT_SPARE,
            )
            request, counted = self._request(
                summary, clip_for_summary(messages, room, message_tokens)
            )
            server_count = exact(
                self.model, request.instructions, [Message("user", request.input_text)]
            )  # type: ignore[misc]
        if server_count is not None and server_count > input_budget:
            raise BackendError(
                f"The summary request needs {server_count} tokens by the server's count, over the "
                f"budget of {input_budget}, even with the messages cut. Raise "
                "MEMORA_MAX_INPUT_TOKENS. Nothing was sent; your message is kept."
            )
        return request, counted, server_count

    def _request(self, summary: str, sent: tuple[Message, ...]) -> tuple[SummaryRequest, int]:
        """The request, and its local count: the input is one new text, counted once, not through
        the shared cache, where it would evict the window's messages."""
        request = summary_request(
            self.model, self.instructions, summary, sent, self.max_summary_tokens
        )
        return request, summary_request_tokens(request.instructions, request.input_text)


def summary_request(
    model: str, instructions: str, summary: str, messages: Sequence[Message], max_output_tokens: int
) -> SummaryRequest:
    """The request folding ``messages`` into ``summary``, its input in the article's layout
    (``SUMMARY_INPUT``)."""
    transcript = "\n".join(f"{m.role}: {m.content}" for m in messages)
    text = SUMMARY_INPUT.format(summary=summary or "(empty)", transcript=transcript)
    return SummaryRequest(model, instructions, summary, tuple(messages), max_output_tokens, text)


def summary_parts(
    request: SummaryRequest, counted: int, first: int, *, budget: int, version: int, reason: str
) -> RequestParts:
    """A summary request of ``counted`` local tokens, part by part: the old summary's text, each
    folded message as its transcript line carries it (numbered from history index ``first``), and
    the rest as the instructions (the summary instructions, the layout, the priming).

    The transcript's lines are counted one by one; what their joins add or save stays in the
    instructions, so that the parts add up to ``counted`` exactly."""
    summary = count_text(request.existing_summary) if request.existing_summary else 0
    folded = tuple(
        SentMessage(first + offset + 1, count_text(f"{m.role}: {m.content}"))
        for offset, m in enumerate(request.new_messages)
    )
    return RequestParts(
        instructions=counted - summary - sum(m.tokens for m in folded),
        summary=summary,
        window=folded,
        current=None,
        budget=budget,
        version=version,
        reason=reason,
    )


ExactCount = Callable[[str, str, Sequence[Message]], "int | None"]
"""A backend's ``count_request(model, instructions, messages)``: the server's own count of a
request."""


@dataclass(frozen=True)
class ServerCount:
    """A count the server made of a summary request before it was sent: for the calibration to learn
    from."""

    local_tokens: int
    """The request's local (o200k_base) count."""
    server_tokens: int
    """The server's own count of the same request."""
    texts: tuple[str, ...]
    """The texts the request carried, for the calibration's kinds of text."""


MAX_RECUTS = 4
RECUT_SPARE = 8


def summary_texts(summary: str, messages: Sequence[Message]) -> list[str]:
    """The texts a summary request of ``messages`` carries, for the calibration's kinds of text."""
    return [summary, *(m.content for m in messages)]


def check_summary(version: SummaryVersion, messages: tuple[Message, ...]) -> None:
    """Raises SummaryError when a fold of ``messages`` produced an empty summary."""
    if not version.text and messages:
        raise SummaryError("The model returned an empty summary; the previous summary is kept.")


MIN_CLIPPED_REPLY = 32
"""Tokens each reply keeps at least when replies are cut first; below that, every message shares the
cut."""


def clip_for_summary(
    messages: tuple[Message, ...], room: int, costs: Sequence[int]
) -> tuple[Message, ...]:
    """``messages``, with the middles of the largest cut so that together they fit ``room`` local
    tokens.

    ``costs`` are the messages' local tokens (``count_message``). The replies are cut first, because
    the summary instructions keep the user's facts, and a user message cut in its middle loses them.
    The user's messages are cut too only when they alone would leave a reply under
    ``MIN_CLIPPED_REPLY`` tokens; then every message within an even share of the room stays whole
    and the others share what is left. Unchanged messages are the same objects.
    """
    if sum(costs) <= room:
        return messages
    replies = [i for i, m in enumerate(messages) if m.role != "user"]
    left = room - sum(cost for m, cost in zip(messages, costs, strict=True) if m.role == "user")
    if replies and left >= len(replies) * MIN_CLIPPED_REPLY:
        cut = _clip_evenly(tuple(messages[i] for i in replies), left, [costs[i] for i in replies])
        by_index = dict(zip(replies, cut, strict=True))
        return tuple(by_index.get(i, m) for i, m in enumerate(messages))
    return _clip_evenly(messages, room, costs)


def _clip_evenly(
    messages: tuple[Message, ...], room: int, costs: Sequence[int]
) -> tuple[Message, ...]:
    """Messages within an even share of ``room`` stay whole; the others' middles are cut to share
    the rest.

    Called only when ``costs`` add up to more than ``room``, so at least one message is over its
    share.
    """
    share = room // len(messages)
    large = {i for i, cost in enumerate(costs) if cost > share}
    left = (room - sum(cost for i, cost in enumerate(costs) if i not in large)) // len(large)
    return tuple(
        Message(m.role, clip_middle(m.content, left - count_message(m.role, "")))
        if i in large
        else m
        for i, m in enumerate(messages)
    )


# Latin ends need a space after them ("3.5" is no end); CJK text has none between sentences.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|$)|[。！？][」』”’）]*|\n")


def whole_sentences(text: str) -> str:
    """``text`` up to its last whole sentence, for a summary the model did not finish.

    A sentence ends at ``.``, ``!`` or ``?`` before a space, at their CJK forms, or
    at a line break. Without any such end, it keeps the whole words and adds
    ``…``, so a cut summary is never empty while it had words.
    """
    text = text.rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if ends:
        return text[: ends[-1]].rstrip()
    words = text.rsplit(maxsplit=1)[0] if " " in text else text
    return f"{words}…" if words else ""
