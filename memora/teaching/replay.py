"""What a fold policy would have done with a conversation: the plan, replayed on its token counts.

A replay calls no model. It walks a finished conversation turn by turn, as ``ShortTermMemory`` does,
through the memory's own steps: the same pure plan (``plan.plan_turn``), the same loop of folds
before each reply (``core.fold_until_it_fits``), the same spans (``TurnPlan.spans``) and request
size (``plan.request_tokens``). It asks them what each request would have sent: what folds, in how
many summary requests, before each reply and in each fold ahead. A student can then see what another
policy, or sending the full history, would have done with their own conversation.

What every figure rests on (the page labels them a replay estimate):

- **The same conversation.** Every policy gets the same messages and the same replies. A real model
  sent another context would have answered a little differently; a replay cannot know how.
- **Local tokens, in the plan's arithmetic.** A reply request sends ``fixed + summary + recent
  messages + message``, each message at its own o200k_base count (exact in the OpenAI layout; a
  server that takes the summary inside its one system message merges a few tokens across the join).
  The budget is the memory's local budget.
- **Today's settings.** The whole conversation is replayed under the current budget and window, even
  where they changed midway.
- **Folding ahead.** The page and the REPL fold after every reply what the next turn is certain to
  need (``ShortTermMemory.prefold``); ``prefold=False`` replays the article's own loop, which folds
  only when a turn prepares its request.
- **The server's own count, where it counted.** A memory whose server counts each request folds one
  more pair when that count is over the budget. A replay counts nothing: it reads those retries off
  the real summaries (a real fold of the same turn, before its reply, that the plan did not ask
  for), so the live policy's replay still reproduces what was sent; another policy's replay has no
  such count and trusts the plan.
- **Summaries that really happened are taken as they were.** ``real_folds`` are the conversation's
  own summary requests, oldest first. While the replay's summary requests fold the same spans in the
  same order as they did, each takes its real input, output and resulting summary, so a replay of
  the policy the conversation ran under reproduces what was sent. From the first request that
  differs, every summary is estimated.
- **A summary that never existed is estimated** at the length of what it summarizes (the old
  summary's text plus the folded messages), up to the policy's summary cap: never longer than its
  cap, as a real one is cut there. That is the plan's own reservation once a conversation has more
  to summarize than the cap, an upper bound for a model that writes less. Its request's input is the
  request's fixed part (instructions, layout, priming), the old summary's text and the folded
  messages at their own counts (a transcript line costs about what its message does), at most the
  request's room for messages, as a real fold cuts the largest messages to fit.
- **Replies' output is left out.** It is the same under every policy, so the replays compare what
  differs: every request's input, and the summaries written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memora.memory import policies
from memora.memory.core import fold_until_it_fits, local_budget, request_sizes
from memora.memory.plan import (
    PlanSizes,
    TurnPlan,
    at_full_length,
    plan_turn,
    request_tokens,
    summary_tokens,
    within_budget,
)
from memora.memory.values import FoldPolicy
from memora.teaching.story import story
from memora.text.usage import RequestKind

if TYPE_CHECKING:
    from memora.memory.core import ShortTermMemory

FULL_HISTORY = "full_history"
Strategy = str
"""What a replay sends: a registered fold policy's name, or ``FULL_HISTORY``: the whole history with
every reply."""


@dataclass(frozen=True)
class PolicySizes:
    """The fixed local token sizes one fold policy plans with (``plan.Sizes`` under the policy's
    summary cap).

    ``fixed``: the instructions and the reply's priming. ``preamble``: the summary message without
    its text. ``summary_cap``: the most tokens a summary's text may have. ``summary_request``: a
    summary request with no summary and no messages (its instructions, layout and priming).
    ``fold_room``: the tokens one summary request has for the messages it folds.
    """

    fixed: int
    preamble: int
    summary_cap: int
    summary_request: int
    fold_room: int

    @property
    def full_summary(self) -> int:
        """A summary message at its full length, as the plan reserves it
        (``Sizes.full_summary``)."""
        return at_full_length(self.preamble, self.summary_cap)


@dataclass(frozen=True)
class RealFold:
    """A summary request that really happened: the history ``span`` it folded, its counted
    ``input_tokens``, its ``output_tokens``, and the tokens of the summary message it left
    (``summary_tokens``, preamble included). ``turn`` is the turn the ledger counts it for;
    ``ahead``: it was a fold ahead, after that turn's reply."""

    span: tuple[int, int]
    input_tokens: int
    output_tokens: int
    summary_tokens: int
    turn: int = 0
    ahead: bool = False


@dataclass(frozen=True)
class ReplayedRequest:
    """One request of a replay. ``turn`` is the user turn it serves (a fold ahead counts for the
    turn whose reply it follows, as the ledger does). A summary's ``output_tokens`` is the summary
    written; a reply's is 0 (left out). ``span`` is the history range a summary folded.
    ``estimated`` is True for a summary that never existed. ``fits`` is False for a reply over the
    budget: a policy would have refused it, sending the full history does not.
    """

    turn: int
    kind: RequestKind
    input_tokens: int
    output_tokens: int = 0
    span: tuple[int, int] | None = None
    estimated: bool = False
    fits: bool = True


@dataclass(frozen=True)
class Replay:
    """Every request one strategy would have sent for a conversation of ``turns`` finished turns."""

    strategy: Strategy
    turns: int
    requests: tuple[ReplayedRequest, ...]

    @property
    def reply_requests(self) -> int:
        return sum(r.kind == "reply" for r in self.requests)

    @property
    def summary_requests(self) -> int:
        return sum(r.kind == "summary" for r in self.requests)

    @property
    def input_tokens(self) -> int:
        """Tokens sent: the input of every request, replies and summaries."""
        return sum(r.input_tokens for r in self.requests)

    @property
    def summary_output_tokens(self) -> int:
        """Tokens of every summary written."""
        return sum(r.output_tokens for r in self.requests if r.kind == "summary")

    @property
    def over_budget(self) -> int:
        """Replies that would not have fit the budget."""
        return sum(not r.fits for r in self.requests)

    @property
    def estimated(self) -> bool:
        """Whether any summary in it is an estimate (see the module's docstring)."""
        return any(r.estimated for r in self.requests)

    def tokens_per_turn(self) -> tuple[int, ...]:
        """For turns 1..``turns``: the input of every request of the turn plus the summaries it
        wrote."""
        totals = [0] * self.turns
        for r in self.requests:
            totals[r.turn - 1] += r.input_tokens + r.output_tokens
        return tuple(totals)


def replay_full_history(counts: Sequence[int], fixed: int, *, budget: int) -> Replay:
    """Every reply sends the instructions and the whole history so far: no summary, and no budget
    held.

    ``counts`` are the tokens of each finished message, user and reply pairs in order; ``fixed`` the
    instructions and the reply's priming. A reply over ``budget`` is marked, not refused. Raises
    ValueError for an odd count.
    """
    _check_pairs(counts)
    requests = []
    history = 0  # the tokens of every message before this turn's, added up as the turns go
    for index in range(0, len(counts), 2):
        tokens = request_tokens(fixed, 0, (history,), counts[index])
        requests.append(
            ReplayedRequest(index // 2 + 1, "reply", tokens, fits=within_budget(tokens, budget))
        )
        history += counts[index] + counts[index + 1]
    return Replay(FULL_HISTORY, len(counts) // 2, tuple(requests))


def replay(
    counts: Sequence[int],
    policy: FoldPolicy,
    sizes: PolicySizes,
    *,
    budget: int,
    max_recent_turns: int,
    prefold: bool = True,
    real_folds: Sequence[RealFold] = (),
) -> Replay:
    """What ``policy`` would have sent for a conversation whose finished messages have ``counts``
    tokens.

    ``counts`` are user and reply pairs, in order (the pending message of a turn in progress is left
    out by the caller). ``budget`` is the local budget; ``sizes`` the policy's fixed sizes
    (``replay_sizes``). Each turn folds ahead after the previous reply when ``prefold`` (as the page
    does), then plans its own message and folds what that plan says, in as many summary requests as
    ``fold_pieces`` needs. A message too long to send even alone with the instructions sends
    nothing, as the page refuses it. See the module's docstring for the assumptions, and for
    ``real_folds``. Raises ValueError for an odd count.
    """
    _check_pairs(counts)
    run = _Run(counts, policy, sizes, budget, max_recent_turns, list(real_folds))
    for turn in range(1, len(counts) // 2 + 1):
        run.reply(turn)
        if prefold:
            run.fold_ahead(turn)
    return Replay(policy, len(counts) // 2, tuple(run.requests))


class _Run:
    """The state of one replay: what is folded, the summary so far, the requests made. Mutable,
    private. Each reply runs the memory's own loop (``core.fold_until_it_fits``) over this run's
    steps (``plan``, ``fold``, ``build``: ``core.TurnSteps``), as a memory's turn does."""

    def __init__(
        self,
        counts: Sequence[int],
        policy: FoldPolicy,
        sizes: PolicySizes,
        budget: int,
        recent: int,
        real: list[RealFold],
    ) -> None:
        self.counts = counts
        self.policy = policies.policy(policy)
        self.sizes = sizes
        self.budget = budget
        self.recent = recent
        # Consumed from the front while the replay folds as reality did; emptied at the first
        # difference.
        self.real = real
        self.folded = 0
        self.summary = 0  # the summary message's tokens, preamble included; 0 for no summary
        self.requests: list[ReplayedRequest] = []
        self.turn = 0
        self.current = 0  # the history index of the message planned for
        self.message: int | None = None  # its tokens; None for the message a fold ahead expects
        self.built: ReplayedRequest | None = None  # the reply request built last

    def plan(self, at_least: int) -> TurnPlan:
        sizes = PlanSizes(
            self.sizes.fixed, self.sizes.full_summary, self.sizes.fold_room, self.budget
        )
        return plan_turn(
            self.counts[self.folded : self.current],
            message=self.message,
            summary=self.summary,
            policy=self.policy,
            sizes=sizes,
            max_recent_turns=self.recent,
            at_least=at_least,
        )

    def reply(self, turn: int) -> None:
        """The reply of ``turn``, after what its plan folds, through the memory's own loop
        (``core.fold_until_it_fits``); nothing for a message too long to send even alone, and a
        reply marked over the budget when even folding everything leaves it over."""
        self.turn = turn
        self.current = 2 * (turn - 1)
        self.message = self.counts[self.current]
        if not self.plan(0).message_fits:
            return
        fold_until_it_fits(self)
        assert self.built is not None  # the loop builds before it answers
        self.requests.append(self.built)

    def fold(self, turn_plan: TurnPlan) -> None:
        for span in turn_plan.spans(self.folded):
            self.fold_span(span)

    def build(self, turn_plan: TurnPlan) -> bool | None:
        self.built = self.request()
        return self.server_fits()

    def fold_ahead(self, turn: int) -> None:
        """``ShortTermMemory.prefold`` after the reply of ``turn``: the plan for the message
        expected next."""
        self.turn = turn
        self.current = 2 * turn
        self.message = None
        ahead = self.plan(0)
        if not ahead.message_fits:
            return
        self.fold(ahead)

    def fold_span(self, span: tuple[int, int]) -> None:
        self.requests.append(self.summarize(span))
        self.folded = span[1]

    def request(self) -> ReplayedRequest:
        assert self.message is not None
        window = self.counts[self.folded : self.current]
        tokens = request_tokens(self.sizes.fixed, self.summary, window, self.message)
        return ReplayedRequest(self.turn, "reply", tokens, fits=within_budget(tokens, self.budget))

    def server_fits(self) -> bool | None:
        """A replay counts nothing: None, the plan decides. Except where the real summaries show the
        server's own count at work: a real fold of this turn, before its reply, from where the
        summary stands now, that the plan did not ask for (the memory retried with one more
        pair)."""
        upcoming = self.real[0] if self.real else None
        if upcoming is None or upcoming.ahead or upcoming.turn != self.turn:
            return None
        return False if upcoming.span[0] == self.folded else None

    def summarize(self, span: tuple[int, int]) -> ReplayedRequest:
        if self.real and self.real[0].span == span:
            fold = self.real.pop(0)
            self.summary = fold.summary_tokens
            return ReplayedRequest(
                self.turn, "summary", fold.input_tokens, fold.output_tokens, span
            )
        # Once the replay folds otherwise, no later real summary is the one it would have had.
        self.real.clear()
        old = max(0, self.summary - self.sizes.preamble)
        folded = sum(self.counts[span[0] : span[1]])
        text = min(self.sizes.summary_cap, old + folded)
        self.summary = self.sizes.preamble + text
        tokens = self.sizes.summary_request + old + min(folded, self.sizes.fold_room)
        return ReplayedRequest(self.turn, "summary", tokens, text, span, estimated=True)


def _check_pairs(counts: Sequence[int]) -> None:
    if len(counts) % 2:
        raise ValueError(f"a replay needs finished user/reply pairs, not {len(counts)} messages")


# -- from a live memory
# ---------------------------------------------------------------------------------------------


def replay_sizes(memory: ShortTermMemory) -> PolicySizes:
    """``memory``'s fixed sizes, the same under either fold policy: both cap the summary at
    ``max_summary_tokens``."""
    sizes = request_sizes(memory)
    cap = sizes.max_summary_tokens
    # A replay adds each summary's real (or estimated) text to the request's frame.
    frame = sizes.summary_frame
    return PolicySizes(
        sizes.fixed, sizes.preamble, cap, frame, sizes.fold_room(local_budget(memory))
    )


def real_folds(memory: ShortTermMemory) -> tuple[RealFold, ...]:
    """``memory``'s summary requests that moved messages into the summary, oldest first, with the
    ledger's counted input and output: the story's folds (``memora.teaching.story``, whose ``made``
    matches each version to its record), read, not matched again. Stops at a version with no record
    (a history imported without its ledger)."""
    versions = memory.conversation.versions
    folds = []
    for fold in story(memory).folds:
        if not fold.count:
            continue
        if fold.request is None:
            break
        record = memory.ledger[fold.request]
        text = versions[fold.version - 1].text
        folds.append(
            RealFold(
                fold.span,
                record.counted_input_tokens,
                record.output_tokens or 0,
                summary_tokens(text),
                record.turn,
                fold.ahead,
            )
        )
    return tuple(folds)
