"""Export a conversation to JSON and import it back into a new memory.

A transcript holds the full history, every summary version, the usage ledger, the per-turn stats,
the last request's context (its messages, and beside them each one's source and tokens, its
instructions and its counts: ``last_request``, so that the page draws it again after a reload, in
another tab or after a restart), the memory's limits and model, and when it was made. It never holds
the API key, the base URL or any other part of the backend's configuration: export reads only the
memory's own state. Prompts are not exported either; an imported conversation continues under the
prompts configured where it is imported.

Import is strict, since a transcript may come from anyone. Every failure is a
``TranscriptError`` (a ValueError) with a stable ``code``, the JSON ``path`` of
the bad value and plain-English text. Checks, in order: the size (before any
parsing, ``MAX_TRANSCRIPT_BYTES`` by default), UTF-8, JSON syntax (no NaN,
no infinities, no duplicate keys, bounded nesting), the format name and
version, then every value's type and range. Unknown keys are rejected at every
level, so a file from a newer Memora fails with ``unsupported_version`` or
``unknown_key`` rather than being half-read. The history must be complete
user/assistant pairs in order; the summary versions must chain (each folds from
where the last one stopped) and never point past the history or into the
middle of a pair.

Error codes: too_large, bad_encoding, not_json, bad_number, duplicate_key,
too_deep, wrong_format, unsupported_version, wrong_type, unknown_key,
missing_key, too_many_items, string_too_long, empty_string,
number_out_of_range, bad_value, duplicate_id, bad_role, pairs_out_of_order,
unpaired_message, odd_summary_pointer, summary_beyond_history,
summary_chain_broken, bad_settings, message_over_cap, over_turn_cap,
ledger_over_cap, summary_over_cap.
"""
# The last four codes come from ``check_caps``: a parsed transcript against the importing session's
# caps.

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from memora.classroom.limits import SessionLimits
from memora.classroom.transcript import untrusted
from memora.classroom.transcript.untrusted import MAX_INT, Count, NotBlank, StrictModel
from memora.memory import FoldPolicy, ShortTermMemory, SummaryVersion
from memora.memory.values import FoldReason, Limits, PreparedContext, Source
from memora.text.messages import Message
from memora.text.tokens import count_text
from memora.text.usage import RequestParts, UsageRecord

TRANSCRIPT_FORMAT = "memora-transcript"
TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_BYTES = 2 * 1024 * 1024
"""2 MiB: hundreds of long turns; checked before the file is parsed."""
MAX_MESSAGES = 10_000
MAX_MESSAGE_CHARS = 200_000
MAX_SUMMARY_CHARS = 20_000
MAX_LEDGER_ROWS = 20_000
MAX_NAME_CHARS = 200


class TranscriptError(untrusted.UntrustedJSONError):
    """An imported transcript is malformed or hostile; see the module docstring for codes."""


# -- the file format ------------------------------------------------------------
# Flags added after version 1 was published (summary_versions[i].cut/.clipped/.reason,
# ledger[i].cut/.implausible/.input_budget, turn_stats[i].record.cut/.over_budget/.implausible)
# have defaults, so older version 1 files still read.

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS), NotBlank]
Index = Annotated[int, Field(ge=0, le=MAX_MESSAGES)]
Turn = Annotated[int, Field(ge=1, le=MAX_INT)]
"""A 1-based user turn; whether the history has that many turns is checked after validation."""


def _iso_datetime(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise PydanticCustomError(
            "bad_value", "created_at is not an ISO 8601 date and time."
        ) from None
    return value


class TranscriptSettings(StrictModel):
    """The memory's own settings; nothing about the backend's credentials.

    ``offline`` records whether the offline engine served the conversation, so
    its ledger is never priced as if a model had billed it.
    """

    model: Name
    max_input_tokens: Annotated[int, Field(ge=1, le=10_000_000)]
    max_recent_turns: Annotated[int, Field(ge=0, le=1000)]
    max_summary_tokens: Annotated[int, Field(ge=1, le=100_000)]
    fold_batch_turns: Annotated[int, Field(ge=0, le=1000)] = 0
    """Read from files written before batched folding was deleted, and ignored: the watermark is its
    product form."""
    offline: bool


class HistoryMessage(StrictModel):
    role: Literal["user", "assistant"]
    content: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]

    @field_validator("content")
    @classmethod
    def _user_text_is_not_blank(cls, content: str, info: ValidationInfo) -> str:
        return untrusted.not_blank(content) if info.data.get("role") == "user" else content


class ContextMessage(HistoryMessage):
    role: Literal["developer", "system", "user", "assistant"]  # type: ignore[assignment]


class SummaryVersionEntry(StrictModel):
    text: Annotated[str, Field(max_length=MAX_SUMMARY_CHARS)]
    summarized_message_count: Index
    folded: Annotated[list[Index], Field(max_length=2)]
    tokens: Count
    turn: Turn
    cut: bool = False
    clipped: Index = 0
    reason: FoldReason = "none"


class SentMessageEntry(StrictModel):
    number: Annotated[int, Field(ge=1, le=MAX_MESSAGES)]
    tokens: Count


class RequestPartsEntry(StrictModel):
    """A request's parts (``memora.text.usage.RequestParts``): counts and message numbers, never
    texts."""

    instructions: Count
    summary: Count
    window: Annotated[list[SentMessageEntry], Field(max_length=MAX_MESSAGES)]
    current: SentMessageEntry | None
    budget: Count
    version: Index = 0
    reason: FoldReason = "none"


class LedgerEntry(StrictModel):
    turn: Turn
    kind: Literal["reply", "summary"]
    model: Name
    counted_input_tokens: Count
    input_tokens: Count | None
    output_tokens: Count | None
    total_tokens: Count
    latency_s: Annotated[float, Field(ge=0.0, le=1e6)]
    reasoning_tokens: Count
    cached_tokens: Count
    estimated: bool
    full_history_tokens: Count | None
    cut: bool = False
    implausible: bool = False
    input_budget: Count | None = None
    context_messages: Count | None = None
    newly_summarized: Count | None = None
    summary_tokens: Count | None = None
    server_counted_input_tokens: Count | None = None
    source: Annotated[str, Field(max_length=200)] = ""
    bills: bool = False
    teaches: bool = True
    parts: RequestPartsEntry | None = None
    """Written since requests keep their parts; a record without them reads as before (no picture of
    it)."""


class TurnStatsEntry(StrictModel):
    assistant_index: Annotated[int, Field(ge=1, le=MAX_MESSAGES)]
    turn: Turn
    newly_summarized_count: Index
    context_messages: Index
    counted_input_tokens: Count
    input_tokens: Count | None
    output_tokens: Count | None
    summary_token_usage: Count
    session_total_tokens: Count
    estimated: bool
    cut: bool = False
    over_budget: bool = False
    implausible: bool = False


class LastRequestEntry(StrictModel):
    """The last finished turn's reply request beside ``last_context`` (its messages): what
    ``PreparedContext`` adds.

    Written since the last request came back with a conversation; a file without it reads as before
    (no figures: the page says no request was made in this session yet)."""

    instructions: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
    sources: Annotated[list[Source], Field(max_length=MAX_MESSAGES)]
    message_tokens: Annotated[list[Count], Field(max_length=MAX_MESSAGES)]
    input_tokens: Count
    summary_token_usage: Count
    newly_summarized_count: Index
    server_input_tokens: Count | None = None


class TranscriptFile(StrictModel):
    """A transcript file as JSON holds it; ``parse_transcript`` adds the cross-field rules."""

    format: Literal["memora-transcript"]
    version: Literal[1]
    created_at: Annotated[
        str, Field(min_length=1, max_length=40), NotBlank, AfterValidator(_iso_datetime)
    ]
    settings: TranscriptSettings
    history: Annotated[list[HistoryMessage], Field(max_length=MAX_MESSAGES)]
    summary_versions: Annotated[list[SummaryVersionEntry], Field(max_length=MAX_MESSAGES)]
    ledger: Annotated[list[LedgerEntry], Field(max_length=MAX_LEDGER_ROWS)]
    turn_stats: Annotated[
        list[TurnStatsEntry], Field(max_length=MAX_MESSAGES, default_factory=list)
    ]
    last_context: Annotated[list[ContextMessage], Field(max_length=MAX_MESSAGES)]
    last_request: LastRequestEntry | None = None


@dataclass(frozen=True)
class Transcript:
    """A validated transcript; ``turn_stats`` pairs an assistant history index with a legacy file's
    stats for it (files now keep those figures in the reply's ledger record:
    ``with_turn_stats``)."""

    created_at: str
    settings: TranscriptSettings
    history: tuple[Message, ...]
    summary_versions: tuple[SummaryVersion, ...]
    ledger: tuple[UsageRecord, ...]
    turn_stats: tuple[tuple[int, TurnStatsEntry], ...]
    last_context: tuple[Message, ...]
    last_request: PreparedContext | None = None
    """The request ``last_context`` was sent in, whole (None in a file written before it was
    kept)."""


# -- export -------------------------------------------------------------------


def committed_request(
    memory: ShortTermMemory, earlier: PreparedContext | None = None
) -> PreparedContext | None:
    """The request of the memory's last finished turn: the one whose messages are ``last_context``.

    ``memory.last_prepared`` is the last request prepared, which is another one while a turn is
    under way (or None once its message is added) and after a failed turn; ``earlier`` (what a
    keeper saved last) is asked then. None when neither is that request (a conversation restored
    from a file written before requests were kept).
    """
    sent = tuple(memory.last_context)
    for request in (memory.last_prepared, earlier):
        if request is not None and request.context_messages == sent:
            return request
    return None


def export_transcript(
    memory: ShortTermMemory,
    *,
    now: datetime | None = None,
    last_request: PreparedContext | None = None,
) -> dict[str, Any]:
    """The memory as a JSON-ready dict.

    A user message still waiting for its reply is left out, so the export is always complete pairs;
    its stats and context stay as of the last finished turn. ``last_request``: that turn's request
    when the caller kept it (``committed_request``); by default, the memory's.
    """
    request = committed_request(memory, last_request)
    completed = len(memory.history) - (1 if memory.conversation.pending else 0)
    created = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")
    return {
        "format": TRANSCRIPT_FORMAT,
        "version": TRANSCRIPT_VERSION,
        "created_at": created,
        "settings": {
            "model": memory.model,
            "max_input_tokens": memory.max_input_tokens,
            "max_recent_turns": memory.max_recent_turns,
            "max_summary_tokens": memory.limits.max_summary_tokens,
            "offline": bool(getattr(memory.server.backend, "offline", False)),
        },
        "history": [_message(m) for m in memory.history[:completed]],
        "summary_versions": [
            {**asdict(v), "folded": list(v.folded)} for v in memory.conversation.versions
        ],
        "ledger": [asdict(record) for record in memory.ledger],
        "last_context": [_message(m) for m in memory.last_context],
        **({} if request is None else {"last_request": _request(request)}),
    }


def dumps_transcript(memory: ShortTermMemory, *, now: datetime | None = None) -> bytes:
    """The transcript as UTF-8 JSON bytes, ready for a download button."""
    return json.dumps(
        export_transcript(memory, now=now), ensure_ascii=False, indent=1, allow_nan=False
    ).encode("utf-8")


def _message(message: Message) -> dict[str, str]:
    return {"role": message.role, "content": message.content}


def _request(request: PreparedContext) -> dict[str, Any]:
    # Its messages are last_context's: only what the request adds to them is written here.
    return {
        "instructions": request.instructions,
        "sources": list(request.sources),
        "message_tokens": list(request.message_tokens),
        "input_tokens": request.input_tokens,
        "summary_token_usage": request.summary_token_usage,
        "newly_summarized_count": request.newly_summarized_count,
        "server_input_tokens": request.server_input_tokens,
    }


# -- import -------------------------------------------------------------------


def parse_transcript(raw: bytes | str, *, max_bytes: int = MAX_TRANSCRIPT_BYTES) -> Transcript:
    """Validates an exported transcript; raises TranscriptError (see the module docstring)."""
    return transcript_from_data(untrusted.parse_json(raw, TranscriptError, max_bytes=max_bytes))


def transcript_from_data(data: Any) -> Transcript:
    """``parse_transcript`` after the JSON syntax: the header, every value, and the cross-field
    rules.

    For a transcript that arrives already parsed, inside another document (a saved conversation):
    it gets exactly the checks an imported file gets. Raises TranscriptError.
    """
    untrusted.check_header(
        data,
        TranscriptError,
        format=TRANSCRIPT_FORMAT,
        version=TRANSCRIPT_VERSION,
        what="a Memora transcript",
    )
    file = untrusted.validate(TranscriptFile, data, TranscriptError)
    history = tuple(Message(m.role, m.content) for m in file.history)
    _check_pairs(history)
    versions = _summary_chain(file.summary_versions, len(history))
    for i, row in enumerate(file.ledger):
        _check_turn(row.turn, len(history) // 2 + 1, f"ledger[{i}].turn")
    last_context = tuple(Message(m.role, m.content) for m in file.last_context)
    ledger = tuple(_usage_record(row) for row in file.ledger)
    return Transcript(
        created_at=file.created_at,
        settings=file.settings,
        history=history,
        summary_versions=versions,
        ledger=ledger,
        turn_stats=_turn_stats(file.turn_stats, len(history)),
        last_context=last_context,
        last_request=None
        if file.last_request is None
        else _last_request(file.last_request, last_context, ledger),
    )


def _usage_record(row: LedgerEntry) -> UsageRecord:
    fields = row.model_dump()
    parts = fields.pop("parts")
    return UsageRecord(**fields, parts=None if parts is None else RequestParts.of(parts))


def restore_memory(
    transcript: Transcript,
    client: Any,
    *,
    model: str | None = None,
    settings_from: ShortTermMemory | None = None,
    **memory_options: Any,
) -> ShortTermMemory:
    """A new ShortTermMemory in the transcript's state, ready for the next turn.

    ``client`` is the backend to continue with; ``model`` overrides the exported
    model; ``memory_options`` go to ``ShortTermMemory`` (a token counter, say).
    With ``settings_from`` (a locked classroom page passes the session's memory),
    the file brings only the conversation: model, budget, window, summary size
    and fold batch are that memory's, and the file's are ignored.
    Raises TranscriptError ``bad_settings`` when the budget cannot hold
    this installation's instructions and summary.
    """
    s: TranscriptSettings | Limits = (
        transcript.settings if settings_from is None else settings_from.limits
    )
    model = settings_from.model if settings_from is not None else model or transcript.settings.model
    try:
        memory = ShortTermMemory(
            client,
            model=model,
            max_input_tokens=s.max_input_tokens,
            max_recent_turns=s.max_recent_turns,
            max_summary_tokens=s.max_summary_tokens,
            **memory_options,
        )
    except ValueError as problem:
        raise TranscriptError(
            "bad_settings", f"the transcript's settings do not fit here: {problem}", "settings"
        ) from None
    # The last request comes back too: the page draws it again, as it was sent.
    memory.restore(
        transcript.history,
        transcript.summary_versions,
        with_turn_stats(transcript),
        transcript.last_context,
        transcript.last_request,
    )
    return memory


def continue_in_session(
    transcript: Transcript,
    session: ShortTermMemory,
    *,
    locked: bool,
    fold_policy: FoldPolicy | None = None,
    from_outside: bool = True,
) -> ShortTermMemory:
    """The transcript's conversation as a new memory that continues ``session``'s: the rules an
    import obeys.

    A file from outside must fit the session's caps (``check_caps``); ``from_outside=False`` is for
    a conversation this server saved itself as the page built it (``memora.classroom.store.saved``),
    already held to the caps turn by turn, which must come back whole. The new memory keeps the
    session's backend (which counts as it counts), model, caps, reply cap and context window.
    Unlocked, it takes the transcript's budget and window (and ``fold_policy``, when given);
    ``locked`` (MEMORA_LOCK_SETTINGS), it keeps the session's, and the transcript brings only the
    conversation. Sends no request. Raises TranscriptError, and ``session`` is left as it was.
    """
    if from_outside:
        # A memory built without caps (not the page's: its caps come from the settings) holds an
        # import to none.
        check_caps(
            transcript,
            session.limits.caps or SessionLimits(None),
            session.limits.max_summary_tokens,
        )
    return restore_memory(
        transcript,
        session.server.backend,
        model=session.model,
        settings_from=session if locked else None,
        caps=session.limits.caps,
        max_reply_tokens=session.limits.max_reply_tokens,
        context_window=session.limits.context_window,
        fold_policy=session.limits.fold_policy if locked or fold_policy is None else fold_policy,
    )


def check_caps(transcript: Transcript, limits: SessionLimits, max_summary_tokens: int) -> None:
    """Refuses a transcript that the importing session's caps would never have let it build.

    An import must not buy what typing could not: every history message (a
    reply too, since folding sends it again in a summary request) within
    ``max_message_chars``; no more finished turns than ``max_turns`` (a file
    exactly at the cap is accepted, and its next message is refused as any
    would be); a ledger total within ``max_session_tokens``; and every summary
    version within ``max_summary_tokens`` (local o200k_base count), since the
    summary goes verbatim into every request. A cap of None is not checked. Raises TranscriptError:
    ``message_over_cap``, ``over_turn_cap``, ``ledger_over_cap``, ``summary_over_cap``.
    """
    if limits.max_message_chars is not None:
        for i, message in enumerate(transcript.history):
            if len(message.content) > limits.max_message_chars:
                raise TranscriptError(
                    "message_over_cap",
                    f"message {i} has {len(message.content):,} characters; this page allows "
                    f"{limits.max_message_chars:,}.",
                    f"history[{i}].content",
                    chars=len(message.content),
                    limit=limits.max_message_chars,
                )
    turns = len(transcript.history) // 2
    if limits.max_turns is not None and turns > limits.max_turns:
        raise TranscriptError(
            "over_turn_cap",
            f"the file has {turns} turns; this page allows {limits.max_turns}.",
            "history",
            turns=turns,
            limit=limits.max_turns,
        )
    spent = sum(record.total_tokens for record in transcript.ledger)
    if limits.max_session_tokens is not None and spent > limits.max_session_tokens:
        raise TranscriptError(
            "ledger_over_cap",
            f"the file's ledger spent {spent:,} tokens; this page allows "
            f"{limits.max_session_tokens:,} per conversation.",
            "ledger",
            tokens=spent,
            limit=limits.max_session_tokens,
        )
    for i, version in enumerate(transcript.summary_versions):
        tokens = count_text(version.text)
        if tokens > max_summary_tokens:
            raise TranscriptError(
                "summary_over_cap",
                f"summary version {i} has {tokens:,} tokens; summaries here hold at most "
                f"{max_summary_tokens:,}.",
                f"summary_versions[{i}].text",
                tokens=tokens,
                limit=max_summary_tokens,
            )


def with_turn_stats(transcript: Transcript) -> tuple[UsageRecord, ...]:
    """The ledger, each reply record completed with its turn's stats where the record lacks them.

    Per-turn figures now live in the reply's record; transcripts written before
    that carry them in ``turn_stats`` instead.
    """
    stats = {s.turn: s for _, s in transcript.turn_stats}
    return tuple(
        replace(
            record,
            context_messages=stats[record.turn].context_messages,
            newly_summarized=stats[record.turn].newly_summarized_count,
            summary_tokens=stats[record.turn].summary_token_usage,
        )
        if record.kind == "reply" and record.context_messages is None and record.turn in stats
        else record
        for record in transcript.ledger
    )


# -- cross-field rules ------------------------------------------------------------


def _check_turn(turn: int, turns: int, path: str) -> None:
    if turn > turns:
        raise TranscriptError(
            "number_out_of_range",
            f"{turn} is outside 1..{turns}.",
            path,
            value=str(turn),
            minimum=1,
            maximum=turns,
        )


def _check_pairs(history: tuple[Message, ...]) -> None:
    for i, message in enumerate(history):
        expected = ("user", "assistant")[i % 2]
        if message.role != expected:
            raise TranscriptError(
                "pairs_out_of_order",
                f"message {i} should be a {expected} message; the history is user/assistant pairs "
                "in order.",
                f"history[{i}].role",
                index=i,
                expected=expected,
            )
    if len(history) % 2:
        raise TranscriptError(
            "unpaired_message",
            "the last user message has no reply.",
            f"history[{len(history) - 1}]",
            index=len(history) - 1,
        )


def _check_pointer(count: int, history_length: int, path: str) -> None:
    """A version's pointer folds whole pairs and stays within the history."""
    if count % 2:
        raise TranscriptError(
            "odd_summary_pointer",
            f"summarized_message_count {count} is odd: a summary folds whole pairs.",
            f"{path}.summarized_message_count",
            count=count,
        )
    if count > history_length:
        raise TranscriptError(
            "summary_beyond_history",
            f"summarized_message_count {count} is beyond the {history_length} messages in history.",
            f"{path}.summarized_message_count",
            count=count,
            history=history_length,
        )


def _last_request(
    entry: LastRequestEntry, messages: tuple[Message, ...], ledger: Sequence[UsageRecord]
) -> PreparedContext:
    """The request whose messages are ``messages``: one source and one count for each, the current
    message last. Its parts are the ledger's record of it, the newest reply's (not saved twice)."""
    for name, values in (("sources", entry.sources), ("message_tokens", entry.message_tokens)):
        if len(values) != len(messages):
            raise TranscriptError(
                "bad_value",
                f"last_request.{name} has {len(values)} entries for the {len(messages)} messages "
                "of last_context.",
                f"last_request.{name}",
                entries=len(values),
                messages=len(messages),
            )
    if entry.sources and entry.sources[-1] != "current":
        raise TranscriptError(
            "bad_value",
            "the last request's last message is its current message.",
            "last_request.sources",
            index=len(messages) - 1,
        )
    return PreparedContext(
        entry.instructions,
        messages,
        tuple(entry.sources),
        tuple(entry.message_tokens),
        entry.input_tokens,
        entry.summary_token_usage,
        entry.newly_summarized_count,
        entry.server_input_tokens,
        next((record.parts for record in reversed(ledger) if record.kind == "reply"), None),
    )


def _summary_chain(
    entries: list[SummaryVersionEntry], history_length: int
) -> tuple[SummaryVersion, ...]:
    pointer = 0
    last_turn = 1
    for i, v in enumerate(entries):
        path = f"summary_versions[{i}]"
        count = v.summarized_message_count
        _check_pointer(count, history_length, path)
        if len(v.folded) != 2:
            raise TranscriptError(
                "wrong_type",
                "folded is a [start, end] pair.",
                f"{path}.folded",
                expected="[start, end]",
            )
        start, end = v.folded
        # Each version folds from where the previous one stopped, up to its own pointer;
        # a rewrite (the article's update_summary) folds nothing and keeps the pointer.
        if start != pointer or end != count or count < pointer:
            raise TranscriptError(
                "summary_chain_broken",
                f"folded {start}..{end} does not continue from message {pointer} up to {count}.",
                f"{path}.folded",
                start=start,
                end=end,
                expected_start=pointer,
                count=count,
            )
        _check_turn(v.turn, history_length // 2 + 1, f"{path}.turn")
        if v.turn < last_turn:
            raise TranscriptError(
                "summary_chain_broken",
                f"turn {v.turn} comes before the previous version's turn {last_turn}.",
                f"{path}.turn",
                turn=v.turn,
                previous=last_turn,
            )
        if v.clipped > end - start:
            raise TranscriptError(
                "number_out_of_range",
                f"{v.clipped} is outside 0..{end - start}.",
                f"{path}.clipped",
                value=str(v.clipped),
                minimum=0,
                maximum=end - start,
            )
        pointer = count
        last_turn = v.turn
    return tuple(
        SummaryVersion(
            v.text,
            v.summarized_message_count,
            (v.folded[0], v.folded[1]),
            v.tokens,
            v.turn,
            v.cut,
            v.clipped,
            v.reason,
        )
        for v in entries
    )


def _turn_stats(
    entries: list[TurnStatsEntry], history_length: int
) -> tuple[tuple[int, TurnStatsEntry], ...]:
    seen: set[int] = set()
    for i, s in enumerate(entries):
        path = f"turn_stats[{i}]"
        index = s.assistant_index
        if index > max(1, history_length - 1):
            raise TranscriptError(
                "number_out_of_range",
                f"{index} is outside 1..{max(1, history_length - 1)}.",
                f"{path}.assistant_index",
                value=str(index),
                minimum=1,
                maximum=max(1, history_length - 1),
            )
        if index % 2 == 0 or index >= history_length:
            raise TranscriptError(
                "bad_value",
                f"assistant_index {index} is not an assistant message of the history.",
                f"{path}.assistant_index",
                index=index,
            )
        if index in seen:
            raise TranscriptError(
                "duplicate_id",
                f"assistant_index {index} has two entries.",
                f"{path}.assistant_index",
                index=index,
            )
        seen.add(index)
        _check_turn(s.turn, history_length // 2 + 1, f"{path}.turn")
    return tuple((s.assistant_index, s) for s in entries)
