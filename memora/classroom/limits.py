"""Per-session limits for a shared classroom link: message size, turns, tokens.

A teacher who shares one API key sets these through secrets or the environment
(see ``memora.app.settings``); a student who reaches one gets a clear message, and
the refused text is never sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LimitCode = Literal["message_too_long", "too_many_turns", "too_many_tokens", "server_tokens"]

DEFAULT_MAX_MESSAGE_CHARS = 20_000
"""Far more than any 1,000-token budget holds; it refuses a pasted book at once, before counting
tokens."""


class LimitReached(ValueError):
    """A session limit refuses this message. ``code``, ``value`` and ``limit`` let the UI translate
    it."""

    def __init__(self, code: LimitCode, value: int, limit: int, message: str) -> None:
        self.code = code
        self.value = value
        self.limit = limit
        super().__init__(message)


@dataclass(frozen=True)
class SessionLimits:
    """``None`` means no limit. Turns count finished user turns; tokens are the session's ledger
    total."""

    max_message_chars: int | None = DEFAULT_MAX_MESSAGE_CHARS
    max_turns: int | None = None
    max_session_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_message_chars", "max_turns", "max_session_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, or unset for no limit; not {value}")

    def check(self, text: str, finished_turns: int, session_tokens: int) -> None:
        """Raises LimitReached for the first limit ``text`` would break; returns None if all allow
        it."""
        if self.max_message_chars is not None and len(text) > self.max_message_chars:
            raise LimitReached(
                "message_too_long",
                len(text),
                self.max_message_chars,
                f"The message has {len(text):,} characters; the limit is "
                f"{self.max_message_chars:,}.",
            )
        self.check_spend(finished_turns, session_tokens)

    def check_spend(self, finished_turns: int, session_tokens: int) -> None:
        """Raises LimitReached when the turn or token cap refuses any further request; a prefold
        asks this too."""
        if self.max_turns is not None and finished_turns >= self.max_turns:
            raise LimitReached(
                "too_many_turns",
                finished_turns,
                self.max_turns,
                f"This session has reached its limit of {self.max_turns} turns. Start a new "
                "conversation to go on.",
            )
        if self.max_session_tokens is not None and session_tokens >= self.max_session_tokens:
            raise LimitReached(
                "too_many_tokens",
                session_tokens,
                self.max_session_tokens,
                f"This session has used {session_tokens:,} of its {self.max_session_tokens:,} "
                "tokens.",
            )
