"""The offline engine: deterministic, instant, and plainly not a language model.

Its reply reports what a model would have received this turn. Its summary is
extractive (see ``extractive.py``). Usage figures are real o200k_base counts,
marked ``estimated``: no server billed them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from memora.backends.base import OPENAI_PROFILE, Completion, ReplyRequest, SummaryRequest
from memora.backends.extractive import merge_summary
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE, SUMMARY_WORD_LIMIT, summary_word_limit
from memora.text.tokens import LocalTokenCounter, count_text
from memora.text.usage import Usage

OFFLINE_LABEL = "Offline (no language model)"


class OfflineBackend:
    """Explains each request instead of answering it; needs no key and no network."""

    label = OFFLINE_LABEL
    offline = True
    profile = OPENAI_PROFILE

    def __init__(self, word_limit: int = SUMMARY_WORD_LIMIT) -> None:
        """``word_limit`` caps every summary; instructions asking for fewer words (a shorter summary cap) cap it lower."""
        self.word_limit = word_limit
        self._counter = LocalTokenCounter()

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """Yields the explanation in word-sized pieces, then its Completion."""
        text = describe_request(request)
        yield from re.findall(r"\S+\s*|\s+", text)
        input_tokens = self._counter.count(request.model, request.instructions, request.messages)
        yield Completion(text, Usage(input_tokens, count_text(text), estimated=True))

    def count_request(self, model: str, instructions: str, messages: Sequence[Message]) -> None:
        """None: the offline engine counts with o200k_base, the memory's own local count."""
        return None

    def counting_source(self, model: str) -> None:
        return None

    def summarize(self, request: SummaryRequest) -> Completion:
        limit = min(self.word_limit, summary_word_limit(request.instructions))
        text = merge_summary(request.existing_summary, request.new_messages, limit)
        input_tokens = count_text(request.instructions) + count_text(request.input_text)
        return Completion(text, Usage(input_tokens, count_text(text), estimated=True))


def _messages(count: int, kind: str) -> str:
    return f"{count} {kind} message" + ("" if count == 1 else "s")


def describe_request(request: ReplyRequest) -> str:
    """The offline reply: the shape of the context a model would have been sent."""
    messages = request.messages
    summary = next((m.content for m in messages if m.role == "developer"), None)
    recent = [m for m in messages[:-1] if m.role != "developer"]
    tokens = request.counted_input_tokens
    budget = request.input_budget
    if tokens is None:
        usage_line = ""
    elif budget is None:
        usage_line = f"- **{tokens:,} input tokens**, instructions included\n"
    else:
        usage_line = f"- **{tokens:,} of {budget:,} input tokens** in the budget, instructions included\n"
    summary_text = summary.removeprefix(SUMMARY_PREAMBLE).strip() if summary else None
    summary_block = "\n".join("> " + line for line in summary_text.splitlines()) if summary_text else "(no summary yet)"
    return (
        "**Offline mode, no language model.** This is what a model would have received for this turn:\n\n"
        f"- {'1 summary message' if summary else 'no summary yet'}, {_messages(len(recent), 'recent')}, 1 current message\n"
        f"{usage_line}"
        f"\n**Summary sent:**\n\n{summary_block}\n"
    )
