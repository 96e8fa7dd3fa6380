"""The terminal REPL: the article's Memora v0.7 loop on the same memory.

Commands: history, context, summary, status, usage, exit. Offline unless a key is set;
``memora.app.settings`` lists the variables that choose the backend. It folds by the article's
window, as the page does by default (``MEMORA_FOLD_POLICY=watermark`` for the other policy).

Replies are printed as they stream in. After each reply, the memory folds what the next turn is
certain to fold (a summary-only ``ReplyJob`` running ``fold_ahead``, as the page does), so the next
reply does not wait for a summary. The terminal waits for that fold before its next prompt, saying
what it folds while it waits, so the fold is told under the reply that caused it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence

from memora import __version__
from memora.app.build import configured_memory
from memora.app.page.i18n import t
from memora.app.page.views import fold_event, fold_label
from memora.app.settings import SettingsError, load_settings
from memora.classroom.job import ReplyJob, fold_ahead
from memora.memory import ShortTermMemory, TurnStats
from memora.memory.backend import BackendError
from memora.memory.server import ServerKnowledge
from memora.memory.values import SummaryVersion
from memora.teaching.story import TurnAccount, story, tell
from memora.text.messages import Message
from memora.text.usage import UsageRecord

COMMANDS = ("history", "context", "summary", "status", "usage", "exit")


def format_messages(title: str, messages: Sequence[Message]) -> str:
    body = "\n".join(f"{m.role}: {m.content}" for m in messages) if messages else "(empty)"
    return f"\n--- {title} ---\n{body}\n----------------------------"


def format_gap(counted: int, actual: int | None, estimated: bool) -> str:
    """How far the count taken before sending was from what the server billed.

    Negative means the local count was under the bill. There is no gap to show when
    the server reported nothing, or when its figure is itself a local estimate.
    """
    if actual is None:
        return "not available (the server reported no input tokens)"
    if estimated:
        return "none to show (the server reported no usage; both figures are local counts)"
    gap = counted - actual
    share = f" ({gap / actual:+.1%} of actual)" if actual else ""
    return f"{gap:+d} tokens{share}"


def format_stats(account: TurnAccount, offline: bool = False) -> str:
    """The article's per-turn block, plus the gap between counted and billed input. Its folds and
    session total are the story's (``memora.teaching.story``): a fold ahead, made after the previous
    reply, counts for the turn it served.

    ``offline`` says the offline engine answered: no server billed anything then.
    """
    record = account.record
    if record.input_tokens is None:
        actual = "not reported"
    elif offline:
        actual = (
            f"{record.input_tokens} (counted locally: the offline engine has no server to bill)"
        )
    elif record.estimated:
        actual = f"{record.input_tokens} (estimated locally: the server reported no usage)"
    elif record.implausible:
        actual = (
            f"{record.input_tokens} reported by the server, implausibly low for what was sent: "
            "not a bill"
        )
    else:
        # Billed only by a provider that bills by the figure; anything else says who reported it,
        # and whether the server tokenizer's own count contradicts it.
        reporter = "billed by the server" if record.billed else "reported by the server"
        actual = f"{record.input_tokens} ({record.input_label or reporter})"
    if offline:
        gap = "none to show (offline: both figures are local counts)"
    else:
        gap = format_gap(record.counted_input_tokens, record.input_tokens, record.estimated)
    notes = []
    if record.cut:
        notes.append(
            "Reply cut at its output cap (MEMORA_MAX_REPLY_TOKENS): the model had not finished."
        )
    if record.over_budget:
        notes.append(
            f"Over budget by the server's count: it counted {record.input_tokens} input tokens."
        )
    return "\n".join(
        [
            "\n--- Memory Status ---",
            f"Newly summarized messages: {account.newly_summarized}",
            f"Context messages sent: {record.context_messages or 0}",
            f"Counted input tokens: {record.counted_input_tokens}",
            *(
                [f"Input tokens by the server's tokenizer: {record.server_counted_input_tokens}"]
                if record.server_counted_input_tokens is not None
                else []
            ),
            f"Actual input tokens: {actual}",
            f"Estimate gap (counted - actual): {gap}",
            f"Output tokens: {record.output_tokens}",
            f"Summary update tokens: {account.summary_tokens}",
            f"Session total tokens: {account.session_total}",
            *(
                t("en", "stats.fold", version=f.version, label=fold_label(f, "en"), count=f.count)
                for f in account.folds
            ),
            *notes,
            "---------------------",
        ]
    )


def format_usage(
    records: Sequence[UsageRecord], offline: bool = False, versions: Sequence[SummaryVersion] = ()
) -> str:
    """Every model request of the session: counted against billed input, and the rest of its usage.
    A summary request that made one of ``versions`` ends with its fold's label ("v3 after reply 6,
    for turn 7"), as the page's.

    ``offline`` says the offline engine answered: its figures are local counts, with no server
    behind them.
    """
    if not records:
        return "\n--- Usage Ledger ---\n(no requests yet)\n--------------------"
    header = (
        f"{'turn':>4} {'kind':<7} {'counted':>7} {'actual':>7} {'gap':>6} {'output':>6} "
        f"{'reason':>6} {'cached':>6}  fold"
    )
    folds = tell(records, versions).by_request()
    rows = []
    for position, r in enumerate(records):
        fold = folds.get(position)
        label = "" if fold is None else f"  v{fold.version} {fold_label(fold, 'en')}"
        actual = "-" if r.input_tokens is None else f"{r.input_tokens}{'~' if r.estimated else ''}"
        gap = (
            "-"
            if r.input_tokens is None or r.estimated
            else f"{r.counted_input_tokens - r.input_tokens:+d}"
        )
        output = "-" if r.output_tokens is None else str(r.output_tokens)
        rows.append(
            f"{r.turn:>4} {r.kind:<7} {r.counted_input_tokens:>7} {actual:>7} {gap:>6} {output:>6} "
            f"{r.reasoning_tokens:>6} {r.cached_tokens:>6}{label}"
        )
    if not any(r.estimated for r in records):
        note = ""
    elif offline:
        note = "~ counted locally: the offline engine has no server to bill"
    else:
        note = "~ estimated locally: the server reported no usage"
    return "\n".join(
        ["\n--- Usage Ledger ---", header, *rows, *([note] if note else []), "--------------------"]
    )


def counting_words(server: ServerKnowledge) -> str:
    """Which count the budget uses, in words: the offline engine's local count (nothing is billed),
    the server's own tokenizer (exact), o200k_base where it is the server's own, or local counts
    with a learned margin."""
    if server.backend.offline:
        return "local o200k_base (offline: nothing is billed)"
    source = server.source()
    if source is not None:
        return f"the server's tokenizer, exact ({source})"
    if server.calibration.exact:
        return "local o200k_base, the server's own tokenizer: exact"
    return "local, with a learned margin"


def run_command(memory: ShortTermMemory, command: str) -> str | None:
    """The output of one of the article's commands, or None if ``command`` is none of them."""
    if command == "history":
        return format_messages("Full Conversation History", memory.history)
    if command == "context":
        return format_messages("Last Request Context", memory.last_context)
    if command == "summary":
        summary = memory.summary or "(empty)"
        return f"\n--- Conversation Summary ---\n{summary}\n----------------------------"
    if command == "usage":
        return format_usage(
            memory.ledger,
            offline=memory.server.backend.offline,
            versions=memory.conversation.versions,
        )
    if command == "status":
        told = story(memory)
        status = {
            **memory.get_status(),
            "Budget counted by": counting_words(memory.server),
            "Folds": len(told.folds),
        }
        rows = "\n".join(f"{name}: {value}" for name, value in status.items())
        if told.folds:
            rows += "\nLast fold: " + fold_event(memory, told.folds[-1], "en")
        return f"\n--- Short-term Memory Status ---\n{rows}\n--------------------------------"
    return None


class PlainText:
    """Turns a streamed Markdown reply into plain text for a terminal, piece by piece.

    Drops bold markers (``**``, ``__``), and heading and quote markers at the start
    of a line; lists and everything else pass as they are. A piece ending in ``*``
    or ``_`` is held back until the next one, since a marker may be split in two.
    """

    _LINE_MARKS = re.compile(r"^(?:#{1,6} |> ?)", re.MULTILINE)

    def __init__(self) -> None:
        self._held = ""
        self._line_start = True

    def feed(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        if text.endswith(("*", "_")):
            keep = len(text) - len(text.rstrip("*_"))
            self._held = text[-keep:]
            text = text[:-keep]
        return self._clean(text)

    def flush(self) -> str:
        text = self._held
        self._held = ""
        return self._clean(text)

    def _clean(self, text: str) -> str:
        if not text:
            return ""
        prefix = "" if self._line_start else "\0"
        cleaned = self._LINE_MARKS.sub("", prefix + text).removeprefix("\0")
        self._line_start = text.endswith("\n")
        return cleaned.replace("**", "").replace("__", "")


def fold_report(job: ReplyJob) -> str | None:
    """Waits for ``job``; None when its fold succeeded or had nothing to do, else what to tell the
    user."""
    job.wait()
    error = job.progress.after_error
    if error is None:
        return None
    return (
        f"Folding ahead of the next turn failed ({error}); the next turn folds the same messages "
        "itself."
    )


def fold_ahead_notice(memory: ShortTermMemory) -> str | None:
    """What the terminal says while the fold ahead runs, from the memory's plan for the next turn:
    "Folding messages 3–4 into the summary ahead of the next turn…". None when that plan folds
    nothing, or when the memory refuses to plan one (a budget too small for any message):
    ``fold_ahead`` folds nothing then either.

    A session cap is checked only by the fold itself (``ShortTermMemory.prefold``): a session at its
    cap is told the notice, then no fold, and its next message is refused with the cap's reason.
    """
    try:
        ahead = memory.plan()
    except ValueError:
        return None
    if not ahead.fold:
        return None
    folded = memory.summarized_message_count
    return t("en", "fold.ahead_running", first=folded + 1, last=folded + ahead.fold)


def fold_after_reply(memory: ShortTermMemory, write: Callable[[str], None]) -> None:
    """Folds ahead of the next turn, as the page does, and waits for it: the notice while it runs,
    then each fold it made as its one event (``fold_event``, the words the page and ``status`` use),
    or why it failed.

    Waiting here, not after the next input, tells a fold under the reply that caused it. The price,
    with a model: the next prompt comes once the summary request is done, where the learner could
    have typed during it; the next turn would have waited for it all the same.
    """
    notice = fold_ahead_notice(memory)
    if notice is not None:
        write(notice)
    problem = fold_report(ReplyJob(memory, None, after=fold_ahead).start())
    if problem is not None:
        write(problem)
        return
    for fold in story(memory).ahead:
        write(fold_event(memory, fold, "en"))


def repl(
    memory: ShortTermMemory,
    read: Callable[[str], str] = input,
    write: Callable[[str], None] = print,
    write_part: Callable[[str], None] | None = None,
) -> None:
    """Reads until ``exit`` or end of input. A failed turn is rolled back and reported.

    ``write`` writes a line. ``write_part`` writes a piece of a streamed reply with no
    line break; without it the reply is written as one line once it is complete.
    """
    write(f"Memora {__version__} (the article's v0.7 loop)")
    server = memory.server
    model = "" if server.backend.offline else f" · model {memory.model}"
    write(f"Backend: {server.backend.label}{model} · budget counted by: {counting_words(server)}")
    write("Commands: " + ", ".join(COMMANDS))
    while True:
        try:
            user_input = read("\nYou: ")
        except EOFError:
            write("")  # the cursor is still on the "You: " prompt line
            write("Bye!")
            return
        command = user_input.lower().strip()
        if command == "exit":
            write("Bye!")
            return
        output = run_command(memory, command)
        if output is not None:
            write(output)
            continue
        stats = run_turn(memory, user_input, write, write_part)
        account = None if stats is None else story(memory).turn(stats.record.turn)
        if account is not None:
            write(format_stats(account, offline=memory.server.backend.offline))
            fold_after_reply(memory, write)


def run_turn(
    memory: ShortTermMemory,
    text: str,
    write: Callable[[str], None],
    write_part: Callable[[str], None] | None,
) -> TurnStats | None:
    """One turn, its reply written as plain text (streamed when ``write_part`` is given); None when
    it failed.

    A failure is reported with ``write`` after ending a half-written line; the turn is rolled back.
    """
    streaming = False
    plain = PlainText()
    try:
        with memory.turn(text) as turn:
            if write_part is None:
                write(f"Memora: {plain.feed(turn.run())}{plain.flush()}")
            else:
                for piece in turn.stream():
                    if not streaming:
                        write_part("Memora: ")
                        streaming = True
                    write_part(plain.feed(piece))
                write_part(plain.flush() + "\n")
    except (BackendError, ValueError) as error:
        if streaming and write_part is not None:
            write_part("\n")
        write(f"Request failed: {error}")
        return None
    return turn.stats


def _print_part(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """``--help`` and ``--version``; the REPL takes no other arguments, its settings come from the
    environment."""
    parser = argparse.ArgumentParser(
        prog="python -m memora",
        description=(
            "Memora's terminal REPL: the article's v0.7 loop on the same short-term memory. "
            f"Commands at the prompt: {', '.join(COMMANDS)}. Offline unless OPENAI_API_KEY (or "
            "MEMORA_BACKEND=chat) is set; docs/configuration.md lists every MEMORA_* variable."
        ),
    )
    parser.add_argument("--version", action="version", version=f"Memora {__version__}")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    parse_args(argv)
    try:
        memory = configured_memory(load_settings())
    except SettingsError as error:
        problems = "\n".join(f"  - {problem}" for problem in error.problems)
        print(
            f"Configuration error: Memora cannot start until these settings are fixed:\n{problems}",
            file=sys.stderr,
        )
        return 2
    try:
        repl(memory, write_part=_print_part)
    except KeyboardInterrupt:
        print("\nBye!")
    return 0
