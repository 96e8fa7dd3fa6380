"""Peer memory libraries, driven unchanged on the benchmark's scripts (``python -m benchmarks.memory --peers``).

Each peer keeps its own memory class and its own fake model: a one-method
subclass of the library's fake (LangChain's ``FakeListChatModel``, LlamaIndex's
``MockLLM``) that records every call and returns the same bounded extractive
summary as Memora's recording backend (``merge_summary`` of the user's new
statements into the previous summary, within the backend's ``summary_cap``,
cut by the backend's ``cut`` rule: its beginning kept, by default). Both what a peer sends for a reply (the system
prompt + its memory's messages + the current message) and every summary prompt
it sends are counted with o200k_base, framing included, by the same
``RecordingBackend`` as Memora's strategies, so ``run.token_figures`` and the
retention probe read them alike. Every peer gets the same summary cap as Memora
(where the library has a summary-size knob, it is set to it too).

Each runs in its documented, recommended form, with one token knob ``K``; F is
the system prompt with its framing and the reply priming (what Memora's count adds
to every request, and what no library counts), B the budget:

- langmem ``summarize_messages``: ``max_tokens_before_summary=B-F`` (summarize
  only when the messages would pass the budget), ``max_tokens=K`` (what is left
  after a summary, summary included), ``max_summary_tokens`` = the cap.
- LangChain v1 ``SummarizationMiddleware``: ``trigger=("tokens", B-F)``,
  ``keep=("tokens", K)``: its documented token keep.
- LangChain ``ConversationSummaryBufferMemory`` (deprecated since langchain 0.3.1):
  ``max_token_limit=K``.
- LlamaIndex ``ChatSummaryMemoryBuffer`` (deprecated; LlamaIndex recommends ``Memory``):
  ``token_limit=K``.
- LlamaIndex ``Memory`` with a ``FactExtractionMemoryBlock`` (its documented memory
  block for facts the user disclosed): ``token_limit=K`` (history gets its
  ``chat_history_token_ratio``, 0.7), ``token_flush_size`` 10% of it (the ratio of its
  defaults), ``max_facts`` about a fact per 15 tokens of the cap; the fake extracts
  the user's new statements as facts and condenses them into the capped summary.
- OpenAI Agents SDK ``SQLiteSession`` with ``SessionSettings(limit=2R)`` items: no
  summary, no token knob (the SDK ships no summarizing session).

``K`` is tuned on one seed and reported on held-out seeds (``run.tune_knob``): the
largest value, in steps of 5% of B from B-F down, whose replies all fit the budget
and all carry the user's current message on the tuning seed.

LangChain's ``ConversationSummaryBufferMemory`` summarizes in ``save_context``,
after the reply: its summary requests are recorded as after the reply (no
reply waits on them), as Memora's prefold is. Every other summarizing peer
summarizes before the reply it makes room for.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Protocol

from benchmarks.memory.recording import Call, RecordingBackend, cut_summary, summary_words
from benchmarks.memory.strategies import Limits, _stream_until_done
from memora.backends.offline import merge_summary
from memora.memory import DEFAULT_MODEL
from memora.memory.backend import ReplyRequest
from memora.text.messages import Message
from memora.text.prompts import SYSTEM_PROMPT
from memora.text.tokens import LocalTokenCounter, count_message, count_text, o200k_base


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


def _role(kind: str) -> str:
    return {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant", "system": "system"}.get(kind, "user")


class Summarizer(Protocol):
    """What writes a peer's summaries: each library's fake model hands it the library's own summary prompt.

    The bench's ``SummaryRecorder`` answers with its extractive summary, which the fakes reshape where a library
    expects another form (LlamaIndex's facts); any other summarizer (a real model, ``real_peers``) is returned to
    the library as it wrote it.
    """

    def user_said(self, text: str) -> None: ...

    def summarize(self, messages: Sequence[Message]) -> str: ...


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
        cap = self.backend.summary_cap
        text = merge_summary(self.summary, [Message("user", t) for t in taken], summary_words(cap))
        self.summary = cut_summary(text, cap, self.backend.cut)
        b = self.backend
        b.calls.append(
            Call(b.turn, "summary", LocalTokenCounter().count(DEFAULT_MODEL, "", messages), count_text(self.summary), b.after_reply)
        )
        return self.summary


def _o200k_ids(text: str) -> list[int]:
    # The libraries re-count every kept message on every turn; a copy of the cached ids keeps their list theirs.
    return list(_o200k_ids_once(text))


@lru_cache(maxsize=1 << 16)
def _o200k_ids_once(text: str) -> tuple[int, ...]:
    return tuple(o200k_base().encode_ordinary(text))


def _compile_each_template_once() -> None:
    """LlamaIndex renders its prompts with ``banks``, which compiles the Jinja template anew on every render.

    The template text is one of a few constants, and a compiled Jinja template renders the same text every time,
    so compiling each text once changes nothing a peer sends; it took about a third of a ``Memory`` replay.
    Only the one-argument form banks uses is reused; any other call goes through untouched.
    """
    from banks.env import env

    if getattr(env.from_string, "compiles_once", False):
        return
    compile_anew = env.from_string

    @lru_cache(maxsize=256)
    def compiled(source: str) -> Any:
        return compile_anew(source)

    def from_string(source: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not isinstance(source, str):
            return compile_anew(source, *args, **kwargs)
        return compiled(source)

    from_string.compiles_once = True  # type: ignore[attr-defined]
    env.from_string = from_string  # type: ignore[method-assign]


def _lc_to_memora(messages: Iterable[Any]) -> list[Message]:
    return [Message(_role(m.type), m.text if hasattr(m, "text") and isinstance(m.text, str) else str(m.content)) for m in messages]


def _lc_token_counter(messages: Iterable[Any]) -> int:
    """o200k_base with per-message framing, for libraries that take a LangChain token counter."""
    return sum(count_message(m.role, m.content) for m in _lc_to_memora(messages))


def _langchain_fake(recorder: Summarizer) -> Any:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class RecordingFakeListChatModel(FakeListChatModel):
        recorder: Any = None

        def _call(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> str:
            return self.recorder.summarize(_lc_to_memora(messages))

    return RecordingFakeListChatModel(responses=[""], recorder=recorder, custom_get_token_ids=_o200k_ids)


_FACT = re.compile(r"<fact>(.*?)</fact>", re.DOTALL)


def _as_facts(lines: Iterable[str]) -> str:
    return "<facts>" + "".join(f"<fact>{line}</fact>" for line in lines) + "</facts>"


def _llama_fake(recorder: Summarizer, facts: bool = False) -> Any:
    """LlamaIndex's ``MockLLM``, recording; with ``facts``, it answers a ``FactExtractionMemoryBlock``'s prompts.

    Extraction gets the summary's lines that are not yet facts; condensing gets the summary's lines,
    which are within the cap. Either way the request is recorded as a summary request.
    """
    from llama_index.core.base.llms.types import ChatMessage, ChatResponse
    from llama_index.core.llms.mock import MockLLM

    _compile_each_template_once()

    def answer(messages: Sequence[Any]) -> str:
        sent = [Message(_role(str(m.role.value)), str(m.content or "")) for m in messages]
        summary = recorder.summarize(sent)
        if not facts or not isinstance(recorder, SummaryRecorder):
            return summary
        lines = [line.removeprefix("- ") for line in summary.splitlines()]
        prompt = sent[-1].content
        if "condensing" not in prompt:
            known = set(_FACT.findall(prompt.split("</existing_facts>")[0]))
            lines = [line for line in lines if line not in known]
        text = _as_facts(lines)
        calls = recorder.backend.calls
        calls[-1] = replace(calls[-1], output_tokens=count_text(text))
        return text

    class RecordingMockLLM(MockLLM):
        def chat(self, messages: Sequence[Any], **kwargs: Any) -> ChatResponse:
            return ChatResponse(message=ChatMessage(role="assistant", content=answer(messages)))

        async def achat(self, messages: Sequence[Any], **kwargs: Any) -> ChatResponse:
            return self.chat(messages, **kwargs)

    return RecordingMockLLM()


class _Peer:
    """Plays a turn as an app would: the memory's messages, the reply request, then the memory's update.

    ``knob`` is the peer's token knob K (None: ``default_knob``); ``tunable`` peers have one.
    """

    label = "peer"
    knob_name = ""
    tunable = True

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        self.backend = backend
        self.limits = limits
        self.recorder: Summarizer = SummaryRecorder(backend) if summarizer is None else summarizer
        self.knob = self.default_knob(limits) if knob is None else knob
        self.name = f"{self.label} ({self.knob_name}={self.knob:,})" if self.knob_name else self.label

    @staticmethod
    def default_knob(limits: Limits) -> int:
        """K before tuning: the budget less what no library counts (F)."""
        return limits.max_input_tokens - _fixed_tokens()

    @staticmethod
    def accepts(knob: int, cap: int) -> bool:
        """Whether the library takes ``knob`` beside a summary cap of ``cap`` tokens (the tuning skips what it refuses)."""
        return knob > 0

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

    label = "langmem summarize_messages"
    knob_name = "max_tokens"

    @staticmethod
    def accepts(knob: int, cap: int) -> bool:
        # langmem raises "`max_summary_tokens` must be less than `max_tokens`".
        return knob > cap

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        super().__init__(backend, limits, knob, summarizer)
        self.model = _langchain_fake(self.recorder)
        self.messages: list[Any] = []
        self.running: Any = None
        self.knobs = {
            "max_tokens": self.knob,
            "max_tokens_before_summary": limits.max_input_tokens - _fixed_tokens(),
            "max_summary_tokens": backend.summary_cap,
        }

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


class LangchainMiddleware(_Peer):
    """LangChain v1 ``SummarizationMiddleware`` with a token keep; its ``before_model`` hook runs on the agent state as the agent would."""

    label = "LangChain v1 SummarizationMiddleware"
    knob_name = "keep tokens"

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        from langchain.agents.middleware import SummarizationMiddleware

        super().__init__(backend, limits, knob, summarizer)
        self.middleware = SummarizationMiddleware(
            _langchain_fake(self.recorder),
            trigger=("tokens", limits.max_input_tokens - _fixed_tokens()),
            keep=("tokens", self.knob),
            token_counter=_lc_token_counter,
        )
        self.messages: list[Any] = []

    @staticmethod
    def default_knob(limits: Limits) -> int:
        return (limits.max_input_tokens - _fixed_tokens()) // 2

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


class LangchainSummaryBuffer(_Peer):
    """LangChain's ``ConversationSummaryBufferMemory`` (langchain-classic, deprecated), messages returned as messages."""

    label = "LangChain ConversationSummaryBufferMemory (deprecated)"
    knob_name = "max_token_limit"

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        import warnings

        from langchain_classic.memory import ConversationSummaryBufferMemory

        super().__init__(backend, limits, knob, summarizer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its deprecation, which the label states
            self.memory = ConversationSummaryBufferMemory(
                llm=_langchain_fake(self.recorder), max_token_limit=self.knob, return_messages=True
            )

    def play_turn(self, user_text: str) -> float:
        began = time.perf_counter()
        self.recorder.user_said(user_text)
        history = self.memory.load_memory_variables({})["history"]
        text, first = self._reply([*_lc_to_memora(history), Message("user", user_text)], began)
        self._after_reply(lambda: self.memory.save_context({"input": user_text}, {"output": text}))
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
    """LlamaIndex's ``ChatSummaryMemoryBuffer`` (deprecated for ``Memory``): put the user message, ``get()`` the messages to send."""

    label = "LlamaIndex ChatSummaryMemoryBuffer (deprecated)"
    knob_name = "token_limit"

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        import warnings

        from llama_index.core.memory import ChatSummaryMemoryBuffer

        super().__init__(backend, limits, knob, summarizer)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.memory = ChatSummaryMemoryBuffer.from_defaults(
                llm=_llama_fake(self.recorder), token_limit=self.knob, tokenizer_fn=_o200k_ids
            )


FACT_TOKENS = 15
"""About how many tokens one extracted fact takes, tags included: ``max_facts`` is the cap over this."""


class LlamaMemory(_LlamaIndexPeer):
    """LlamaIndex's ``Memory`` with a ``FactExtractionMemoryBlock``: flushed messages become facts in the system message."""

    label = "LlamaIndex Memory + FactExtractionMemoryBlock"
    knob_name = "token_limit"

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        from llama_index.core.memory import FactExtractionMemoryBlock, Memory

        super().__init__(backend, limits, knob, summarizer)
        block = FactExtractionMemoryBlock(llm=_llama_fake(self.recorder, facts=True), max_facts=max(2, backend.summary_cap // FACT_TOKENS))
        self.memory = Memory.from_defaults(
            token_limit=self.knob, token_flush_size=max(1, self.knob // 10), memory_blocks=[block], tokenizer_fn=_o200k_ids
        )


class AgentsTrimmingSession(_Peer):
    """The OpenAI Agents SDK's ``SQLiteSession`` with ``SessionSettings(limit=2R)``: the last 2R items, then the new input."""

    label = "OpenAI Agents SDK trimming session"
    tunable = False

    def __init__(self, backend: RecordingBackend, limits: Limits, knob: int | None = None, summarizer: Summarizer | None = None) -> None:
        from agents import SQLiteSession
        from agents.memory import SessionSettings

        super().__init__(backend, limits, knob, summarizer)
        self.session = SQLiteSession("bench", session_settings=SessionSettings(limit=2 * limits.max_recent_turns))
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
    "langchain-middleware": ("langchain", LangchainMiddleware),
    "langchain-summary-buffer": ("langchain-classic", LangchainSummaryBuffer),
    "llamaindex-memory": ("llama-index-core", LlamaMemory),
    "llamaindex-chat-summary": ("llama-index-core", LlamaChatSummary),
    "agents-trimming": ("openai-agents", AgentsTrimmingSession),
}
"""Peer key -> (library key in ``LIBRARIES``, class)."""


def peer_factory(key: str, knob: int | None = None) -> Callable[[RecordingBackend, Limits], _Peer]:
    """A benchmark factory of peer ``key`` with its token knob at ``knob`` (None: its default)."""
    cls = PEERS[key][1]
    return lambda b, lim: cls(b, lim, knob)


def installed_peers(missing: Sequence[str] = ()) -> list[str]:
    """The keys of ``PEERS`` whose library is installed."""
    return [key for key, (library, _) in PEERS.items() if library not in missing]
