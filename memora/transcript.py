"""Export a conversation to JSON and import it back into a new memory.

A transcript holds the full history, every summary version, the usage ledger,
the per-turn stats, the last request's context, the memory's limits and model,
and when it was made. It never holds the API key, the base URL or any other
part of the backend's configuration: export reads only the memory's own state.
Prompts are not exported either; an imported conversation continues under the
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
# The last four codes come from ``check_caps``: a parsed transcript against the importing session's caps.

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timezone
from typing import Any

from memora import strict
from memora.limits import SessionLimits
from memora.memory import ShortTermMemory, SummaryVersion, TurnStats
from memora.messages import Message
from memora.tokens import count_text
from memora.usage import UsageRecord

TRANSCRIPT_FORMAT = "memora-transcript"
TRANSCRIPT_VERSION = 1
MAX_TRANSCRIPT_BYTES = 2 * 1024 * 1024
"""2 MiB: hundreds of long turns; checked before the file is parsed."""
MAX_MESSAGES = 10_000
MAX_MESSAGE_CHARS = 200_000
MAX_SUMMARY_CHARS = 20_000
MAX_LEDGER_ROWS = 20_000
MAX_NAME_CHARS = 200

HISTORY_ROLES = ("user", "assistant")
CONTEXT_ROLES = ("developer", "system", "user", "assistant")
# Flags added after version 1 was published: optional, so older version 1 files still read.
_RECORD_FLAGS = ("cut", "implausible", "input_budget", "context_messages", "newly_summarized", "summary_tokens")
_STATS_FLAGS = ("cut", "over_budget", "implausible")
_VERSION_FLAGS = ("cut", "clipped")
_RECORD_FIELDS = tuple(f.name for f in fields(UsageRecord) if f.name not in _RECORD_FLAGS)
_STATS_FIELDS = tuple(f.name for f in fields(TurnStats) if f.name not in _STATS_FLAGS)


class TranscriptError(strict.StrictError):
    """An imported transcript is malformed or hostile; see the module docstring for codes."""


@dataclass(frozen=True)
class TranscriptSettings:
    """The memory's own settings; nothing about the backend's credentials.

    ``offline`` records whether the offline engine served the conversation, so
    its ledger is never priced as if a model had billed it.
    """

    model: str
    max_input_tokens: int
    max_recent_turns: int
    max_summary_tokens: int
    fold_batch_turns: int
    offline: bool


@dataclass(frozen=True)
class Transcript:
    """A validated transcript; ``turn_stats`` pairs an assistant history index with its stats."""

    created_at: str
    settings: TranscriptSettings
    history: tuple[Message, ...]
    summary_versions: tuple[SummaryVersion, ...]
    ledger: tuple[UsageRecord, ...]
    turn_stats: tuple[tuple[int, TurnStats], ...]
    last_context: tuple[Message, ...]


# -- export -------------------------------------------------------------------


def export_transcript(memory: ShortTermMemory, *, now: datetime | None = None) -> dict[str, Any]:
    """The memory as a JSON-ready dict.

    A user message still waiting for its reply is left out, so the export is
    always complete pairs; its stats and context stay as of the last finished turn.
    """
    completed = len(memory.history) - (1 if memory.has_pending_turn else 0)
    created = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="seconds")
    return {
        "format": TRANSCRIPT_FORMAT,
        "version": TRANSCRIPT_VERSION,
        "created_at": created,
        "settings": {
            "model": memory.model,
            "max_input_tokens": memory.max_input_tokens,
            "max_recent_turns": memory.max_recent_turns,
            "max_summary_tokens": memory.max_summary_tokens,
            "fold_batch_turns": memory.fold_batch_turns,
            "offline": bool(getattr(memory.backend, "offline", False)),
        },
        "history": [_message(m) for m in memory.history[:completed]],
        "summary_versions": [
            {**asdict(v), "folded": list(v.folded)} for v in memory.summary_versions
        ],
        "ledger": [asdict(record) for record in memory.ledger],
        "turn_stats": [{"assistant_index": index, **asdict(stats)} for index, stats in sorted(memory.turn_stats.items())],
        "last_context": [_message(m) for m in memory.last_context],
    }


def dumps_transcript(memory: ShortTermMemory, *, now: datetime | None = None) -> bytes:
    """The transcript as UTF-8 JSON bytes, ready for a download button."""
    return json.dumps(export_transcript(memory, now=now), ensure_ascii=False, indent=1, allow_nan=False).encode("utf-8")


def _message(message: Message) -> dict[str, str]:
    return {"role": message.role, "content": message.content}


# -- import -------------------------------------------------------------------


def parse_transcript(raw: bytes | str, *, max_bytes: int = MAX_TRANSCRIPT_BYTES) -> Transcript:
    """Validates an exported transcript; raises TranscriptError (see the module docstring)."""
    data = strict.parse_json(raw, TranscriptError, max_bytes=max_bytes)
    E = TranscriptError
    if not isinstance(data, dict):
        raise E("wrong_type", "a transcript is a JSON object.", "", expected="object")
    if data.get("format") != TRANSCRIPT_FORMAT:
        raise E("wrong_format", "this is not a Memora transcript.", "format")
    version = strict.integer(data.get("version"), "version", E, 0, 10**6)
    if version != TRANSCRIPT_VERSION:
        raise E("unsupported_version", f"transcript version {version} is not supported; this Memora reads version {TRANSCRIPT_VERSION}.",
                "version", version=version, supported=TRANSCRIPT_VERSION)
    root = strict.obj(
        data, "", E,
        ("format", "version", "created_at", "settings", "history", "summary_versions", "ledger", "last_context"),
        ("turn_stats",),
    )
    created_at = strict.string(root["created_at"], "created_at", E, 40, allow_empty=False)
    try:
        datetime.fromisoformat(created_at)
    except ValueError:
        raise E("bad_value", "created_at is not an ISO 8601 date and time.", "created_at") from None

    settings = _settings(root["settings"])
    history = _history(root["history"])
    versions = _summary_versions(root["summary_versions"], len(history))
    ledger = tuple(_record(row, f"ledger[{i}]", len(history)) for i, row in enumerate(strict.array(root["ledger"], "ledger", E, MAX_LEDGER_ROWS)))
    stats = _turn_stats(root.get("turn_stats", []), history)
    context = tuple(
        _parse_message(m, f"last_context[{i}]", CONTEXT_ROLES)
        for i, m in enumerate(strict.array(root["last_context"], "last_context", E, MAX_MESSAGES))
    )
    return Transcript(created_at, settings, history, versions, ledger, stats, context)


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
    s = transcript.settings
    if settings_from is not None:
        s = TranscriptSettings(
            model=settings_from.model,
            max_input_tokens=settings_from.max_input_tokens,
            max_recent_turns=settings_from.max_recent_turns,
            max_summary_tokens=settings_from.max_summary_tokens,
            fold_batch_turns=settings_from.fold_batch_turns,
            offline=s.offline,
        )
        model = settings_from.model
    try:
        memory = ShortTermMemory(
            client,
            model=model or s.model,
            max_input_tokens=s.max_input_tokens,
            max_recent_turns=s.max_recent_turns,
            max_summary_tokens=s.max_summary_tokens,
            fold_batch_turns=s.fold_batch_turns,
            **memory_options,
        )
    except ValueError as problem:
        raise TranscriptError("bad_settings", f"the transcript's settings do not fit here: {problem}", "settings") from None
    memory.restore(transcript.history, transcript.summary_versions, with_turn_stats(transcript), transcript.last_context)
    return memory


def check_caps(transcript: Transcript, limits: SessionLimits, max_summary_tokens: int) -> None:
    """Refuses a transcript that the importing session's caps would never have let it build.

    An import must not buy what typing could not: every history message (a
    reply too, since folding sends it again in a summary request) within
    ``max_message_chars``; no more finished turns than ``max_turns`` (a file
    exactly at the cap is accepted, and its next message is refused as any
    would be); a ledger total within ``max_session_tokens``; and every summary
    version within ``max_summary_tokens`` (local o200k_base count), since the
    summary goes verbatim into the developer message of every request.
    A cap of None is not checked. Raises TranscriptError with codes
    ``message_over_cap``, ``over_turn_cap``, ``ledger_over_cap``, ``summary_over_cap``.
    """
    if limits.max_message_chars is not None:
        for i, message in enumerate(transcript.history):
            if len(message.content) > limits.max_message_chars:
                raise E("message_over_cap", f"message {i} has {len(message.content):,} characters; this page allows {limits.max_message_chars:,}.",
                        f"history[{i}].content", chars=len(message.content), limit=limits.max_message_chars)
    turns = len(transcript.history) // 2
    if limits.max_turns is not None and turns > limits.max_turns:
        raise E("over_turn_cap", f"the file has {turns} turns; this page allows {limits.max_turns}.", "history", turns=turns, limit=limits.max_turns)
    spent = sum(record.total_tokens for record in transcript.ledger)
    if limits.max_session_tokens is not None and spent > limits.max_session_tokens:
        raise E("ledger_over_cap", f"the file's ledger spent {spent:,} tokens; this page allows {limits.max_session_tokens:,} per conversation.",
                "ledger", tokens=spent, limit=limits.max_session_tokens)
    for i, version in enumerate(transcript.summary_versions):
        tokens = count_text(version.text)
        if tokens > max_summary_tokens:
            raise E("summary_over_cap", f"summary version {i} has {tokens:,} tokens; summaries here hold at most {max_summary_tokens:,}.",
                    f"summary_versions[{i}].text", tokens=tokens, limit=max_summary_tokens)


def import_transcript(raw: bytes | str, client: Any, *, max_bytes: int = MAX_TRANSCRIPT_BYTES, **options: Any) -> ShortTermMemory:
    """``parse_transcript`` then ``restore_memory``."""
    return restore_memory(parse_transcript(raw, max_bytes=max_bytes), client, **options)


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


# -- checks -------------------------------------------------------------------

E = TranscriptError


def _settings(value: Any) -> TranscriptSettings:
    keys = ("model", "max_input_tokens", "max_recent_turns", "max_summary_tokens", "fold_batch_turns", "offline")
    s = strict.obj(value, "settings", E, keys)
    return TranscriptSettings(
        model=strict.string(s["model"], "settings.model", E, MAX_NAME_CHARS, allow_empty=False),
        max_input_tokens=strict.integer(s["max_input_tokens"], "settings.max_input_tokens", E, 1, 10_000_000),
        max_recent_turns=strict.integer(s["max_recent_turns"], "settings.max_recent_turns", E, 0, 1000),
        max_summary_tokens=strict.integer(s["max_summary_tokens"], "settings.max_summary_tokens", E, 1, 100_000),
        fold_batch_turns=strict.integer(s["fold_batch_turns"], "settings.fold_batch_turns", E, 0, 1000),
        offline=strict.boolean(s["offline"], "settings.offline", E),
    )


def _parse_message(value: Any, path: str, roles: tuple[str, ...]) -> Message:
    m = strict.obj(value, path, E, ("role", "content"))
    role = strict.choice(m["role"], f"{path}.role", E, roles, code="bad_role")
    content = strict.string(m["content"], f"{path}.content", E, MAX_MESSAGE_CHARS, allow_empty=role != "user")
    return Message(role, content)  # type: ignore[arg-type]


def _history(value: Any) -> tuple[Message, ...]:
    messages = []
    for i, raw in enumerate(strict.array(value, "history", E, MAX_MESSAGES)):
        message = _parse_message(raw, f"history[{i}]", HISTORY_ROLES)
        expected = HISTORY_ROLES[i % 2]
        if message.role != expected:
            raise E("pairs_out_of_order", f"message {i} should be a {expected} message; the history is user/assistant pairs in order.",
                    f"history[{i}].role", index=i, expected=expected)
        messages.append(message)
    if len(messages) % 2:
        raise E("unpaired_message", "the last user message has no reply.", f"history[{len(messages) - 1}]", index=len(messages) - 1)
    return tuple(messages)


def _summary_versions(value: Any, history_length: int) -> tuple[SummaryVersion, ...]:
    versions: list[SummaryVersion] = []
    pointer, last_turn = 0, 1
    max_turn = history_length // 2 + 1
    for i, raw in enumerate(strict.array(value, "summary_versions", E, MAX_MESSAGES)):
        path = f"summary_versions[{i}]"
        v = strict.obj(raw, path, E, ("text", "summarized_message_count", "folded", "tokens", "turn"), _VERSION_FLAGS)
        count = strict.integer(v["summarized_message_count"], f"{path}.summarized_message_count", E, 0, MAX_MESSAGES)
        if count % 2:
            raise E("odd_summary_pointer", f"summarized_message_count {count} is odd: a summary folds whole pairs.",
                    f"{path}.summarized_message_count", count=count)
        if count > history_length:
            raise E("summary_beyond_history", f"summarized_message_count {count} is beyond the {history_length} messages in history.",
                    f"{path}.summarized_message_count", count=count, history=history_length)
        folded = strict.array(v["folded"], f"{path}.folded", E, 2)
        if len(folded) != 2:
            raise E("wrong_type", "folded is a [start, end] pair.", f"{path}.folded", expected="[start, end]")
        start, end = (strict.integer(x, f"{path}.folded[{j}]", E, 0, MAX_MESSAGES) for j, x in enumerate(folded))
        # Each version folds from where the previous one stopped, up to its own pointer;
        # a rewrite (the article's update_summary) folds nothing and keeps the pointer.
        if start != pointer or end != count or count < pointer:
            raise E("summary_chain_broken", f"folded {start}..{end} does not continue from message {pointer} up to {count}.",
                    f"{path}.folded", start=start, end=end, expected_start=pointer, count=count)
        turn = strict.integer(v["turn"], f"{path}.turn", E, 1, max_turn)
        if turn < last_turn:
            raise E("summary_chain_broken", f"turn {turn} comes before the previous version's turn {last_turn}.",
                    f"{path}.turn", turn=turn, previous=last_turn)
        text = strict.string(v["text"], f"{path}.text", E, MAX_SUMMARY_CHARS)
        tokens = strict.integer(v["tokens"], f"{path}.tokens", E)
        cut = strict.boolean(v.get("cut", False), f"{path}.cut", E)
        clipped = strict.integer(v.get("clipped", 0), f"{path}.clipped", E, 0, end - start)
        versions.append(SummaryVersion(text, count, (start, end), tokens, turn, cut, clipped))
        pointer, last_turn = count, turn
    return tuple(versions)


def _record(value: Any, path: str, history_length: int) -> UsageRecord:
    r = strict.obj(value, path, E, _RECORD_FIELDS, _RECORD_FLAGS)
    return UsageRecord(
        turn=strict.integer(r["turn"], f"{path}.turn", E, 1, history_length // 2 + 1),
        kind=strict.choice(r["kind"], f"{path}.kind", E, ("reply", "summary")),  # type: ignore[arg-type]
        model=strict.string(r["model"], f"{path}.model", E, MAX_NAME_CHARS, allow_empty=False),
        counted_input_tokens=strict.integer(r["counted_input_tokens"], f"{path}.counted_input_tokens", E),
        input_tokens=strict.optional_integer(r["input_tokens"], f"{path}.input_tokens", E),
        output_tokens=strict.optional_integer(r["output_tokens"], f"{path}.output_tokens", E),
        total_tokens=strict.integer(r["total_tokens"], f"{path}.total_tokens", E),
        latency_s=strict.number(r["latency_s"], f"{path}.latency_s", E, 0.0, 1e6),
        reasoning_tokens=strict.integer(r["reasoning_tokens"], f"{path}.reasoning_tokens", E),
        cached_tokens=strict.integer(r["cached_tokens"], f"{path}.cached_tokens", E),
        estimated=strict.boolean(r["estimated"], f"{path}.estimated", E),
        full_history_tokens=strict.optional_integer(r["full_history_tokens"], f"{path}.full_history_tokens", E),
        cut=strict.boolean(r.get("cut", False), f"{path}.cut", E),
        implausible=strict.boolean(r.get("implausible", False), f"{path}.implausible", E),
        input_budget=strict.optional_integer(r.get("input_budget"), f"{path}.input_budget", E),
        **{
            name: strict.optional_integer(r.get(name), f"{path}.{name}", E, 0, MAX_MESSAGES * 1000)
            for name in ("context_messages", "newly_summarized", "summary_tokens")
        },
    )


def _turn_stats(value: Any, history: tuple[Message, ...]) -> tuple[tuple[int, TurnStats], ...]:
    result: list[tuple[int, TurnStats]] = []
    for i, raw in enumerate(strict.array(value, "turn_stats", E, MAX_MESSAGES)):
        path = f"turn_stats[{i}]"
        s = strict.obj(raw, path, E, ("assistant_index", *_STATS_FIELDS), _STATS_FLAGS)
        index = strict.integer(s["assistant_index"], f"{path}.assistant_index", E, 1, max(1, len(history) - 1))
        if index % 2 == 0 or index >= len(history):
            raise E("bad_value", f"assistant_index {index} is not an assistant message of the history.", f"{path}.assistant_index", index=index)
        if any(index == seen for seen, _ in result):
            raise E("duplicate_id", f"assistant_index {index} has two entries.", f"{path}.assistant_index", index=index)
        stats = TurnStats(
            turn=strict.integer(s["turn"], f"{path}.turn", E, 1, len(history) // 2 + 1),
            newly_summarized_count=strict.integer(s["newly_summarized_count"], f"{path}.newly_summarized_count", E, 0, MAX_MESSAGES),
            context_messages=strict.integer(s["context_messages"], f"{path}.context_messages", E, 0, MAX_MESSAGES),
            counted_input_tokens=strict.integer(s["counted_input_tokens"], f"{path}.counted_input_tokens", E),
            input_tokens=strict.optional_integer(s["input_tokens"], f"{path}.input_tokens", E),
            output_tokens=strict.optional_integer(s["output_tokens"], f"{path}.output_tokens", E),
            summary_token_usage=strict.integer(s["summary_token_usage"], f"{path}.summary_token_usage", E),
            session_total_tokens=strict.integer(s["session_total_tokens"], f"{path}.session_total_tokens", E),
            estimated=strict.boolean(s["estimated"], f"{path}.estimated", E),
            **{flag: strict.boolean(s.get(flag, False), f"{path}.{flag}", E) for flag in _STATS_FLAGS},
        )
        result.append((index, stats))
    return tuple(result)
