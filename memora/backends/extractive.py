"""The offline engine's summarizer: extractive, deterministic, no language model.

It keeps what the user said, one statement per line, and merges it into the
previous summary. It never writes a word the user did not write: it keeps whole
sentences, or, when a later correction retracts part of one, the rest of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memora.text.messages import Message

_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s*")
_WORD = re.compile(r"[\w']+", re.UNICODE)
_LEADING_FILLER = {"actually", "well", "oh", "no", "so", "now", "also", "and", "but", "sorry", "ok", "okay", "hi", "hello"}
_VERBS = {"is", "am", "are", "was", "were", "'m", "want", "wants", "like", "likes", "need", "needs", "prefer", "live", "work", "study"}
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
_CORRECTION_CUE = re.compile(r"\b(?:actually|correction|sorry|i mean|i meant|wait|oops)\b|其實|更正|不對|抱歉", re.IGNORECASE)
_RETRACTED = re.compile(r"(?:\b(?:not|no longer|instead of|rather than)\s+|(?:而不是|不是|而非)\s*)([A-Za-z0-9][\w'-]*)", re.IGNORECASE)
_NOT_A_VALUE = {"a", "an", "the", "really", "very", "sure", "so", "too", "that", "this", "it", "yet", "just", "to", "be", "at", "in", "on"}
_CLAUSE_END = re.compile(r"(?<=[,;，；、])\s*|\s+(?=and\s|but\s)")
_BULLET = "- "
MAX_STATEMENT_WORDS = 40


def split_statements(text: str) -> list[str]:
    """Splits a message into sentences, dropping empty ones and greetings-only lines."""
    parts = (p.strip() for line in text.splitlines() for p in _SENTENCE_END.split(line))
    return [p for p in parts if p and not _is_greeting(p)]


def _is_greeting(sentence: str) -> bool:
    words = [w.lower() for w in _WORD.findall(sentence)]
    return bool(words) and all(w in _LEADING_FILLER | {"thanks", "thank", "you", "bye", "there"} for w in words)


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
            # "I'm" or "I want" alone says nothing about the topic: "I'm B2" must not replace "I'm Mina".
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
    text = re.sub(r"^(?:and|but|so)\s+", "", " ".join(c.strip() for c in kept), flags=re.IGNORECASE).rstrip(",;，；、 ")
    return text if text.endswith((".", "!", "?", "。", "！", "？")) else text + "."


def _is_about_user(sentence: str) -> bool:
    """A statement in the first person: a fact, goal or preference of the user's."""
    return bool(set(" ".join(_words(sentence)).split()) & _FIRST_PERSON) or "我" in sentence


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith(("?", "？"))


def _clip(sentence: str) -> str:
    words = sentence.split()
    return sentence if len(words) <= MAX_STATEMENT_WORDS else " ".join(words[:MAX_STATEMENT_WORDS]) + " …"


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
    lines = [line[len(_BULLET) :] if line.startswith(_BULLET) else line for line in existing.splitlines() if line.strip()]
    for message in new_messages:
        if message.role != "user":
            continue
        for sentence in split_statements(message.content):
            sentence = _clip(sentence)
            key = topic_key(sentence)
            lines = [old for old in lines if old != sentence and (key is None or topic_key(old) != key)]
            for value in retracted_values(sentence):
                lines = [kept for kept in (_retract(old, value) for old in lines) if kept]
            lines.append(sentence)
    lines = _fit(lines, word_limit)
    return "\n".join(_BULLET + line for line in lines)


def _fit(lines: list[str], word_limit: int) -> list[str]:
    def size(ls: list[str]) -> int:
        return sum(len(line.split()) for line in ls)

    tiers = (lambda line: _is_about_user(line) or _is_question(line), _is_about_user, lambda line: False)
    for keep_if in tiers:
        i = 0
        while size(lines) > word_limit and i < len(lines):
            if keep_if(lines[i]):
                i += 1
            else:
                del lines[i]
    return lines
