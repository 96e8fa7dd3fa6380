"""Peer memory libraries, driven unchanged on the benchmark's scripts (``python -m benchmarks.memory --peers``).

Each peer keeps its own memory class and its own fake model: a one-method
subclass of the library's fake (LangChain's ``FakeListChatModel``, LlamaIndex's
``MockLLM``) that records every call and returns the same bounded extractive
summary as Memora's recording backend (``merge_summary`` of the user's new
statements into the previous summary, at most ``SUMMARY_TOKEN_CAP`` tokens).
Both what a peer sends for a reply (the system prompt + its memory's messages
+ the current message) and every summary prompt it sends are counted with
o200k_base, framing included, by the same ``RecordingBackend`` as Memora's
strategies, so ``run.token_figures`` reads them alike.

Where a library takes a token counter, it gets o200k_base; what is left is
what its count leaves out. Each peer runs twice: ``budget`` (its knob named as
the budget B, default 1,000 tokens, and R = 3 recent turns where a knob exists)
and ``fitted`` (the knob lowered for what the library's count leaves out). A
peer whose knob counts tokens (``holdable``) runs a third time, ``lowered``: its
fitted knob lowered by 5% of B at a time until none of its reply requests goes
over B on the script it is measured on (``run.lowest_holding``), so that it is
compared at its best with a memory that never goes over. Trimming its knob
trims what it sends verbatim: the bench reports, beside the cost, how many
previous pairs each reply request sent whole (``Call.recent_pairs``).
F is the system prompt with its framing and the reply priming (what Memora's
count adds to every request), S a summary at the cap with its message framing,
A a typical current message (the median scripted user message), T the
per-message framing (3 tokens).

How each knob was mapped (budget -> fitted; what the library's own count leaves out):

- langmem ``summarize_messages``: ``max_tokens=B`` (summary reserve ``max_summary_tokens`` 256, its
  default) -> ``max_tokens=B-F``, ``max_summary_tokens=S``. Leaves out the system prompt, which the
  app passes as instructions, not in ``messages``. No recent-turns knob.
- LangChain ``ConversationSummaryBufferMemory``: ``max_token_limit=B`` -> ``B-F-S-A``. Leaves out
  the system prompt, the summary and the current message (it prunes after saving a turn). No
  recent-turns knob.
- LangChain v1 ``SummarizationMiddleware``: ``trigger=("tokens", B)``, ``keep=("messages", 2R+1)``
  (the R last pairs and the current message) -> ``trigger=("tokens", B-F)``. Leaves out the system
  prompt, which is kept outside the agent state.
- LlamaIndex ``ChatSummaryMemoryBuffer``: ``token_limit=B`` -> ``B-F-S-T*(2R+2)``. Leaves out the
  system prompt, the new summary (put in front of a history that already fills the limit) and
  message framing (it counts the contents joined by spaces). No recent-turns knob.
- LlamaIndex ``Memory`` with no memory blocks: ``token_limit=B`` (history gets its
  ``chat_history_token_ratio``, 0.7, of it) -> ``(B-F)/0.7``, so that the history's share is B-F.
  Leaves out the system prompt. With no memory block it summarizes nothing: flushed messages are gone.
- OpenAI Agents SDK ``SQLiteSession``: ``SessionSettings(limit=2R)`` items -> ``limit=2R-2`` (the
  current turn as one of the R). It counts items, not tokens; the SDK ships no summarizing session.

LangChain's ``ConversationSummaryBufferMemory`` summarizes in ``save_context``,
after the reply: its summary requests are recorded as after the reply (no
reply waits on them), as Memora's prefold is. Every other summarizing peer
summarizes before the reply it makes room for.
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from benchmarks.memory.recording import SUMMARY_TOKEN_CAP, Call, RecordingBackend
from benchmarks.memory.script import make_script
from benchmarks.memory.strategies import Limits, _stream_until_done
from memora.backends.base import ReplyRequest
from memora.backends.extractive import merge_summary
from memora.memory import DEFAULT_MODEL
from memora.messages import Message
from memora.prompts import SUMMARY_WORD_LIMIT, SYSTEM_PROMPT
from memora.tokens import TOKENS_PER_MESSAGE, LocalTokenCounter, count_message, count_text, o200k_base, truncate_text


@dataclass(frozen=True)
class PeerLibrary:
    """One optional library: the modules it must import and the pip requirement that brings them."""

    label: str
    modules: tuple[str, ...]
    requirement: str


LIBRARIES: dict[str, PeerLibrary] = {
    "langchain-classic": PeerLibrary("LangChain ConversationSummaryBufferMemory", ("langchain_classic",), "langchain-classic>=1.0,<2"),
    "langchain": PeerLibrary("LangChain v1 SummarizationMiddleware", ("langchain.agents.middleware",), "langchain>=1.0,<2"),
    "langmem": PeerLibrary("langmem summarize_messages", ("langmem",), "langmem>=0.0.29,<0.1"),
    "llama-index-core": PeerLibrary("LlamaIndex ChatSummaryMemoryBuffer and Memory", ("llama_index.core",), "llama-index-core>=0.14,<0.15"),
    "openai-agents": PeerLibrary("OpenAI Agents SDK trimming session", ("agents",), "openai-agents>=0.24,<0.25"),
}


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_libraries(importable: Callable[[str], bool] = _importable) -> list[str]:
    """The keys of ``LIBRARIES`` whose modules cannot be imported here."""
    return [key for key, lib in LIBRARIES.items() if not all(importable(m) for m in lib.modules)]


def missing_message(missing: Sequence[str]) -> str:
    """What ``--peers`` prints when libraries are missing: which, and the exact pip command."""
    if not missing:
        return ""
    names = "; ".join(f"{LIBRARIES[key].label} ({key})" for key in missing)
    requirements = " ".join(f"'{LIBRARIES[key].requirement}'" for key in missing)
    return (
        f"Peers left out, their libraries are not installed: {names}.\n"
        f"Install them with: python -m pip install {requirements}\n"
        "(or all peers: python -m pip install -r requirements-bench.txt)"
    )


# -- what every peer shares ---------------------------------------------------------------------------------


def _fixed_tokens() -> int:
    """F: the system prompt with its framing and the reply priming."""
    return LocalTokenCounter().count(DEFAULT_MODEL, SYSTEM_PROMPT, [])


def _summary_tokens(framing: str = "") -> int:
    """S: a summary at the cap in one message, with the library's framing text."""
    return count_message("system", framing) + SUMMARY_TOKEN_CAP


@cache
def typical_message_tokens(seed: int = 7) -> int:
    """A: the median scripted user message, with its framing."""
    return int(statistics.median(count_message("user", t) for t in make_script(500, seed).user_messages))


def _role(kind: str) -> str:
    return {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system"}.get(kind, "user")


@dataclass
class SummaryRecorder:
    """The peers' summarizer: records each summary prompt and returns Memora's bounded extractive summary.

    It merges into its previous summary the user messages of the conversation
    that appear in the prompt and that no earlier summary took in, so a library
    that re-sends its old summary (as text or as a message) gets the same
    summary as one that does not.
    """

    backend: RecordingBackend
    summary: str = ""
    pending: list[str] = field(default_factory=list)

    def user_said(self, text: str) -> None:
        self.pending.append(text)

    def summarize(self, messages: Sequence[Message]) -> str:
        prompt = "\n".join(m.content for m in messages)
        taken = [text for text in self.pending if text in prompt]
        self.pending = [text for text in self.pending if text not in taken]
        text = merge_summary(self.summary, [Message("user", t) for t in taken], SUMMARY_WORD_LIMIT)
        self.summary = truncate_text(text, SUMMARY_TOKEN_CAP)
        b = self.backend
        b.calls.append(
            Call(b.turn, "summary", LocalTokenCounter().count(DEFAULT_MODEL, "", messages), count_text(self.summary), b.after_reply)
        )
        return self.summary


def _o200k_ids(text: str) -> list[int]:
    return o200k_base().encode_ordinary(text)


def _lc_to_memora(messages: Iterable[Any]) -> list[Message]:
    return [Message(_role(m.type), m.text if hasattr(m, "text") and isinstance(m.text, str) else str(m.content)) for m in messages]


def _lc_token_counter(messages: Iterable[Any]) -> int:
    """o200k_base with per-message framing, for libraries that take a LangChain token counter."""
    return sum(count_message(m.role, m.content) for m in _lc_to_memora(messages))


def _langchain_fake(recorder: SummaryRecorder) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class RecordingFakeListChatModel(FakeListChatModel):
        recorder: Any = None

        def _call(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
            return self.recorder.summarize(_lc_to_memora(messages))

    return RecordingFakeListChatModel(responses=[""], recorder=recorder, custom_get_token_ids=_o200k_ids)


def _llama_fake(recorder: SummaryRecorder) -> Any:
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.core.llms.mock import MockLLM

    class RecordingMockLLM(MockLLM):
        def chat(self, messages: Sequence[Any], **kwargs: Any) -> ChatResponse:
            summary = recorder.summarize([Message(_role(str(m.role.value)), str(m.content or "")) for m in messages])
            return ChatResponse(message=ChatMessage(role="assistant", content=summary))

    return RecordingMockLLM()


class _Peer:
    """Plays a turn as an app would: the memory's messages, the reply request, then the memory's update."""

    name = "peer"
    holdable = False
    """Whether its knob is a token count that ``lower_by`` can lower (see ``lowered_peer``)."""

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        if lower_by and not (fitted and self.holdable):
            raise ValueError(f"{type(self).__name__}: only a fitted token knob can be lowered")
        self.backend = backend
        self.limits = limits
        self.fitted = fitted
        self.lower_by = lower_by
        self.recorder = SummaryRecorder(backend)

    def _knob(self, label: str, knob: str, value: int) -> int:
        """The knob's value less ``lower_by``; names the peer after its variant and, when lowered, the value."""
        value -= self.lower_by
        if self.lower_by:
            self.name = f"{label}, lowered ({knob}={value:,})"
        else:
            self.name = label + (", fitted" if self.fitted else "")
        return value

    def _reply(self, messages: Sequence[Message], began: float) -> tuple[str, float]:
        request = ReplyRequest(DEFAULT_MODEL, SYSTEM_PROMPT, tuple(messages))
        text, _, first = _stream_until_done(self.backend, request, began)
        return text, first

    def _after_reply(self, update: Callable[[], None]) -> None:
        self.backend.after_reply = True
        try:
            update()
        finally:
            self.backend.after_reply = False


class LangmemSummarize(_Peer):
    """langmem's ``summarize_messages`` (what LangGraph's ``SummarizationNode`` runs), stateless: the app keeps the list."""

    holdable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        super().__init__(backend, limits, fitted, lower_by)
        self.model = _langchain_fake(self.recorder)
        self.messages: list[Any] = []
        self.running: Any = None
        max_tokens = limits.max_input_tokens - (_fixed_tokens() if fitted else 0)
        self.knobs: dict[str, int] = {"max_tokens": self._knob("langmem summarize_messages", "max_tokens", max_tokens)}
        if fitted:
            self.knobs["max_summary_tokens"] = _summary_tokens("Summary of the conversation so far: ")

    def play_turn(self, user_text: str) -> float:
        from langchain_core.messages import AIMessage, HumanMessage
        from langmem.short_term import summarize_messages

        began = time.perf_counter()
        self.recorder.user_said(user_text)
        self.messages.append(HumanMessage(user_text, id=f"m{len(self.messages)}"))
        result = summarize_messages(
            self.messages, running_summary=self.running, model=self.model, token_counter=_lc_token_counter, **self.knobs
        )
        self.running = result.running_summary
        text, first = self._reply(_lc_to_memora(result.messages), began)
        self.messages.append(AIMessage(text, id=f"m{len(self.messages)}"))
        return first


class LangchainSummaryBuffer(_Peer):
    """LangChain's ``ConversationSummaryBufferMemory`` (langchain-classic), messages returned as messages."""

    holdable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        from langchain_classic.memory import ConversationSummaryBufferMemory

        super().__init__(backend, limits, fitted, lower_by)
        limit = limits.max_input_tokens
        if fitted:
            limit -= _fixed_tokens() + _summary_tokens() + typical_message_tokens()
        limit = self._knob("LangChain ConversationSummaryBufferMemory", "max_token_limit", limit)
        self.memory = ConversationSummaryBufferMemory(llm=_langchain_fake(self.recorder), max_token_limit=limit, return_messages=True)

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        self.recorder.user_said(user_text)
        history = self.memory.load_memory_variables({})["history"]
        text, first = self._reply([*_lc_to_memora(history), Message("user", user_text)], began)
        self._after_reply(lambda: self.memory.save_context({"input": user_text}, {"output": text}))
        return first


class LangchainMiddleware(_Peer):
    """LangChain v1 ``SummarizationMiddleware``; its ``before_model`` hook is run on the agent state as the agent would."""

    holdable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        from langchain.agents.middleware import SummarizationMiddleware

        super().__init__(backend, limits, fitted, lower_by)
        trigger = limits.max_input_tokens - (_fixed_tokens() if fitted else 0)
        trigger = self._knob("LangChain v1 SummarizationMiddleware", "trigger tokens", trigger)
        self.middleware = SummarizationMiddleware(
            _langchain_fake(self.recorder),
            trigger=("tokens", trigger),
            keep=("messages", 2 * limits.max_recent_turns + 1),
            token_counter=_lc_token_counter,
        )
        self.messages: list[Any] = []

    def play_turn(self, user_text: str) -> float:
        from langchain_core.messages import AIMessage, HumanMessage

        began = time.perf_counter()
        self.recorder.user_said(user_text)
        self.messages.append(HumanMessage(user_text))
        update = self.middleware.before_model({"messages": self.messages}, None)  # type: ignore[arg-type]
        if update:
            # [RemoveMessage(REMOVE_ALL_MESSAGES), summary, *kept]: what the add_messages reducer leaves.
            self.messages = list(update["messages"][1:])
        text, first = self._reply(_lc_to_memora(self.messages), began)
        self.messages.append(AIMessage(text))
        return first


class _LlamaIndexPeer(_Peer):
    """A LlamaIndex memory (``self.memory``) played the way LlamaIndex's chat engines use it: put, get, put."""

    memory: Any

    def play_turn(self, user_text: str) -> float:
        from llama_index.core.base.llms.types import ChatMessage

        began = time.perf_counter()
        self.recorder.user_said(user_text)
        self.memory.put(ChatMessage(role="user", content=user_text))
        history = self.memory.get()
        text, first = self._reply([Message(_role(str(m.role.value)), str(m.content or "")) for m in history], began)
        self.memory.put(ChatMessage(role="assistant", content=text))
        return first


class LlamaChatSummary(_LlamaIndexPeer):
    """LlamaIndex's ``ChatSummaryMemoryBuffer``: the user message is put, then ``get()`` gives the messages to send."""

    holdable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        from llama_index.core.memory import ChatSummaryMemoryBuffer

        super().__init__(backend, limits, fitted, lower_by)
        limit = limits.max_input_tokens
        if fitted:
            limit -= _fixed_tokens() + _summary_tokens() + TOKENS_PER_MESSAGE * (2 * limits.max_recent_turns + 2)
        limit = self._knob("LlamaIndex ChatSummaryMemoryBuffer", "token_limit", limit)
        self.memory = ChatSummaryMemoryBuffer.from_defaults(llm=_llama_fake(self.recorder), token_limit=limit, tokenizer_fn=_o200k_ids)


class LlamaMemory(_LlamaIndexPeer):
    """LlamaIndex's ``Memory`` with no memory blocks: a token-limited short-term queue (nothing is summarized)."""

    holdable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        from llama_index.core.memory import Memory

        super().__init__(backend, limits, fitted, lower_by)
        limit = limits.max_input_tokens if not fitted else int((limits.max_input_tokens - _fixed_tokens()) / 0.7)
        limit = self._knob("LlamaIndex Memory (no blocks)", "token_limit", limit)
        self.memory = Memory.from_defaults(token_limit=limit, tokenizer_fn=_o200k_ids)


class AgentsTrimmingSession(_Peer):
    """The OpenAI Agents SDK's ``SQLiteSession`` with ``SessionSettings(limit=N)``: the last N items, then the new input."""

    def __init__(self, backend: RecordingBackend, limits: Limits, fitted: bool, lower_by: int = 0) -> None:
        from agents import SQLiteSession
        from agents.memory import SessionSettings

        super().__init__(backend, limits, fitted, lower_by)
        self.name = "OpenAI Agents SDK trimming session" + (", fitted" if fitted else "")
        limit = 2 * limits.max_recent_turns - (2 if fitted else 0)
        self.session = SQLiteSession("bench", session_settings=SessionSettings(limit=limit))
        self.loop = asyncio.new_event_loop()

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        items = self.loop.run_until_complete(self.session.get_items())
        history = [Message(_role(str(i["role"])), _item_text(i)) for i in items]
        text, first = self._reply([*history, Message("user", user_text)], began)
        new = [{"role": "user", "content": user_text}, {"role": "assistant", "content": text}]
        self.loop.run_until_complete(self.session.add_items(new))  # type: ignore[arg-type]
        return first

    def __del__(self) -> None:
        loop = getattr(self, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.close()


def _item_text(item: Any) -> str:
    content = item.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


PEERS: dict[str, tuple[str, type[_Peer]]] = {
    "langmem": ("langmem", LangmemSummarize),
    "langchain-summary-buffer": ("langchain-classic", LangchainSummaryBuffer),
    "langchain-middleware": ("langchain", LangchainMiddleware),
    "llamaindex-chat-summary": ("llama-index-core", LlamaChatSummary),
    "llamaindex-memory": ("llama-index-core", LlamaMemory),
    "agents-trimming": ("openai-agents", AgentsTrimmingSession),
}
"""Peer key -> (library key in ``LIBRARIES``, class)."""


def lowered_peer(key: str, lower_by: int) -> Callable[[RecordingBackend, Limits], _Peer]:
    """A factory of peer ``key``, fitted, with its token knob ``lower_by`` tokens lower (``_Peer.holdable`` ones only)."""
    cls = PEERS[key][1]
    return lambda b, lim: cls(b, lim, True, lower_by)


def holdable_peers(missing: Sequence[str] = ()) -> list[str]:
    """The installed peers whose knob counts tokens, so that lowering it can hold their requests to the budget."""
    return [key for key, (library, cls) in PEERS.items() if cls.holdable and library not in missing]


def peer_factories(missing: Sequence[str] = ()) -> dict[str, Callable[[RecordingBackend, Limits], _Peer]]:
    """Every installed peer, twice (``budget`` and ``fitted``), as benchmark factories by name."""
    out: dict[str, Callable[[RecordingBackend, Limits], _Peer]] = {}
    for key, (library, cls) in PEERS.items():
        if library in missing:
            continue
        for fitted in (False, True):
            out[key + ("-fitted" if fitted else "")] = lambda b, lim, cls=cls, fitted=fitted: cls(b, lim, fitted)
    return out
