"""The offline engine: deterministic, instant, and plainly not a language model.

Its reply reports what a model would have received this turn, in the page's language (``language``:
English, the default, or ``zh-TW``; any other code gets English). Its summary is extractive
(``merge_summary``, below): it keeps what the user said, one statement per line, and merges it into
the previous summary. It never writes a word the user did not write: it keeps whole sentences, or,
when a later correction retracts part of one, the rest of it. Usage figures are real o200k_base
counts, marked ``estimated``: no server billed them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from memora.memory.backend import OPENAI_PROFILE, Completion, ReplyRequest, SummaryRequest
from memora.text.messages import Message
from memora.text.prompts import SUMMARY_PREAMBLE, SUMMARY_WORD_LIMIT, summary_word_limit
from memora.text.tokens import LocalTokenCounter, count_text, summary_request_tokens
from memora.text.usage import Usage

OFFLINE_LABEL = "Offline (no language model)"


class OfflineBackend:
    """Explains each request instead of answering it; needs no key and no network."""

    label = OFFLINE_LABEL
    offline = True
    profile = OPENAI_PROFILE

    def __init__(self, word_limit: int = SUMMARY_WORD_LIMIT, language: str = "en") -> None:
        """``word_limit`` caps every summary; instructions asking for fewer words (a shorter summary
        cap) cap it lower.

        ``language`` is the reply's; the page sets it to its own before each turn, so a switch
        applies from the next reply. The summary keeps the user's own words, in whatever language
        they wrote them.
        """
        self.word_limit = word_limit
        self.language = language
        self._counter = LocalTokenCounter()

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        """Yields the explanation in word-sized pieces, then its Completion."""
        text = describe_request(request, self.language)
        yield from re.findall(r"\S+\s*|\s+", text)
        input_tokens = self._counter.count(request.model, request.instructions, request.messages)
        yield Completion(text, Usage(input_tokens, count_text(text), estimated=True))

    def count_request(self, model: str, instructions: str, messages: Sequence[Message]) -> None:
        """None: the offline engine counts with o200k_base, the memory's own local count."""
        return None

    def counting_source(self, model: str) -> None:
        return None

    def summarize(self, request: SummaryRequest) -> Completion:
        """The extractive summary, with the request's input reported as the memory counted it
        (``summary_request_tokens``: instructions and input as a chat, framing and priming
        included), so the ledger's reported figure equals its counted one, as a reply's does.
        Nothing is billed offline."""
        limit = min(self.word_limit, summary_word_limit(request.instructions))
        text = merge_summary(request.existing_summary, request.new_messages, limit)
        input_tokens = summary_request_tokens(request.instructions, request.input_text)
        return Completion(text, Usage(input_tokens, count_text(text), estimated=True))


@dataclass(frozen=True)
class Wording:
    """The offline reply's sentences in one language; ``{…}`` are filled in by
    ``describe_request``."""

    heading: str
    summary_one: str
    summary_none: str
    recent: Callable[[int], str]
    current: str
    separator: str
    tokens: str
    tokens_of_budget: str
    summary_sent: str
    no_summary: str


WORDINGS = {
    "en": Wording(
        heading=(
            "**Offline mode, no language model.** This is what a model would have received for "
            "this turn:"
        ),
        summary_one="1 summary message",
        summary_none="no summary yet",
        recent=lambda count: f"{count} recent message" + ("" if count == 1 else "s"),
        current="1 current message",
        separator=", ",
        tokens="**{tokens:,} input tokens**, instructions included",
        tokens_of_budget=(
            "**{tokens:,} of {budget:,} input tokens** in the budget, instructions included"
        ),
        summary_sent="**Summary sent:**",
        no_summary="(no summary yet)",
    ),
    "zh-TW": Wording(
        heading="**離線模式，不是語言模型。** 這一輪模型原本會收到的內容：",
        summary_one="1 則摘要訊息",
        summary_none="還沒有摘要",
        recent=lambda count: f"{count} 則最近的訊息",
        current="1 則目前的訊息",
        separator="，",
        tokens="**{tokens:,} 個輸入 Token**，含指示",
        tokens_of_budget="預算 {budget:,} 個輸入 Token 中的 **{tokens:,} 個**，含指示",
        summary_sent="**送出的摘要：**",
        no_summary="（還沒有摘要）",
    ),
}
"""The languages the offline engine replies in, by the page's language code; English is the
default."""


def describe_request(request: ReplyRequest, language: str = "en") -> str:
    """The offline reply: the shape of the context a model would have been sent, in ``language``
    (English when the engine has no wording for it)."""
    words = WORDINGS.get(language, WORDINGS["en"])
    messages = request.messages
    summary = next((m.content for m in messages if m.role == "developer"), None)
    recent = [m for m in messages[:-1] if m.role != "developer"]
    tokens = request.counted_input_tokens
    budget = request.input_budget
    if tokens is None:
        usage_line = ""
    elif budget is None:
        usage_line = "- " + words.tokens.format(tokens=tokens) + "\n"
    else:
        usage_line = "- " + words.tokens_of_budget.format(tokens=tokens, budget=budget) + "\n"
    summary_text = summary.removeprefix(SUMMARY_PREAMBLE).strip() if summary else None
    summary_block = (
        "\n".join("> " + line for line in summary_text.splitlines())
        if summary_text
        else words.no_summary
    )
    parts = (
        words.summary_one if summary else words.summary_none,
        words.recent(len(recent)),
        words.current,
    )
    return (
        f"{words.heading}\n\n- {words.separator.join(parts)}\n{usage_line}\n"
        f"{words.summary_sent}\n\n{summary_block}\n"
    )


# -- the extractive summary
# ------------------------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_WORD = re.compile(r"[\w']+", re.UNICODE)
_LEADING_FILLER = {
    "actually",
    "well",
    "oh",
    "no",
    "so",
    "now",
    "also",
    "and",
    "but",
    "sorry",
    "ok",
    "okay",
    "hi",
    "hello",
}
_VERBS = {
    "is",
    "am",
    "are",
    "was",
    "were",
    "'m",
    "want",
    "wants",
    "like",
    "likes",
    "need",
    "needs",
    "prefer",
    "live",
    "work",
    "study",
}
_FIRST_PERSON = {"i", "'m", "my", "mine", "we", "our"}
_GENERIC_KEY_WORDS = (
    _FIRST_PERSON
    | _VERBS
    | {
        "i",
        "'m",
        "i'm",
        "me",
        "it",
        "this",
        "that",
        "there",
        "you",
        "he",
        "she",
        "they",
        "really",
        "just",
        "still",
    }
)
# "Actually I'm B2, not B1": a cue that the sentence corrects something, then the retracted value.
_CORRECTION_CUE = re.compile(
    r"\b(?:actually|correction|sorry|i mean|i meant|wait|oops)\b|其實|更正|不對|抱歉", re.IGNORECASE
)
_RETRACTED = re.compile(
    r"(?:\b(?:not|no longer|instead of|rather than)\s+|(?:而不是|不是|而非)\s*)"
    r"([A-Za-z0-9][\w'-]*)",
    re.IGNORECASE,
)
_NOT_A_VALUE = {
    "a",
    "an",
    "the",
    "really",
    "very",
    "sure",
    "so",
    "too",
    "that",
    "this",
    "it",
    "yet",
    "just",
    "to",
    "be",
    "at",
    "in",
    "on",
}
_CLAUSE_END = re.compile(r"(?<=[,;，；、])\s*|\s+(?=and\s|but\s)")
_BULLET = "- "
MAX_STATEMENT_WORDS = 40


def split_statements(text: str) -> list[str]:
    """Splits a message into sentences, dropping empty ones and greetings-only lines."""
    parts = (p.strip() for line in text.splitlines() for p in _SENTENCE_END.split(line))
    return [p for p in parts if p and not _is_greeting(p)]


def _is_greeting(sentence: str) -> bool:
    words = [w.lower() for w in _WORD.findall(sentence)]
    return bool(words) and all(
        w in _LEADING_FILLER | {"thanks", "thank", "you", "bye", "there"} for w in words
    )


def _words(sentence: str) -> list[str]:
    return [w.lower().replace("i'm", "i 'm") for w in _WORD.findall(sentence)]


def topic_key(sentence: str) -> str | None:
    """The words up to the first verb, with leading filler removed.

    "Actually my level is B2" and "My level is B1" share the key "my level is",
    so the newer one replaces the older. Sentences with no such verb, or whose
    words up to it are only pronouns and verbs ("I'm B2", "I want tea"), have no
    key and never replace anything.
    """
    words = " ".join(_words(sentence)).split()
    while words and words[0] in _LEADING_FILLER:
        words = words[1:]
    for i, word in enumerate(words[:8]):
        if word in _VERBS:
            key = words[: i + 1]
            # "I'm" or "I want" alone says nothing about the topic: "I'm B2" must not replace "I'm
            # Mina".
            return None if all(w in _GENERIC_KEY_WORDS for w in key) else " ".join(key)
    return None


def retracted_values(sentence: str) -> list[str]:
    """The values a correcting sentence takes back: ``["B1"]`` for "Actually I'm B2, not B1."

    Only sentences with a correction cue ("actually", "sorry", "I mean", 其實, 更正...)
    retract anything, so "I'm not sure" retracts nothing.
    """
    if not _CORRECTION_CUE.search(sentence):
        return []
    return [v for v in _RETRACTED.findall(sentence) if v.lower() not in _NOT_A_VALUE]


def _retract(line: str, value: str) -> str:
    """``line`` without the clauses that state ``value``; ``""`` if nothing else is left."""
    pattern = re.compile(rf"(?<![\w]){re.escape(value)}(?![\w])", re.IGNORECASE)
    if not pattern.search(line):
        return line
    if retracted_values(line):
        # An earlier correction of the same fact goes whole: "not B1." alone would mislead.
        return ""
    clauses = [c for c in _CLAUSE_END.split(line) if c.strip()]
    kept = [c for c in clauses if not pattern.search(c)]
    if not kept:
        return ""
    text = re.sub(
        r"^(?:and|but|so)\s+", "", " ".join(c.strip() for c in kept), flags=re.IGNORECASE
    ).rstrip(",;，；、 ")
    return text if text.endswith((".", "!", "?", "。", "！", "？")) else text + "."


def _is_about_user(sentence: str) -> bool:
    """A statement in the first person: a fact, goal or preference of the user's."""
    return bool(set(" ".join(_words(sentence)).split()) & _FIRST_PERSON) or "我" in sentence


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith(("?", "？"))


def _clip(sentence: str) -> str:
    words = sentence.split()
    return (
        sentence
        if len(words) <= MAX_STATEMENT_WORDS
        else " ".join(words[:MAX_STATEMENT_WORDS]) + " …"
    )


def merge_summary(existing: str, new_messages: Sequence[Message], word_limit: int) -> str:
    """Merges the user's statements in ``new_messages`` into ``existing``.

    - Each user sentence becomes one ``- `` line; assistant messages are skipped.
    - A newer sentence with the same topic key replaces the older one in place of it.
    - A correction ("Actually I'm B2, not B1.") removes, from older lines, the
      clauses that state the retracted value, and lines left empty by that.
    - Exact repeats are kept once.
    - Over ``word_limit`` words, the oldest lines go first: first those that are
      neither about the user (first person) nor questions, then questions, then any.
    Returns ``existing`` unchanged when there is nothing new to keep.
    """
    lines = [
        line[len(_BULLET) :] if line.startswith(_BULLET) else line
        for line in existing.splitlines()
        if line.strip()
    ]
    for message in new_messages:
        if message.role != "user":
            continue
        for sentence in split_statements(message.content):
            sentence = _clip(sentence)
            key = topic_key(sentence)
            lines = [
                old for old in lines if old != sentence and (key is None or topic_key(old) != key)
            ]
            for value in retracted_values(sentence):
                lines = [kept for kept in (_retract(old, value) for old in lines) if kept]
            lines.append(sentence)
    lines = _fit(lines, word_limit)
    return "\n".join(_BULLET + line for line in lines)


def _fit(lines: list[str], word_limit: int) -> list[str]:
    def size(ls: list[str]) -> int:
        return sum(len(line.split()) for line in ls)

    tiers = (
        lambda line: _is_about_user(line) or _is_question(line),
        _is_about_user,
        lambda line: False,
    )
    for keep_if in tiers:
        i = 0
        while size(lines) > word_limit and i < len(lines):
            if keep_if(lines[i]):
                i += 1
            else:
                del lines[i]
    return lines
