"""The plan: one pure function, ``plan_turn``, decides every request a turn makes; and the pure
values it weighs.

It works on token counts alone (no messages, no model, no state), so a student can read the
article's rule in one place and test it with plain numbers. Everything that sends a request asks it:
the memory before each reply and between turns (``ShortTermMemory.plan``; ``prefold`` carries out
the fold ahead), the what-if replay (``memora.teaching.replay``) and the bench, through the memory.
What a fold policy adds to the rule is its own object (``memora.memory.policies``); the budget
inequality is the same for all of them.

Read in this order: ``History`` (the conversation as a value: which messages the summary holds,
which are still verbatim), ``PlanSizes``/``TurnPlan``/``plan_turn`` (the rule, ``within_budget``
its inequality), ``Sizes`` (the fixed parts of every request, from the
prompts and the summary cap), what a reply request sends in the wire's roles (``lead_messages``,
``sources``), and the budget in force (the server's tokens, its context window, the local tokens a
plan counts). Everything here is a pure function of its arguments or a frozen value: the memory
(``core``) keeps the state, does the I/O, and runs a turn's loop (``core.fold_until_it_fits``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from itertools import accumulate, pairwise

from memora.memory.policies import Policy
from memora.memory.values import (
    MIN_FOLD_ROOM,
    MIN_MESSAGE_ROOM,
    FoldReason,
    SummaryVersion,
)
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INPUT, SUMMARY_PREAMBLE
from memora.text.tokens import count_message, request_input_tokens


@dataclass(frozen=True)
class History:
    """One conversation's messages and its running summary.

    ``messages`` are user/assistant pairs, possibly followed by one pending user message;
    ``counts[i]`` is the local tokens ``messages[i]`` adds to a request (tokenized once, as it
    joined). ``versions`` are the summary's states, oldest first: ``messages[:folded]`` are
    folded into ``summary``, the other finished pairs are sent verbatim while they fit.
    ``fold_plan`` is the plan that made the last version, for "why did it fold?" (None before
    any fold in this session: a restored conversation keeps its versions, not their plans).
    """

    messages: tuple[Message, ...] = ()
    counts: tuple[int, ...] = ()
    versions: tuple[SummaryVersion, ...] = ()
    fold_plan: TurnPlan | None = None

    @property
    def summary(self) -> str:
        """The running summary; empty before the first fold."""
        return self.versions[-1].text if self.versions else ""

    @property
    def folded(self) -> int:
        """How many messages, from the first, the summary holds (the article's
        ``summarized_message_count``)."""
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
        """The local tokens of every message: what sending the whole history would cost,
        instructions aside."""
        return sum(self.counts)

    @property
    def finished_counts(self) -> tuple[int, ...]:
        """Each message's local tokens for the finished user/reply pairs (a pending message is left
        out)."""
        return self.counts[: self.finished]

    @property
    def unfolded_messages(self) -> tuple[Message, ...]:
        """The messages not yet folded into the summary, a pending one included."""
        return self.messages[self.folded :]

    def unfolded(self, end: int) -> tuple[int, ...]:
        """The local tokens of each message not yet folded, before index ``end``: what the planner
        weighs."""
        return self.counts[self.folded : end]

    def adding(self, message: Message, tokens: int) -> History:
        """This history with ``message`` (of ``tokens`` local tokens) at its end."""
        return replace(self, messages=(*self.messages, message), counts=(*self.counts, tokens))

    def without_pending(self) -> History:
        """This history without its pending user message; itself when none is pending."""
        return (
            replace(self, messages=self.messages[:-1], counts=self.counts[:-1])
            if self.pending
            else self
        )

    def folding(self, version: SummaryVersion, fold_plan: TurnPlan | None) -> History:
        """This history with ``version`` as its summary, written as ``fold_plan`` planned: the
        version keeps the plan's reason, so that every fold can say why it happened, a saved one
        too."""
        reason: FoldReason = "none" if fold_plan is None else fold_plan.reason
        versions = (*self.versions, replace(version, reason=reason))
        return replace(self, versions=versions, fold_plan=fold_plan)


@dataclass(frozen=True)
class PlanSizes:
    """The local token sizes a plan weighs besides the conversation.

    ``fixed``: the instructions and the reply's priming. ``full_summary``: a summary message at its
    full allowed length, reserved whenever a fold writes a new summary (its length is not known
    before it is written). ``fold_room``: what one summary request has for the messages it folds.
    ``budget``: the local input budget.
    """

    fixed: int
    full_summary: int
    fold_room: int
    budget: int


@dataclass(frozen=True)
class TurnPlan:
    """What one request will send, and what must be folded into the summary first.

    ``fold`` is how many of the unfolded messages (whole pairs, oldest first) are folded before
    sending; ``pieces`` how many pairs each of its summary requests takes (``fold_pieces``: empty
    when nothing folds). ``reason`` says why the last of them had to go (``FoldReason``; ``none``
    when nothing folds). The planned request, part by part, against ``budget``: ``fixed`` (the
    instructions and the reply's priming), ``summary`` (the summary message as it is, or reserved
    at full length when anything folds), ``window`` (the unfolded messages that stay verbatim) and
    ``message``, the message planned for: the real one, or before it is known (a fold ahead), the
    one its policy expects. Every figure is the plan's own: a view reads them, it never derives one
    part from the others.
    """

    fold: int
    pieces: tuple[int, ...]
    reason: FoldReason
    fixed: int
    summary: int
    window: int
    message: int
    budget: int

    @property
    def input_tokens(self) -> int:
        """The planned size of the request: the left side of the budget inequality
        (``request_tokens``)."""
        return self.fixed + self.summary + self.window + self.message

    @property
    def alone(self) -> int:
        """The instructions with the message and nothing else: the smallest request that could
        carry it."""
        return self.fixed + self.message

    @property
    def fits(self) -> bool:
        """Whether the planned request fits the budget (False only when even folding everything
        cannot make it)."""
        return within_budget(self.input_tokens, self.budget)

    def spans(self, start: int) -> list[tuple[int, int]]:
        """The history span each summary request folds, oldest first, for unfolded messages from
        index ``start``."""
        bounds = list(accumulate((2 * pairs for pairs in self.pieces), initial=start))
        return list(pairwise(bounds))

    @property
    def message_fits(self) -> bool:
        """Whether the message fits beside the instructions at all; when it does not, no fold can
        help."""
        return self.alone <= self.budget


def plan_turn(
    unfolded: Sequence[int],
    *,
    message: int | None,
    summary: int,
    sizes: PlanSizes,
    policy: Policy,
    max_recent_turns: int,
    at_least: int = 0,
) -> TurnPlan:
    """Plans a request from token counts, so that it fits the budget: the article's rule.

    ``unfolded`` are the tokens of each finished message not yet folded (whole pairs, oldest first);
    ``message`` those of the current user message, or None between turns (a fold ahead: the policy's
    expected message decides, and only what is certain to fold whatever the message is folds now);
    ``summary`` those of the summary message as it is (0 for none). The request must satisfy the
    budget inequality

        fixed + summary' + sum(unfolded[fold:]) + message <= budget

    where summary' is ``summary`` when nothing is folded and ``full_summary`` otherwise
    (``request_tokens``). This inequality is checked here and nowhere else: the memory and the
    replay send what ``fold_until_it_fits`` builds from these plans. First the policy folds what it
    folds anyway (the window: every pair beyond the last ``max_recent_turns``,
    ``older_than_window``); then, while the inequality fails, the oldest remaining pair leaves.
    ``at_least`` is, whatever the counts say, the fewest messages to fold (the server counted the
    request and disagreed, so one more pair leaves). When everything is folded and the request still
    does not fit, the plan says so (``fits`` is False); it never raises.
    """
    expected = policy.expected_message(unfolded[::2]) if message is None else message
    older = older_than_window(len(unfolded), max_recent_turns)
    plan = _rule(unfolded, expected, summary, sizes, policy, older, at_least)
    if message is None and plan.fold:
        shortest = _rule(unfolded, SHORTEST_MESSAGE, summary, sizes, policy, older, 0)
        certain = policy.certain_fold(plan.fold, shortest.fold, older)
        if certain == plan.fold:
            return plan
        # The fold ahead folds less than the expected message needs: the plan is that fold's own,
        # with its own size and reason (the shortest message's, or the policy's own first fold).
        if certain == shortest.fold:
            reason = shortest.reason
        else:
            reason = policy.first_fold(
                unfolded, plan_size(unfolded, expected, summary, sizes), sizes.budget, older
            )[1]
        return _folding(unfolded, certain, reason, expected, summary, sizes)
    return plan


SHORTEST_MESSAGE = count_message("user", "")
"""The tokens of the shortest possible message: what a fold ahead under the article's window plans
for."""


def older_than_window(unfolded: int, max_recent_turns: int) -> int:
    """How many of ``unfolded`` messages (whole pairs, oldest first) are older than the recent
    window of ``max_recent_turns`` pairs: what the article's window folds anyway; 0 while it holds
    them all."""
    return max(0, unfolded - 2 * max_recent_turns)


def within_budget(request: int, budget: int) -> bool:
    """The budget inequality, the article's rule: a request of ``request`` local tokens fits
    ``budget`` when it is no larger. Every plan's verdict is this one comparison."""
    return request <= budget


def request_tokens(fixed: int, summary: int, window: Sequence[int], message: int) -> int:
    """The local tokens of a reply request: the left side of the budget inequality.

    ``fixed``: the instructions and the reply's priming; ``summary``: the summary message (0 for
    none); ``window``: each message sent verbatim; ``message``: the current user message."""
    return fixed + summary + sum(window) + message


def _rule(
    unfolded: Sequence[int],
    message: int,
    summary: int,
    sizes: PlanSizes,
    policy: Policy,
    older: int,
    at_least: int,
) -> TurnPlan:
    """``plan_turn`` for one ``message``: the policy's own fold, then pairs while over budget."""
    size = plan_size(unfolded, message, summary, sizes)
    fold, reason = policy.first_fold(unfolded, size, sizes.budget, older)
    if fold < at_least:
        fold = min(at_least, len(unfolded))
        reason = "budget"
    while not within_budget(size(fold), sizes.budget) and fold < len(unfolded):
        fold += 2
        reason = "budget"
    return _folding(unfolded, fold, reason, message, summary, sizes)


def plan_size(
    unfolded: Sequence[int], message: int, summary: int, sizes: PlanSizes
) -> Callable[[int], int]:
    """The request's size once ``fold`` of the ``unfolded`` messages have left, as a function of
    ``fold``: a full summary reserved if any did (``request_tokens``)."""

    def size(fold: int) -> int:
        summary_sent = sizes.full_summary if fold else summary
        return request_tokens(sizes.fixed, summary_sent, unfolded[fold:], message)

    return size


def _folding(
    unfolded: Sequence[int],
    fold: int,
    reason: FoldReason,
    message: int,
    summary: int,
    sizes: PlanSizes,
) -> TurnPlan:
    """The plan that folds the first ``fold`` of the ``unfolded`` messages for ``reason``, part by
    part: the same parts ``request_tokens`` adds up."""
    return TurnPlan(
        fold=fold,
        pieces=fold_pieces(_pairs(unfolded, fold), sizes.fold_room),
        reason=reason if fold else "none",
        fixed=sizes.fixed,
        summary=sizes.full_summary if fold else summary,
        window=sum(unfolded[fold:]),
        message=message,
        budget=sizes.budget,
    )


def _pairs(unfolded: Sequence[int], fold: int) -> list[int]:
    """The tokens of each pair among the first ``fold`` messages."""
    return [unfolded[i] + unfolded[i + 1] for i in range(0, fold, 2)]


def fold_pieces(pairs: Sequence[int], room: int) -> tuple[int, ...]:
    """How many pairs each summary request folds, oldest first, so that each fits ``room``.

    ``pairs`` are the tokens of each pair to fold. Consecutive pairs share a request while their
    total fits ``room``; a pair larger than ``room`` goes alone (its messages are then cut to fit).
    ``()`` for no pairs.
    """
    pieces: list[int] = []
    size = room + 1
    for tokens in pairs:
        if pieces and size + tokens <= room:
            pieces[-1] += 1
            size += tokens
        else:
            pieces.append(1)
            size = tokens
    return tuple(pieces)


def summary_tokens(summary: str) -> int:
    """The local tokens of the summary message that carries ``summary`` (preamble included); 0 for
    no summary.

    The one count of a summary message: the memory's plan, the replay and the Status panel all use
    it."""
    return count_message("developer", SUMMARY_PREAMBLE + summary) if summary else 0


# -- the fixed parts of every request --------------------------------------------------------------


@dataclass(frozen=True)
class Sizes:
    """Local o200k_base sizes of a memory's fixed request parts, from its prompts and summary cap.

    Each size is computed once per instance (``request_sizes`` shares one instance per prompts and
    cap): a turn plans with them several times, and they change only with a setting.
    """

    model: str
    system_prompt: str
    summary_instructions: str
    max_summary_tokens: int

    @cached_property
    def fixed(self) -> int:
        """The instructions (as a system message) and the reply's priming: a request with no
        message, counted as every request is (``request_input_tokens``)."""
        return request_input_tokens(self.system_prompt, ())

    @cached_property
    def preamble(self) -> int:
        """The summary message without its summary: what carries it."""
        return count_message("developer", SUMMARY_PREAMBLE)

    @cached_property
    def full_summary(self) -> int:
        """A summary message at its full allowed length (``at_full_length``)."""
        return at_full_length(self.preamble, self.max_summary_tokens)

    @cached_property
    def summary_frame(self) -> int:
        """A summary request without its summary and messages: instructions, layout and priming."""
        layout = count_message("user", SUMMARY_INPUT.format(summary="(empty)", transcript=""))
        return request_input_tokens(self.summary_instructions, (layout,))

    @cached_property
    def summary_request(self) -> int:
        """A summary request without its messages: its frame and a full-length summary's text."""
        return at_full_length(self.summary_frame, self.max_summary_tokens)

    @cached_property
    def minimum_budget(self) -> int:
        """The smallest local budget for a reply (instructions, full summary, a short message) and a
        summary request."""
        return max(
            self.fixed + self.full_summary + MIN_MESSAGE_ROOM, self.summary_request + MIN_FOLD_ROOM
        )

    def fold_room(self, local_budget: int) -> int:
        """Local tokens one summary request has for the messages it folds, within
        ``local_budget``."""
        return max(MIN_FOLD_ROOM, local_budget - self.summary_request)


def at_full_length(carrier: int, cap: int) -> int:
    """A summary at its full allowed length, ``cap`` tokens, in what carries it (``carrier``: the
    summary message's preamble, or a summary request's frame); +1: the carrier and the summary may
    not split at a token boundary."""
    return carrier + cap + 1


@lru_cache(maxsize=128)  # bounded: each budget a sidebar tries is a cap under the watermark policy
def request_sizes(
    model: str, system_prompt: str, summary_instructions: str, max_summary_tokens: int
) -> Sizes:
    """The one ``Sizes`` of these prompts and cap, its sizes computed on first use."""
    return Sizes(model, system_prompt, summary_instructions, max_summary_tokens)


def check_limits(
    budget: int, recent: int, floor: int, output: int, context_window: int | None
) -> None:
    """Raises ValueError for a window below 0, a budget below ``floor``, or budget plus ``output``
    over ``context_window``."""
    if recent < 0:
        raise ValueError(f"max_recent_turns must be 0 or more, not {recent}")
    if budget < floor:
        raise ValueError(
            f"max_input_tokens must be at least {floor}: the instructions and a full summary "
            "already need that much, before any message."
        )
    if context_window is not None and budget + output > context_window:
        raise ValueError(
            f"max_input_tokens ({budget}) plus the largest output ({output}) must fit "
            f"the server's context window of {context_window} tokens."
        )
