"""The terminal REPL: the article's Memora v0.7 loop on the same memory.

Commands: history, context, summary, status, exit. Offline unless a key is set.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from memora.backends.base import BackendError
from memora.memory import ShortTermMemory, TurnStats
from memora.messages import Message
from memora.settings import SettingsError, build_backend, load_settings

COMMANDS = ("history", "context", "summary", "status", "exit")


def format_messages(title: str, messages: Sequence[Message]) -> str:
    body = "\n".join(f"{m.role}: {m.content}" for m in messages) if messages else "(empty)"
    return f"\n--- {title} ---\n{body}\n----------------------------"


def format_stats(stats: TurnStats) -> str:
    """The article's per-turn block, plus the gap between counted and billed input."""
    actual = "not reported" if stats.input_tokens is None else f"{stats.input_tokens}"
    if stats.estimated:
        actual += " (estimated locally)"
    gap = "" if stats.input_tokens is None else f" (counted - actual = {stats.counted_input_tokens - stats.input_tokens:+d})"
    return "\n".join(
        [
            "\n--- Memory Status ---",
            f"Newly summarized messages: {stats.newly_summarized_count}",
            f"Context messages sent: {stats.context_messages}",
            f"Counted input tokens: {stats.counted_input_tokens}",
            f"Actual input tokens: {actual}{gap}",
            f"Output tokens: {stats.output_tokens}",
            f"Summary update tokens: {stats.summary_token_usage}",
            f"Session total tokens: {stats.session_total_tokens}",
            "---------------------",
        ]
    )


def run_command(memory: ShortTermMemory, command: str) -> str | None:
    """The output of one of the article's commands, or None if ``command`` is none of them."""
    if command == "history":
        return format_messages("Full Conversation History", memory.history)
    if command == "context":
        return format_messages("Last Request Context", memory.last_context)
    if command == "summary":
        return f"\n--- Conversation Summary ---\n{memory.summary or '(empty)'}\n----------------------------"
    if command == "status":
        rows = "\n".join(f"{name}: {value}" for name, value in memory.get_status().items())
        return f"\n--- Short-term Memory Status ---\n{rows}\n--------------------------------"
    return None


def repl(memory: ShortTermMemory, read: Callable[[str], str] = input, write: Callable[[str], None] = print) -> None:
    """Reads until ``exit`` or end of input. A failed turn is rolled back and reported."""
    write("Memora v0.7")
    model = "" if memory.backend.offline else f" · model {memory.model}"
    write(f"Backend: {memory.backend.label}{model}")
    write("Commands: " + ", ".join(COMMANDS))
    while True:
        try:
            user_input = read("\nYou: ")
        except EOFError:
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
        try:
            with memory.turn(user_input) as turn:
                reply = turn.run()
        except (BackendError, ValueError) as error:
            write(f"Request failed: {error}")
            continue
        write(f"Memora: {reply}")
        assert turn.stats is not None
        write(format_stats(turn.stats))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        settings = load_settings()
        memory = ShortTermMemory(
            client=build_backend(settings),
            model=settings.model,
            max_input_tokens=settings.max_input_tokens,
            max_recent_turns=settings.max_recent_turns,
        )
    except (SettingsError, ValueError) as error:
        print(f"Configuration error: {error}", file=sys.stderr)
        return 2
    try:
        repl(memory)
    except KeyboardInterrupt:
        print("\nBye!")
    return 0
