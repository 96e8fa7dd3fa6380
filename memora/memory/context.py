"""What a reply request sends, in the wire's roles, and where each of its messages came from.

On OpenAI the summary is the article's ``developer`` message and the
instructions go as the request's ``instructions``. A server whose chat
templates keep only the first system message (``ServerProfile``) gets one
``system`` message instead, carrying the instructions and then the summary.
"""

from __future__ import annotations

from collections.abc import Sequence

from memora.memory.backend import ServerProfile
from memora.memory.values import Source
from memora.messages import Message
from memora.prompts import SUMMARY_PREAMBLE
from memora.tokens import REPLY_PRIMING_TOKENS, count_message


def lead_messages(profile: ServerProfile, system_prompt: str, summary: str) -> list[Message]:
    """The messages before the recent window: the summary, or the one system message; none when empty."""
    if not profile.single_system_message:
        return [Message("developer", SUMMARY_PREAMBLE + summary)] if summary else []
    parts = [system_prompt.rstrip(), SUMMARY_PREAMBLE + summary] if summary else [system_prompt]
    system = "\n\n".join(part for part in parts if part)
    return [Message("system", system)] if system else []


def request_instructions(profile: ServerProfile, system_prompt: str) -> str:
    """A reply request's instructions: empty when they lead the context as its system message."""
    return "" if profile.single_system_message else system_prompt


def sources(profile: ServerProfile, summary: str, leading: int, recent: int) -> tuple[Source, ...]:
    """One source per context message: ``leading`` lead messages, ``recent`` window messages, the current one."""
    lead: Source = "summary"
    if profile.single_system_message:
        lead = "instructions_summary" if summary else "instructions"
    return (lead,) * leading + ("window",) * recent + ("current",)


def local_input_tokens(instructions: str, message_tokens: Sequence[int]) -> int:
    """A request's local input tokens from its messages' counts, as ``LocalTokenCounter`` adds them: the reply's
    priming, the messages, and the instructions as a system message (none when empty)."""
    return REPLY_PRIMING_TOKENS + sum(message_tokens) + (count_message("system", instructions) if instructions else 0)
