"""The token sizes a memory plans with: the parts of every request that are not the conversation, the summary's among them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from memora.memory.backend import SummaryRequest
from memora.memory.summarizer import Summarizer
from memora.memory.values import MIN_FOLD_ROOM, MIN_MESSAGE_ROOM
from memora.prompts import SUMMARY_PREAMBLE
from memora.tokens import REPLY_PRIMING_TOKENS, count_message


@dataclass(frozen=True)
class Sizes:
    """Local o200k_base sizes of a memory's fixed request parts, from its prompts and summary cap.

    Each size is computed once per instance (``request_sizes`` shares one instance per prompts and cap):
    a turn plans with them several times, and they change only with a setting.
    """

    model: str
    system_prompt: str
    summary_instructions: str
    max_summary_tokens: int

    @cached_property
    def summarizer(self) -> Summarizer:
        return Summarizer(self.model, self.summary_instructions, self.max_summary_tokens)

    @cached_property
    def fixed(self) -> int:
        """The instructions (as a system message) and the reply's priming."""
        return (count_message("system", self.system_prompt) if self.system_prompt else 0) + REPLY_PRIMING_TOKENS

    @cached_property
    def full_summary(self) -> int:
        """A summary message at its full allowed length; +1: preamble and summary may not split at a token boundary."""
        return count_message("developer", SUMMARY_PREAMBLE) + self.max_summary_tokens + 1

    @cached_property
    def summary_request(self) -> int:
        """A summary request without its messages: instructions, layout, priming and a full-length summary."""
        empty = SummaryRequest("", self.summary_instructions, "", (), self.max_summary_tokens)
        layout = count_message("user", empty.input_text)
        return count_message("system", self.summary_instructions) + layout + REPLY_PRIMING_TOKENS + self.max_summary_tokens + 1

    @cached_property
    def minimum_budget(self) -> int:
        """The smallest local budget for a reply (instructions, full summary, a short message) and a summary request."""
        return max(self.fixed + self.full_summary + MIN_MESSAGE_ROOM, self.summary_request + MIN_FOLD_ROOM)

    def fold_room(self, local_budget: int) -> int:
        """Local tokens one summary request has for the messages it folds, within ``local_budget``."""
        return max(MIN_FOLD_ROOM, local_budget - self.summary_request)


@lru_cache(maxsize=128)  # bounded: each budget a sidebar tries is a cap under the watermark policy
def request_sizes(model: str, system_prompt: str, summary_instructions: str, max_summary_tokens: int) -> Sizes:
    """The one ``Sizes`` of these prompts and cap, its sizes computed on first use."""
    return Sizes(model, system_prompt, summary_instructions, max_summary_tokens)


def check_limits(budget: int, recent: int, floor: int, output: int, context_window: int | None) -> None:
    """Raises ValueError for a window below 0, a budget below ``floor``, or budget plus ``output`` over ``context_window``."""
    if recent < 0:
        raise ValueError(f"max_recent_turns must be 0 or more, not {recent}")
    if budget < floor:
        raise ValueError(
            f"max_input_tokens must be at least {floor}: the instructions and a full summary already need that much, before any message."
        )
    if context_window is not None and budget + output > context_window:
        raise ValueError(
            f"max_input_tokens ({budget}) plus the largest output ({output}) must fit "
            f"the server's context window of {context_window} tokens."
        )
