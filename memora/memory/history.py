"""The history as a value: every message in full, each one's local tokens, and the summary folded from them.

The history grows without bound; what a request sends does not. A ``History`` says which of its
messages the summary already holds (``folded``), which are still verbatim (``unfolded``), and which
pairs a fold would take (``pairs_through``). It is frozen: the memory replaces it at each change, so
a reader on another thread (a reply job, the page) always sees one consistent conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memora.memory.values import SummaryVersion
from memora.messages import Message


@dataclass(frozen=True)
class History:
    """One conversation's messages and its running summary.

    ``messages`` are user/assistant pairs, possibly followed by one pending user message;
    ``counts[i]`` is the local tokens ``messages[i]`` adds to a request (tokenized once, as it
    joined). ``versions`` are the summary's states, oldest first: ``messages[:folded]`` are
    folded into ``summary``, the other finished pairs are sent verbatim while they fit.
    """

    messages: tuple[Message, ...] = ()
    counts: tuple[int, ...] = ()
    versions: tuple[SummaryVersion, ...] = ()

    @property
    def summary(self) -> str:
        """The running summary; empty before the first fold."""
        return self.versions[-1].text if self.versions else ""

    @property
    def folded(self) -> int:
        """How many messages, from the first, the summary holds (the article's ``summarized_message_count``)."""
        return self.versions[-1].summarized_message_count if self.versions else 0

    @property
    def pending(self) -> bool:
        """Whether the last message is a user message still waiting for its reply."""
        return bool(self.messages) and self.messages[-1].role == "user"

    @property
    def finished(self) -> int:
        """How many messages belong to finished user/assistant pairs."""
        return len(self.messages) - self.pending

    @property
    def turn_number(self) -> int:
        """The 1-based number of the current (or, between turns, the last) user turn."""
        return (len(self.messages) + 1) // 2

    @property
    def tokens(self) -> int:
        """The local tokens of every message: what sending the whole history would cost, instructions aside."""
        return sum(self.counts)

    @property
    def finished_counts(self) -> tuple[int, ...]:
        """Each message's local tokens for the finished user/reply pairs (a pending message is left out)."""
        return self.counts[: self.finished]

    @property
    def unfolded_messages(self) -> tuple[Message, ...]:
        """The messages not yet folded into the summary, a pending one included."""
        return self.messages[self.folded :]

    def unfolded(self, end: int) -> tuple[int, ...]:
        """The local tokens of each message not yet folded, before index ``end``: what the planner weighs."""
        return self.counts[self.folded : end]

    def pairs_through(self, end: int) -> list[int]:
        """The local tokens of each unfolded pair before index ``end``, oldest first: what a fold through ``end`` takes.

        Raises ValueError unless ``end`` is even, past the folded messages and within the finished pairs.
        """
        start = self.folded
        if end % 2 or not start < end <= self.finished:
            raise ValueError(f"cannot fold messages {start}..{end} of {self.finished} completed")
        return [self.counts[i] + self.counts[i + 1] for i in range(start, end, 2)]

    def adding(self, message: Message, tokens: int) -> History:
        """This history with ``message`` (of ``tokens`` local tokens) at its end."""
        return replace(self, messages=(*self.messages, message), counts=(*self.counts, tokens))

    def without_pending(self) -> History:
        """This history without its pending user message; itself when none is pending."""
        return replace(self, messages=self.messages[:-1], counts=self.counts[:-1]) if self.pending else self

    def folding(self, version: SummaryVersion) -> History:
        """This history with ``version`` as its summary."""
        return replace(self, versions=(*self.versions, version))
