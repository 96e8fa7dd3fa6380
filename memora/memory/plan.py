"""The plan: one pure function, ``plan_turn``, decides every request a turn makes; and the pure
values it weighs.

It works on token counts alone (no messages, no model, no state), so a student can read the
article's rule in one place and test it with plain numbers. Everything that sends a request asks it:
the memory before each reply and between turns (``ShortTermMemory.plan``; ``prefold`` carries out
the fold ahead), the what-if replay (``memora.teaching.replay``) and the bench, through the memory.
What a fold policy adds to the rule is its own object (``memora.memory.policies``); the budget
inequality is the same for all of them.

Read in this order: ``History`` (the conversation as a value: which messages the summary holds,
which are still verbatim), ``PlanSizes``/``TurnPlan``/``plan_turn`` (the rule), ``Sizes`` (the fixed
parts of every request, from the prompts and the summary cap), what a reply request sends in the
wire's roles (``lead_messages``, ``sources``), and the budget in force (the server's tokens, its
context window, the local tokens a plan counts). Everything here is a pure function of its arguments
or a frozen value: the memory (``core``) keeps the state and does the I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from itertools import accumulate, pairwise

from memora.memory.backend import ContextOverflowError, ServerProfile
from memora.memory.policies import FoldReason, Policy
from memora.memory.values import (
    MIN_FOLD_ROOM,
    MIN_MESSAGE_ROOM,
    ContextBudgetError,
    PreparedContext,
    Source,
    SummaryVersion,
)
from memora.text.calibration import Calibration, Kind, kind_tokens, request_kinds
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_INPUT, SUMMARY_PREAMBLE
from memora.text.tokens import REPLY_PRIMING_TOKENS, count_message


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

    def pairs_through(self, end: int) -> list[int]:
        """The local tokens of each unfolded pair before index ``end``, oldest first: what a fold
        through ``end`` takes.

        Raises ValueError unless ``end`` is even, past the folded messages and within the finished
        pairs.
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
        return (
            replace(self, messages=self.messages[:-1], counts=self.counts[:-1])
            if self.pending
            else self
        )

    def folding(self, version: SummaryVersion, fold_plan: TurnPlan | None) -> History:
        """This history with ``version`` as its summary, written as ``fold_plan`` planned."""
        return replace(self, versions=(*self.versions, version), fold_plan=fold_plan)


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
    when nothing folds). ``input_tokens`` is the planned size of the request, with a full-length
    summary reserved when anything folds, against ``budget``. ``alone`` is the instructions with the
    message and nothing else: the smallest request that could carry it. ``message`` is the message
    planned for: the real one, or before it is known (a fold ahead), the one its policy expects.
    """

    fold: int
    pieces: tuple[int, ...]
    reason: FoldReason
    input_tokens: int
    budget: int
    alone: int
    message: int

    @property
    def fits(self) -> bool:
        """Whether the planned request fits the budget (False only when even folding everything
        cannot make it)."""
        return self.input_tokens <= self.budget

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

    where summary' is ``summary`` when nothing is folded and ``full_summary`` otherwise. First the
    policy folds what it folds anyway (the window: every pair beyond the last ``max_recent_turns``);
    then, while the inequality fails, the oldest remaining pair leaves. ``at_least`` is, whatever
    the counts say, the fewest messages to fold (the server counted the request and disagreed, so
    one more pair leaves). When everything is folded and the request still does not fit, the plan
    says so (``fits`` is False); it never raises.
    """
    expected = policy.expected_message(unfolded[::2]) if message is None else message
    plan = _rule(unfolded, expected, summary, sizes, policy, max_recent_turns, at_least)
    if message is None and plan.fold:
        shortest = _rule(unfolded, SHORTEST_MESSAGE, summary, sizes, policy, max_recent_turns, 0)
        older = max(0, len(unfolded) - 2 * max_recent_turns)
        certain = policy.certain_fold(plan.fold, shortest.fold, older)
        return TurnPlan(
            certain, fold_pieces(_pairs(unfolded, certain), sizes.fold_room), *_tail(plan)
        )
    return plan


SHORTEST_MESSAGE = count_message("user", "")
"""The tokens of the shortest possible message: what a fold ahead under the article's window plans
for."""


def _rule(
    unfolded: Sequence[int],
    message: int,
    summary: int,
    sizes: PlanSizes,
    policy: Policy,
    recent: int,
    at_least: int,
) -> TurnPlan:
    def size(fold: int) -> int:
        return (
            sizes.fixed + (sizes.full_summary if fold else summary) + sum(unfolded[fold:]) + message
        )

    fold, reason = policy.first_fold(unfolded, size, sizes.budget, recent)
    if fold < at_least:
        fold = min(at_least, len(unfolded))
        reason = "budget"
    while size(fold) > sizes.budget and fold < len(unfolded):
        fold += 2
        reason = "budget"
    reason = reason if fold else "none"
    pieces = fold_pieces(_pairs(unfolded, fold), sizes.fold_room)
    return TurnPlan(fold, pieces, reason, size(fold), sizes.budget, sizes.fixed + message, message)


def _pairs(unfolded: Sequence[int], fold: int) -> list[int]:
    return [unfolded[i] + unfolded[i + 1] for i in range(0, fold, 2)]


def _tail(plan: TurnPlan) -> tuple[FoldReason, int, int, int, int]:
    return plan.reason, plan.input_tokens, plan.budget, plan.alone, plan.message


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
        """The instructions (as a system message) and the reply's priming."""
        return (
            count_message("system", self.system_prompt) if self.system_prompt else 0
        ) + REPLY_PRIMING_TOKENS

    @cached_property
    def full_summary(self) -> int:
        """A summary message at its full allowed length; +1: preamble and summary may not split at a
        token boundary."""
        return count_message("developer", SUMMARY_PREAMBLE) + self.max_summary_tokens + 1

    @cached_property
    def summary_request(self) -> int:
        """A summary request without its messages: instructions, layout, priming and a full-length
        summary."""
        layout = count_message("user", SUMMARY_INPUT.format(summary="(empty)", transcript=""))
        return (
            count_message("system", self.summary_instructions)
            + layout
            + REPLY_PRIMING_TOKENS
            + self.max_summary_tokens
            + 1
        )

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


# -- what a reply request sends, in the wire's roles -----------------------------------------------


def lead_messages(profile: ServerProfile, system_prompt: str, summary: str) -> list[Message]:
    """The messages before the recent window: the summary, or the one system message; none when
    empty."""
    if not profile.single_system_message:
        return [Message("developer", SUMMARY_PREAMBLE + summary)] if summary else []
    parts = [system_prompt.rstrip(), SUMMARY_PREAMBLE + summary] if summary else [system_prompt]
    system = "\n\n".join(part for part in parts if part)
    return [Message("system", system)] if system else []


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
    start: int,
    current: int,
    folding: tuple[int, int],
) -> PreparedContext:
    """The reply request with ``history.messages[start:current]`` as its window and ``[current]`` as
    its message, in the wire's roles; ``folding`` is this turn's summary tokens so far and the
    messages it newly folded. Counted locally, each history message at its kept count and the lead
    message (summary, or the one system message) here; the server's own count, where it counts
    requests, is the memory's to add (``Server.counted``)."""
    spent, folded = folding
    lead = lead_messages(profile, system_prompt, history.summary)
    messages = (*lead, *history.messages[start : current + 1])
    tokens = (
        *(count_message(m.role, m.content) for m in lead),
        *history.counts[start : current + 1],
    )
    instructions = request_instructions(profile, system_prompt)
    origins = sources(profile, history.summary, len(lead), current - start)
    input_tokens = local_input_tokens(instructions, tokens)
    return PreparedContext(instructions, messages, origins, tokens, input_tokens, spent, folded)


def local_input_tokens(instructions: str, message_tokens: Sequence[int]) -> int:
    """A request's local input tokens from its messages' counts, as ``LocalTokenCounter`` adds them:
    the reply's priming, the messages, and the instructions as a system message (none when empty).
    """
    return (
        REPLY_PRIMING_TOKENS
        + sum(message_tokens)
        + (count_message("system", instructions) if instructions else 0)
    )


# -- the budget in force, in the server's tokens and in the local tokens a plan counts -------------


def budget_in_force(max_input_tokens: int, server_window: int | None, output: int) -> int:
    """``max_input_tokens``, or less when the server's context window leaves less room beside the
    largest ``output``."""
    if server_window is None:
        return max_input_tokens
    return max(1, min(max_input_tokens, server_window - output))


def window_too_small(server_window: int | None, output: int) -> bool:
    """Whether the server's context window, learned from an overflow error, cannot hold even the
    largest ``output``: no fold or cut can make a request fit it, and only a setting can."""
    return server_window is not None and server_window <= output


def local_budget(calibration: Calibration, budget: int, texts: Sequence[str] | None = None) -> int:
    """``budget`` in local tokens, as the calibration makes it hold by the server's count.

    Without ``texts``, every local token is planned at the highest ratio among the kinds of text
    seen: a plan must hold whatever share of Chinese the request ends up with. Where the server
    counts each request before it is sent, that count holds the budget and the plan only has to be
    close: ``texts`` are what a request may carry (instructions, summary, unfolded messages), and
    each kind's ratio is weighed by its share of them, so that English instructions are not planned
    as Chinese.
    """
    if texts is None:
        return calibration.local_budget(budget)
    kinds: dict[Kind, int] = {}
    for text in texts:
        for kind, tokens in kind_tokens(text).items():
            kinds[kind] = kinds.get(kind, 0) + tokens
    return math.floor(budget / calibration.mix_ratio(kinds))


def counting_words(source: str | None, calibration: Calibration, offline: bool = False) -> str:
    """Which count the budget uses, in words, for the REPL; ``offline``: the offline engine, no
    server behind it."""
    if offline:
        return "local o200k_base (offline: nothing is billed)"
    if source is not None:
        return f"the server's tokenizer, exact ({source})"
    if calibration.exact:
        return "local o200k_base, the server's own tokenizer: exact"
    return "local, with a learned margin"


def overflow_learned(
    overflow: ContextOverflowError,
    local: int,
    calibration: Calibration,
    window: int | None,
    texts: Sequence[str],
) -> tuple[Calibration, int | None]:
    """The calibration and server window after a context-overflow error on a request of ``local``
    tokens and ``texts``."""
    if overflow.prompt_tokens is not None:
        calibration = calibration.learn(local, overflow.prompt_tokens, request_kinds(local, texts))
    if overflow.window is not None:
        window = overflow.window if window is None else min(window, overflow.window)
    elif overflow.prompt_tokens is None:
        # No figure at all: plan as if the server counted a quarter more than the margin did.
        calibration = calibration.learn(
            local, math.ceil(calibration.server_estimate(local) * 1.25), request_kinds(local, texts)
        )
    return calibration, window


def budget_error(
    calibration: Calibration, local_tokens: int, exact: int | None, budget: int
) -> ContextBudgetError:
    """The smallest request is over ``budget``: by the server's ``exact`` count, else by the
    calibration's estimate."""
    return ContextBudgetError(
        exact if exact is not None else calibration.server_estimate(local_tokens), budget
    )
