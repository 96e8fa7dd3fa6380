"""What the page shows, computed from the memory; pure, no Streamlit.

Everything here reads a ``ShortTermMemory`` and returns plain values or
DataFrames, so the page's content can be tested without a browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from memora.app.page.i18n import role_name, t
from memora.app.page.markup import plain_text
from memora.memory import ShortTermMemory
from memora.memory.core import (
    budget_in_force,
    full_history_tokens,
    last_reply,
    last_sent,
    local_budget,
)
from memora.teaching.prices import format_usd
from memora.teaching.replay import FULL_HISTORY
from memora.teaching.story import Fold
from memora.teaching.what_if import ROWS, Payoff, WhatIf
from memora.text.messages import Message

Mark = Literal["summarized", "folded_since", "window", "current"]
COMMANDS = ("history", "context", "summary", "status")


def message_marks(memory: ShortTermMemory, history: Sequence[Message] | None = None) -> list[Mark]:
    """One mark per message of ``history`` (the memory's own by default), read off the last
    request's record (``last_sent``) and the summary's pointer, so that what was sent and what the
    next request sends are told apart.

    ``summarized``: folded into the summary (before the pointer). ``folded_since``: folded too, but
    sent word for word in the last request: it was folded after that request, for the next one.
    ``current``: the pending user message of a turn in progress; between turns, the message the last
    request answered. ``window``: every other message, which stays verbatim until it is folded. A
    reply job may append to the memory while the page draws it, so a caller that reads the history
    more than once passes one copy, and the marks follow that copy.
    """
    history = memory.history if history is None else history
    pointer = memory.summarized_message_count
    sent = last_sent(memory)
    numbers = set() if sent is None else set(sent.numbers)
    marks: list[Mark] = [
        ("folded_since" if i + 1 in numbers else "summarized") if i < pointer else "window"
        for i in range(len(history))
    ]
    if history and history[-1].role == "user":
        marks[-1] = "current"
    elif (
        sent is not None
        and sent.current is not None
        and pointer < sent.current.number <= len(history)
    ):
        marks[sent.current.number - 1] = "current"
    return marks


def history_frame(
    memory: ShortTermMemory, lang: str, start: int = 0, stop: int | None = None
) -> pd.DataFrame:
    """Messages ``start`` to ``stop`` of the history (all by default) as a table: number, role,
    mark, tokens, content.

    One snapshot of the history, however a reply job changes it meanwhile; the tokens are the ones
    the memory counted as each message joined, so a page of a long conversation tokenizes nothing.
    """
    conversation = memory.conversation
    messages = conversation.messages
    stop = len(messages) if stop is None else min(stop, len(messages))
    marks = message_marks(memory, messages)
    rows = range(start, stop)
    return pd.DataFrame(
        {
            t(lang, "col.number"): [i + 1 for i in rows],
            t(lang, "col.role"): [role_name(lang, messages[i].role) for i in rows],
            t(lang, "col.state"): [t(lang, f"mark.{marks[i]}") for i in rows],
            t(lang, "col.tokens"): [conversation.counts[i] for i in rows],
            t(lang, "col.content"): [messages[i].content for i in rows],
        }
    )


@dataclass(frozen=True)
class StatusFigure:
    key: str
    value: int | str


def status_figures(memory: ShortTermMemory, lang: str) -> list[StatusFigure]:
    """The article's five status figures, labelled in ``lang``."""
    status = memory.get_status()
    return [
        StatusFigure("status.history", int(status["History messages"])),
        StatusFigure("status.summarized", int(status["Summarized messages"])),
        StatusFigure("status.context", int(status["Last context messages"])),
        StatusFigure(
            "status.has_summary",
            t(lang, "status.yes" if status["Summary available"] else "status.no"),
        ),
        StatusFigure("status.session_tokens", int(status["Session total tokens"])),
    ]


def status_line(memory: ShortTermMemory, lang: str) -> str:
    """The article's five status figures in one line of Markdown: "History messages **12** · … ·
    Session total tokens **2,641**"; the session total is the ledger's, every request counted once,
    as the chat's last event says."""
    figures = status_figures(memory, lang)
    shown = [f"{f.value:,}" if isinstance(f.value, int) else f.value for f in figures]
    return " · ".join(
        f"{t(lang, f.key)} **{value}**" for f, value in zip(figures, shown, strict=True)
    )


def bounded_note(memory: ShortTermMemory, lang: str) -> str:
    """What the full history would cost now, beside what the last request sent; a conversation
    restored or imported has sent nothing in this session yet, and says so rather than "0
    tokens"."""
    full = f"{full_history_tokens(memory):,}"
    if memory.last_prepared is None and memory.history:
        return t(lang, "status.bounded_none", full=full, budget=f"{memory.max_input_tokens:,}")
    sent = memory.last_prepared.input_tokens if memory.last_prepared else 0
    return t(
        lang, "status.bounded", full=full, sent=f"{sent:,}", budget=f"{memory.max_input_tokens:,}"
    )


def fold_note(memory: ShortTermMemory, lang: str) -> str:
    """Which fold policy is on, and why the last fold happened, in one or two sentences.

    The reason is the newest summary version's own (a saved conversation keeps it, so a reload says
    the same); the plan's figures only while this session made that fold. A version saved before
    versions kept their reason says how many messages had been folded before, not that nothing
    was."""
    note = t(lang, f"policy.{memory.limits.fold_policy}_note")
    versions = memory.conversation.versions
    moved = [
        (number, version)
        for number, version in enumerate(versions, start=1)
        if version.folded[0] != version.folded[1]
    ]
    if not moved:
        return note + " " + t(lang, "fold.none_yet")
    number, last = moved[-1]
    if last.reason == "none":
        return note + " " + t(lang, "fold.before_opened", count=memory.summarized_message_count)
    said = t(
        lang, f"fold.{last.reason}", version=number, first=last.folded[0] + 1, last=last.folded[1]
    )
    plan = memory.conversation.fold_plan
    if plan is not None and plan.reason == last.reason:
        said += " " + t(
            lang, "fold.planned", planned=f"{plan.input_tokens:,}", budget=f"{plan.budget:,}"
        )
    return note + " " + said


def calibration_note(memory: ShortTermMemory, lang: str) -> str:
    """Which count the budget uses, in one sentence: offline, o200k_base with no server to count or
    bill; o200k_base (the server's own), the server's tokenizer (exact), or local counts with each
    kind of text's margin, learned or still the worst known."""
    calibration = memory.server.calibration
    if memory.server.backend.offline:
        return t(lang, "calibration.offline")
    if calibration.exact:
        return t(lang, "calibration.exact")
    source = memory.server.source()
    if source is not None:
        return t(lang, "calibration.server", source=source, budget=f"{budget_in_force(memory):,}")
    learned = dict(calibration.learned)
    ratios = ", ".join(
        f"{t(lang, f'calibration.kind.{kind}')} {calibration.kind_ratio(kind):.2f}× "
        f"({t(lang, 'calibration.kind.learned' if kind in learned else 'calibration.kind.worst')})"
        for kind in sorted(calibration.seen | {"latin"})
    )
    return t(
        lang,
        "calibration.kinds",
        ratios=ratios,
        local=f"{local_budget(memory):,}",
        budget=f"{budget_in_force(memory):,}",
    )


def fold_label(fold: Fold, lang: str) -> str:
    """The one label of a fold, everywhere: the reply it followed and the turn it serves ("after
    reply 6, for turn 7")."""
    return t(lang, "fold.label", after=fold.after_reply, serves=fold.serves)


def fold_because(memory: ShortTermMemory, fold: Fold, lang: str) -> str:
    """Why ``fold`` happened, as a clause that starts with a comma ("…, because the window holds 3
    turns"), from the reason its summary version keeps; empty when that is not known (a version
    saved before versions kept it)."""
    reason = memory.conversation.versions[fold.version - 1].reason
    if reason == "none":
        return ""
    return t(
        lang,
        f"fold.because_{reason}",
        turns=memory.max_recent_turns,
        budget=f"{memory.max_input_tokens:,}",
    )


def fold_event(memory: ShortTermMemory, fold: Fold, lang: str) -> str:
    """A fold told as its own event: "Summary v3, after reply 6, for turn 7: messages 5–6 folded in,
    +336 tokens, because the window holds 3 turns. Session total: 2,862 tokens." A rewrite that
    folded no message says so."""
    figures = {
        "version": fold.version,
        "label": fold_label(fold, lang),
        "tokens": f"{fold.tokens:,}",
        "total": f"{fold.session_total:,}",
        "because": fold_because(memory, fold, lang),
    }
    if not fold.count:
        return t(lang, "fold.event_rewrite", **figures)
    return t(lang, "fold.event", first=fold.first, last=fold.last, **figures)


@dataclass(frozen=True)
class CommandOutput:
    """A command's result: a title and a plain-text body, or an error message."""

    title: str
    body: str
    error: bool = False


def parse_command(text: str) -> tuple[str, str] | None:
    """``("history", "")`` for ``"/history"``; None when ``text`` is no command.

    A command is any message whose first non-blank character is ``/``; the
    name ends at the first whitespace (a space or a line break), and the rest
    is its arguments, kept for error messages. ``"/"`` alone has the name ``""``.
    """
    stripped = text.strip()
    if not stripped.startswith("/"):
        return None
    # Any whitespace ends the name: "/history\nfoo" is /history with an argument, not a command
    # named "history\nfoo".
    name, *rest = stripped[1:].split(maxsplit=1) or [""]
    return name.lower(), rest[0].strip() if rest else ""


def run_command(memory: ShortTermMemory, name: str, args: str, lang: str) -> CommandOutput:
    """The article's commands; none of them calls a model.

    Unknown names and any arguments give an error output naming the problem.
    """
    if name not in COMMANDS:
        return CommandOutput("/" + name, t(lang, "cmd.unknown", command="/" + name), error=True)
    if args:
        return CommandOutput(
            "/" + name, t(lang, "cmd.no_args", command="/" + name, args=args), error=True
        )
    empty = t(lang, "cmd.empty")
    if name == "history":
        history = list(memory.history)
        numbered = enumerate(zip(history, message_marks(memory, history), strict=True), start=1)
        lines = [
            f"{i:>3} [{t(lang, f'mark.{mark}')}] {role_name(lang, m.role)}: {plain_text(m.content)}"
            for i, (m, mark) in numbered
        ]
        return CommandOutput(t(lang, "cmd.history_title"), "\n".join(lines) or empty)
    if name == "context":
        lines = [f"{role_name(lang, m.role)}: {plain_text(m.content)}" for m in memory.last_context]
        return CommandOutput(t(lang, "cmd.context_title"), "\n".join(lines) or empty)
    if name == "summary":
        return CommandOutput(t(lang, "cmd.summary_title"), memory.summary or empty)
    rows = [f"{t(lang, f.key)}: {f.value}" for f in status_figures(memory, lang)]
    return CommandOutput(t(lang, "cmd.status_title"), "\n".join(rows))


@dataclass(frozen=True)
class ContextRow:
    """One message of the last request: its chat ``number`` (None for the summary and the
    instructions), and, for a message folded after it was sent, the turn whose request the fold made
    room for (``folded_for``)."""

    role: str
    source: str
    tokens: int
    content: str
    number: int | None = None
    folded_for: int | None = None


def last_context_rows(memory: ShortTermMemory, folds: Sequence[Fold] = ()) -> list[ContextRow]:
    """The last request's messages with their source and token count, numbered as the chat numbers
    them (from the request's record); empty before any request. ``folds`` (the story's) say which
    turn a message folded since was folded for."""
    prepared = memory.last_prepared
    if prepared is None:
        return []
    numbers = iter(() if prepared.parts is None else prepared.parts.numbers)
    rows = []
    for m, source, tokens in zip(
        prepared.context_messages, prepared.sources, prepared.message_tokens, strict=True
    ):
        number = next(numbers, None) if source in ("window", "current") else None
        folded_for = None
        if number is not None and number <= memory.summarized_message_count:
            folded_for = next(
                (fold.serves for fold in folds if fold.first <= number <= fold.last), None
            )
        rows.append(ContextRow(m.role, source, tokens, m.content, number, folded_for))
    return rows


def request_turn(memory: ShortTermMemory) -> int | None:
    """The turn the last request served, from its record; None before any."""
    record = last_reply(memory)
    return None if record is None else record.turn


def what_if_frame(what_if: WhatIf, lang: str) -> pd.DataFrame:
    """The comparison as one table: one column per strategy (yours, the ledger, first; then the
    replays), one row per figure of ``ROWS`` named in the ledger's words (the index, named
    "Figure"), every cell a formatted string; ``$`` reads "tokens only" where nothing is priced."""
    columns: dict[str, list[str]] = {}
    for column in what_if.columns:
        name = t(lang, f"whatif.{column.strategy}")
        if column.from_ledger:
            kind = "col_live"
        elif column.strategy == FULL_HISTORY:
            kind = "col_full"
        else:
            kind = "col_replay"
        columns[t(lang, f"whatif.{kind}", strategy=name)] = [
            what_if_cell(column.figure(row), row, lang) for row in ROWS
        ]
    index = pd.Index([t(lang, f"whatif.{row}") for row in ROWS], name=t(lang, "whatif.row"))
    return pd.DataFrame(columns, index=index)


def what_if_cell(figure: int | float | None, row: str, lang: str) -> str:
    """One figure as the table shows it: thousands separated, dollars by ``format_usd``, "tokens
    only" for no price."""
    if row == "usd":
        return t(lang, "whatif.tokens_only") if figure is None else format_usd(figure)
    return f"{figure:,}"


def payoff_note(pay: Payoff, lang: str) -> str:
    """Why a memory can cost more than the full history, and whether it pays here, in the comparison
    table's figures: the totals and the summaries' cost are the table's rows. A memory that has
    folded nothing yet has sent what the full history sends, and says so, not that its summaries
    cost nothing and it does not pay; one that has ends below the full history's total from a turn
    on, or does not pay in this conversation."""
    figures = {
        "strategy": t(lang, f"whatif.{pay.strategy}"),
        "memory": f"{pay.memory:,}",
        "full": f"{pay.full:,}",
        "summaries": f"{pay.summaries:,}",
        "turns": pay.turns,
    }
    if not pay.summary_requests:
        return t(lang, "whatif.no_summary", **figures)
    if pay.turn is None:
        return t(lang, "whatif.does_not_pay", **figures)
    return t(lang, "whatif.pays", turn=pay.turn, **figures)
