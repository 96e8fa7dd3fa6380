"""Scripted conversations for the benchmark: deterministic, mixed English and Traditional Chinese, with planted facts.

A script is generated from a seed, so every strategy replays exactly the same
user messages and receives exactly the same assistant replies. About one turn
in eight carries a long message (a pasted paragraph or a long explanation),
so that the input budget, not only the window, forces folds. About one short message in four
states a planted fact (``FACTS``: name, city, job, level, goal, country), in English or in Chinese,
or corrects it ("Actually I'm B2, not B1."); ``Script.statements`` says which, for the retention probe.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_EN_STATEMENTS = [
    "I prefer short examples with everyday words.",
    "I like learning with songs and TV series.",
    "My teacher says my pronunciation is getting better.",
    "I usually study after dinner for about thirty minutes.",
]
_EN_QUESTIONS = [
    "What is the difference between 'make' and 'do'?",
    "Can you explain when to use the present perfect?",
    "How do I say that I disagree politely in a meeting?",
    "Is it 'in the weekend' or 'on the weekend'?",
    "Could you check this sentence: 'I am agree with you'?",
    "Why do we say 'an hour' but 'a house'?",
    "What does 'to be on the same page' mean?",
    "How can I make my emails sound less direct?",
]
_ZH_SENTENCES = [
    "我的英文程度大概是中級，想多練習口說。",
    "請問「affect」和「effect」有什麼不同？",
    "我比較喜歡用生活化的例子來學習。",
    "可以幫我看看這句話的文法對不對嗎？",
    "我每天通勤的時候會聽英文 Podcast。",
    "上次你說的片語我還是不太懂，可以再解釋一次嗎？",
    "我下個月要出差，需要練習自我介紹。",
]
_EN_REPLY = [
    "Good question.",
    "Here is a short example: 'I made a cake, and then I did the dishes.'",
    "Use the present perfect for experiences without a specific time, like 'I have visited Tokyo.'",
    "A polite way is: 'I see your point, but I think we could try another approach.'",
    "Both are used: British English says 'at the weekend', American English 'on the weekend'.",
    "The correct sentence is 'I agree with you'; 'agree' is already a verb.",
    "We use 'an' before a vowel sound, and the 'h' in 'hour' is silent.",
    "It means that everyone understands the situation in the same way.",
    "Try softening words such as 'could', 'perhaps' and 'would you mind'.",
]
_ZH_REPLY = [
    "「affect」通常是動詞，「effect」通常是名詞。",
    "你的句子很好，只需要把時態改成過去式。",
    "自我介紹可以先說名字、工作，再說一個小興趣。",
    "這個片語的意思是「大家的理解一致」。",
]

FACTS: dict[str, dict[str, tuple[str, ...]]] = {
    "name": {v: (v,) for v in ("Amy", "Ben", "Chloe", "David", "Emma", "Frank")},
    "city": {
        "Taipei": ("Taipei", "台北"),
        "Kaohsiung": ("Kaohsiung", "高雄"),
        "Taichung": ("Taichung", "台中"),
        "Tainan": ("Tainan", "台南"),
    },
    "job": {
        "nurse": ("nurse", "護理師"),
        "software engineer": ("software engineer", "軟體工程師"),
        "sales manager": ("sales manager", "業務經理"),
        "pharmacist": ("pharmacist", "藥師"),
    },
    "level": {v: (v,) for v in ("A2", "B1", "B2")},
    "goal": {v: (v,) for v in ("C1", "C2", "TOEIC 900")},
    "country": {
        "Japan": ("Japan", "日本"),
        "Germany": ("Germany", "德國"),
        "the United States": ("United States", "美國"),
        "Vietnam": ("Vietnam", "越南"),
    },
}
"""The planted facts: fact -> value -> the spellings that carry it (English, then Traditional Chinese).

No spelling of one value appears in another value, in another fact, or in the script's other text,
so finding a spelling in a request means that value reached it (``retention.py``)."""

# (first statement, correction) per fact and language; {v} the new value ({z} its Chinese spelling), {old} the value it replaces.
_FACT_TEMPLATES: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "name": (("My name is {v}.", "Sorry, my name is {v}, not {old}."), ("我叫 {v}。", "更正一下，我叫 {v}，不是 {old}。")),
    "city": (("I live in {v}.", "Actually I moved, I live in {v} now, not {old}."), ("我住在{z}。", "其實我搬家了，現在住在{z}。")),
    "job": (("My job is {v}.", "Actually my job is {v} now."), ("我的工作是{z}。", "其實我現在的工作是{z}。")),
    "level": (("My level is {v}.", "Actually I'm {v}, not {old}."), ("我的英文程度是 {v}。", "其實我是 {v}，不是 {old}。")),
    "goal": (
        ("My goal is {v} by next year.", "Actually my goal is {v}, not {old}."),
        ("我的目標是明年考到 {v}。", "更正：我的目標是 {v}，不是 {old}。"),
    ),
    "country": (
        ("I need English for meetings with customers from {v}.", "Actually my customers are from {v} now."),
        ("我的客戶大多來自{z}。", "其實現在客戶大多來自{z}。"),
    ),
}

LONG_EVERY = 8
"""About one turn in this many has a long user message or a long reply."""

FACT_EVERY = 4
"""About one short user message in this many states a planted fact (first, or correcting the last value)."""


@dataclass(frozen=True)
class Statement:
    """A planted fact stated in a user message: ``fact`` now has ``value`` (a key of ``FACTS[fact]``)."""

    fact: str
    value: str


@dataclass(frozen=True)
class Script:
    """A conversation to replay: ``user_messages[i]`` is answered with ``replies[i]``."""

    seed: int
    user_messages: tuple[str, ...]
    replies: tuple[str, ...]
    statements: tuple[tuple[Statement, ...], ...] = ()
    """Per turn, the planted facts its user message states (empty tuples for a script built without them)."""

    def prefix(self, turns: int) -> Script:
        """The first ``turns`` turns of this script."""
        return Script(self.seed, self.user_messages[:turns], self.replies[:turns], self.statements[:turns])

    @property
    def turns(self) -> int:
        return len(self.user_messages)


def make_script(turns: int, seed: int = 7) -> Script:
    """A deterministic conversation of ``turns`` turns, with planted facts stated and corrected along the way.

    The same ``(turns, seed)`` always gives the same script, and a longer script
    with the same seed starts with the shorter one.
    """
    rng = random.Random(seed)
    users: list[str] = []
    replies: list[str] = []
    statements: list[tuple[Statement, ...]] = []
    known: dict[str, str] = {}
    for _ in range(turns):
        text, stated = _user_message(rng, known)
        users.append(text)
        statements.append(stated)
        replies.append(_reply(rng))
    return Script(seed, tuple(users), tuple(replies), tuple(statements))


def _state_fact(rng: random.Random, known: dict[str, str]) -> tuple[str, Statement]:
    """One sentence stating a fact: a new one, or a new value for a known one (a correction naming the old)."""
    fact = rng.choice(list(FACTS))
    old = known.get(fact)
    value = rng.choice([v for v in FACTS[fact] if v != old])
    first, correction = rng.choice(_FACT_TEMPLATES[fact])
    template = first if old is None else correction
    known[fact] = value
    spelled = FACTS[fact][value]
    return template.format(v=value, z=spelled[-1], old=old), Statement(fact, value)


def _sentence(rng: random.Random) -> str:
    return rng.choice(rng.choice([_EN_STATEMENTS, _EN_QUESTIONS, _ZH_SENTENCES]))


def _user_message(rng: random.Random, known: dict[str, str]) -> tuple[str, tuple[Statement, ...]]:
    if rng.randrange(LONG_EVERY) == 0:
        # A pasted paragraph to correct: 300-500 tokens, still well inside a 1,000-token budget. It states no planted fact.
        count = rng.randint(20, 32)
        return "Please correct this text:\n" + " ".join(rng.choice(_EN_QUESTIONS + _ZH_SENTENCES) for _ in range(count)), ()
    sentences = [_sentence(rng) for _ in range(rng.randint(1, 3))]
    if rng.randrange(FACT_EVERY) != 0:
        return " ".join(sentences), ()
    said, statement = _state_fact(rng, known)
    sentences.insert(rng.randrange(len(sentences) + 1), said)
    return " ".join(sentences), (statement,)


def _reply(rng: random.Random) -> str:
    pool = _EN_REPLY + _ZH_REPLY
    count = rng.randint(8, 14) if rng.randrange(LONG_EVERY) == 0 else rng.randint(1, 4)
    return " ".join(rng.choice(pool) for _ in range(count))
