"""A reply request in the wire's roles, and its record: the summary (a ``developer`` message, or
inside the one system message of a server that keeps only one), the recent window, the current
message, counted as the plan counts them, and the request's parts (``RequestParts``) for the ledger.

Pure: the memory (``core``) builds each request here, once its folds are made."""

from __future__ import annotations

from memora.memory.backend import ServerProfile
from memora.memory.plan import History, summary_tokens
from memora.memory.values import PreparedContext, Source
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE
from memora.text.tokens import count_message, request_input_tokens
from memora.text.usage import RequestParts, SentMessage


def lead_messages(profile: ServerProfile, system_prompt: str, summary: str) -> list[Message]:
    """The messages before the recent window: the summary, or the one system message; none when
    empty."""
    if not profile.single_system_message:
        return [Message("developer", SUMMARY_PREAMBLE + summary)] if summary else []
    parts = [system_prompt.rstrip(), SUMMARY_PREAMBLE + summary] if summary else [system_prompt]
    system = "\n\n".join(part for part in parts if part)
    return [Message("system", system)] if system else []


def summary_in_request(profile: ServerProfile, system_prompt: str, summary: str) -> int:
    """The local tokens ``summary`` adds to a reply request in the wire's roles: its own message
    (``summary_tokens``), or, where the server takes one system message, what it adds to that
    message (a few tokens fewer: the two share one message's framing). 0 for no summary.

    What the plan weighs for the summary as it is, so that a plan that folds nothing counts its
    request exactly as ``context`` does."""
    if not summary:
        return 0
    if not profile.single_system_message:
        return summary_tokens(summary)
    with_summary = lead_messages(profile, system_prompt, summary)
    without = lead_messages(profile, system_prompt, "")
    return sum(count_message(m.role, m.content) for m in with_summary) - sum(
        count_message(m.role, m.content) for m in without
    )


def request_instructions(profile: ServerProfile, system_prompt: str) -> str:
    """A reply request's instructions: empty when they lead the context as its system message."""
    return "" if profile.single_system_message else system_prompt


def sources(profile: ServerProfile, summary: str, leading: int, recent: int) -> tuple[Source, ...]:
    """One source per context message: ``leading`` lead messages, ``recent`` window messages, the
    current one."""
    lead: Source = "summary"
    if profile.single_system_message:
        lead = "instructions_summary" if summary else "instructions"
    return (lead,) * leading + ("window",) * recent + ("current",)


def context(
    history: History,
    profile: ServerProfile,
    system_prompt: str,
    *,
    current: int,
    budget: int,
    summary_token_usage: int,
    newly_summarized_count: int,
) -> PreparedContext:
    """The reply request: the summary, the messages it does not hold as the window, and
    ``history.messages[current]`` as the message, in the wire's roles. ``summary_token_usage`` and
    ``newly_summarized_count`` are what this turn's folds spent and folded, for the ledger;
    ``budget`` the local budget it is checked against, kept on its ``parts`` (``reply_parts``).

    Counted locally, each history message at its kept count and the lead message (the summary, or
    the one system message) here: as the plan counts a request that folds nothing
    (``summary_in_request``). A full-length summary the plan reserves while folding is never less
    than what it then sends, the one system message included (it shares its framing). The server's
    own count, where it counts requests, is the memory's to add (``ServerKnowledge.counted``)."""
    start = history.folded
    lead = lead_messages(profile, system_prompt, history.summary)
    messages = (*lead, *history.messages[start : current + 1])
    tokens = (
        *(count_message(m.role, m.content) for m in lead),
        *history.counts[start : current + 1],
    )
    instructions = request_instructions(profile, system_prompt)
    origins = sources(profile, history.summary, len(lead), current - start)
    input_tokens = request_input_tokens(instructions, tokens)
    parts = reply_parts(
        history,
        current=current,
        input_tokens=input_tokens,
        summary=summary_in_request(profile, system_prompt, history.summary),
        budget=budget,
    )
    return PreparedContext(
        instructions,
        messages,
        origins,
        tokens,
        input_tokens,
        summary_token_usage,
        newly_summarized_count,
        parts=parts,
    )


def reply_parts(
    history: History, *, current: int, input_tokens: int, summary: int, budget: int
) -> RequestParts:
    """The reply request for ``history.messages[current]``, part by part: the ``summary`` it adds,
    each unfolded message before it as the recent window, the message itself, and the rest of
    ``input_tokens`` as the instructions (the system prompt, the framing, the priming).

    Numbers are the chat's (#1 first); the summary version is the newest one, and its reason is why
    the fold that made it happened."""
    window = tuple(
        SentMessage(index + 1, history.counts[index]) for index in range(history.folded, current)
    )
    message = SentMessage(current + 1, history.counts[current])
    sent = summary + sum(m.tokens for m in window) + message.tokens
    newest = history.versions[-1] if history.versions else None
    return RequestParts(
        instructions=input_tokens - sent,
        summary=summary,
        window=window,
        current=message,
        budget=budget,
        version=len(history.versions),
        reason="none" if newest is None else newest.reason,
    )
