"""What the server's own counts teach a memory: the seam between the local tokens a plan counts and the server's.

The memory owns one ``Budget`` per backend (``memory.budget``); only what the server itself counted changes it: its
tokenizer endpoint where it has one, the usage it reports, and the figures of a context-overflow error. Every
computation is ``plan``'s (pure); this object only keeps what was learned.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from memora.memory import plan
from memora.memory.backend import Backend, BackendError, ContextOverflowError
from memora.memory.plan import TurnPlan
from memora.memory.values import PreparedContext
from memora.text.calibration import Calibration, request_kinds
from memora.text.messages import Message
from memora.text.usage import Ledger, UsageRecord


class Budget:
    """What the server's own counts teach a memory, per backend: the seam between local tokens and the server's.

    ``calibration`` turns the local o200k_base tokens a plan counts into the server's, per kind of text, learned only
    from figures the server itself counted (``memora.text.calibration``); ``server_window`` is the server's context
    window once an overflow error gave it, which then lowers the budget in force beside ``output`` (the most one request
    of the memory may write: a reply or a summary). Where the backend counts a request
    itself (``Backend.count_request``), that count holds the budget and the plan only has to be close.
    """

    def __init__(self, backend: Backend, model: str, output: int) -> None:
        self.backend, self.model, self.output = backend, model, output
        self.calibration = Calibration(exact=backend.profile.counts_like_o200k)
        self.server_window: int | None = None

    def in_force(self, max_input_tokens: int) -> int:
        return plan.budget_in_force(max_input_tokens, self.server_window, self.output)

    def too_small(self) -> bool:
        """Whether no fold or cut can make a request fit the server's window beside ``output``: only a setting can."""
        return plan.window_too_small(self.server_window, self.output)

    def local(self, budget: int, texts: Sequence[str]) -> int:
        """``budget`` in local tokens; weighed by the ``texts`` a request may carry where the server counts each one."""
        return plan.local_budget(self.calibration, budget, texts if self.source() is not None else None)

    def source(self) -> str | None:
        """The server's endpoint that counts each request; None where local counts must do, or are its own."""
        return plan.exact_source(self.backend, self.model, self.calibration)

    @property
    def words(self) -> str:
        """Which count the budget uses, in words, for the REPL."""
        return plan.counting_words(self.source(), self.calibration, self.backend.offline)

    def counter(self) -> Callable[[str, str, Sequence[Message]], int | None] | None:
        return plan.exact_counter(self.backend, self.calibration)

    def exact(self, instructions: str, messages: Sequence[Message]) -> int | None:
        """The server's own count of a request, template included; None where local counts must do."""
        count = self.counter()
        return None if count is None else count(self.model, instructions, messages)

    def see(self, texts: Sequence[str]) -> None:
        self.calibration = self.calibration.seeing(texts)

    def learn(self, local: int, server: int, texts: Sequence[str]) -> None:
        """Learns a count the server itself made of a request of ``local`` tokens carrying ``texts``."""
        self.calibration = self.calibration.learn(local, server, request_kinds(local, texts))

    def learn_overflow(self, overflow: ContextOverflowError, local: int, texts: Sequence[str]) -> None:
        """Learns the server's count and window from an overflow error on a request of ``local`` tokens and ``texts``."""
        self.calibration, self.server_window = plan.overflow_learned(overflow, local, self.calibration, self.server_window, texts)

    def counted(self, prepared: PreparedContext) -> PreparedContext:
        """``prepared`` with the server's own count of it, where it counts requests; that count is learned."""
        if (exact := self.exact(prepared.instructions, prepared.context_messages)) is None:
            return prepared
        self.learn(prepared.input_tokens, exact, prepared.texts)
        return replace(prepared, server_input_tokens=exact)

    def check_alone(self, turn_plan: TurnPlan, text: str | None, system_prompt: str, summary: str, in_force: int) -> None:
        """Raises ContextBudgetError unless the plan's message fits beside the instructions: by the plan, else by the
        server's own count where it has one (``text``; None for the message a fold ahead expects)."""
        if turn_plan.message_fits:
            return
        exact = None if text is None else self.exact(system_prompt, [Message("user", text)])
        if exact is None or exact > in_force:
            raise plan.budget_error(self.calibration, turn_plan.alone + plan.summary_tokens(summary), exact, in_force)

    def record(self, ledger: Ledger, record: UsageRecord, texts: Sequence[str]) -> None:
        """Appends ``record`` to ``ledger``; a trusted figure the server counted itself (not one it estimated, nor one its
        tokenizer's own count contradicts) is learned, by the kinds of ``texts``."""
        if record.trusted and record.teaches and record.server_counted_input_tokens is None and record.input_tokens is not None:
            self.learn(record.counted_input_tokens, record.input_tokens, texts)
        ledger.append(record)


def overflow_error() -> BackendError:
    """The error for a server whose context window no fold or cut can fit: only a setting can."""
    return BackendError(
        "The model server's context window is smaller than Memora's budget, even after folding and cutting to the "
        "figures it gave. Lower MEMORA_MAX_INPUT_TOKENS or set MEMORA_CONTEXT_WINDOW to the server's context size "
        "(llama.cpp: --n_ctx). Your message is kept."
    )
