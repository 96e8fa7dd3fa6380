"""One story of a conversation: its replies and its folds as events, in the order they happened;
pure, no Streamlit.

A fold is the summary request that moved messages into the summary. It happens either between turns,
after a reply (the fold ahead: it serves the next turn, so that its reply waits for no summary), or
inside a turn, before its reply (the memory folds what the fold ahead could not know it had to).
Either way its one label is the reply it followed and the turn it serves: "after reply 6, for turn
7". The turn box, Status, the summary panel, the ledger and the REPL all read ``story(memory)``, so
they cannot disagree on which folds a turn made or on the session's total.

Everything is read off the ledger and the summary's versions, which a saved conversation keeps: a
reload tells the same story.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memora.memory import ShortTermMemory
from memora.memory.values import SummaryVersion
from memora.text.usage import UsageRecord


@dataclass(frozen=True)
class Fold:
    """One summary request that made a summary version.

    ``version`` is the version's 1-based number; ``span`` the half-open history indexes it folded
    (empty for a rewrite that moved no message); ``tokens`` what its request cost. ``after_reply``
    is the number of the last reply before it (0 when it came before the first reply: a turn-1 fold,
    which no budget allows today, or an import); ``serves`` the turn whose request it made room for:
    the next turn for a fold ahead, the same turn for a fold inside a turn. ``session_total`` is the
    session's tokens once it was paid. ``ahead``: folded between turns, after reply ``after_reply``
    (else inside turn ``serves``, after its message and before its reply). ``request`` is the
    position of its summary request in the ledger (None for a version imported without its ledger).
    """

    version: int
    span: tuple[int, int]
    tokens: int
    after_reply: int
    serves: int
    session_total: int
    ahead: bool = True
    request: int | None = None

    @property
    def first(self) -> int:
        """The 1-based number of the first message it folded (as the chat numbers them)."""
        return self.span[0] + 1

    @property
    def last(self) -> int:
        """The 1-based number of the last message it folded; ``first - 1`` for a rewrite that folded
        none."""
        return self.span[1]

    @property
    def count(self) -> int:
        """How many messages it folded."""
        return self.span[1] - self.span[0]


@dataclass(frozen=True)
class TurnAccount:
    """One finished turn, told as the story tells it: its reply's ledger ``record``, the ``folds``
    that served its request (folded ahead after the previous reply, or inside the turn), and the
    session's tokens once its reply was paid (``session_total``). A fold ahead after this turn's
    reply belongs to the next turn."""

    turn: int
    record: UsageRecord
    folds: tuple[Fold, ...]
    session_total: int

    @property
    def newly_summarized(self) -> int:
        """The messages folded to make room for this turn's request (the article's
        ``newly_summarized_count``)."""
        return sum(fold.count for fold in self.folds)

    @property
    def summary_tokens(self) -> int:
        """What the summary requests that served this turn cost (the article's
        ``summary_token_usage``)."""
        return sum(fold.tokens for fold in self.folds)

    @property
    def tokens(self) -> int:
        """This turn's requests together: its folds and its reply."""
        return self.summary_tokens + self.record.total_tokens


@dataclass(frozen=True)
class Story:
    """A conversation's ``turns`` (finished, oldest first) and ``folds`` (oldest first); ``total``
    is the session's tokens, every request counted once (the ledger's total, a failed summary
    request's included)."""

    turns: tuple[TurnAccount, ...]
    folds: tuple[Fold, ...]
    total: int

    def turn(self, number: int) -> TurnAccount | None:
        """Turn ``number``'s account; None for a turn not finished (or not in the ledger: an
        imported history)."""
        return next((account for account in self.turns if account.turn == number), None)

    def folds_after(self, reply: int) -> tuple[Fold, ...]:
        """The folds made after reply ``reply`` and before the next one (0: before the first)."""
        return tuple(fold for fold in self.folds if fold.after_reply == reply)

    def by_request(self) -> dict[int, Fold]:
        """Each fold by the position of its summary request in the ledger."""
        return {fold.request: fold for fold in self.folds if fold.request is not None}

    @property
    def ahead(self) -> tuple[Fold, ...]:
        """The folds made after the last reply, for the turn still to come."""
        done = self.turns[-1].turn if self.turns else 0
        return tuple(fold for fold in self.folds if fold.serves > done)


def story(memory: ShortTermMemory) -> Story:
    """``memory``'s story, from its ledger and its summary's versions (see ``tell``)."""
    return tell(memory.ledger, memory.conversation.versions)


def tell(ledger: Sequence[UsageRecord], versions: Sequence[SummaryVersion]) -> Story:
    """The story of ``ledger`` (every request, in order) and ``versions`` (the summary's states, in
    order).

    Each summary record is matched to the next version it made (``made``); a summary record with
    none is a failed summary request (it cost tokens, it made no version). Versions left with no
    record (a history imported without its ledger) are told last, each as a fold ahead after the
    reply of its turn, the page's usual way.
    """
    folds: list[Fold] = []
    turns: list[TurnAccount] = []
    pending: list[Fold] = []
    total = replies = 0
    index = 0
    for position, record in enumerate(ledger):
        total += record.total_tokens
        if record.kind == "reply":
            replies = record.turn
            mine = tuple(fold for fold in pending if fold.serves == record.turn)
            pending = [fold for fold in pending if fold.serves != record.turn]
            turns.append(TurnAccount(record.turn, record, mine, total))
            continue
        if index < len(versions) and made(record, index + 1, versions[index]):
            # After the reply of its turn: a fold ahead for the next turn; before it: inside its own
            # turn.
            ahead = replies >= record.turn
            after = record.turn if ahead else record.turn - 1
            fold = _fold(versions, index, after, total, ahead, position)
            folds.append(fold)
            pending.append(fold)
            index += 1
    for unrecorded in range(index, len(versions)):
        folds.append(_fold(versions, unrecorded, versions[unrecorded].turn, total, True, None))
    return Story(tuple(turns), tuple(folds), total)


def made(record: UsageRecord, number: int, version: SummaryVersion) -> bool:
    """Whether summary ``record`` is the request that made ``version``, the summary's version
    ``number``: the one match of a version to its ledger record, for the story and the replay alike.

    Its turn and tokens must be the version's, and its parts must name that version (a record saved
    before records kept their parts is matched by turn and tokens alone). A summary request that
    came back empty has a record, with the version number it would have made, but no version: its
    tokens are not the next version's."""
    if (
        record.kind != "summary"
        or record.turn != version.turn
        or record.total_tokens != version.tokens
    ):
        return False
    return record.parts is None or record.parts.version == number


def _fold(
    versions: Sequence[SummaryVersion],
    index: int,
    after: int,
    total: int,
    ahead: bool,
    request: int | None,
) -> Fold:
    version = versions[index]
    return Fold(index + 1, version.folded, version.tokens, after, after + 1, total, ahead, request)
