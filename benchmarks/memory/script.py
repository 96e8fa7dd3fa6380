"""Scripted conversations for the benchmark: deterministic, mixed English and Traditional Chinese.

A script is generated from a seed, so every strategy replays exactly the same
user messages and receives exactly the same assistant replies. About one turn
in eight carries a long message (a pasted paragraph or a long explanation),
so that the input budget, not only the window, forces folds.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_EN_FACTS = [
    "My name is {name}.",
    "I live in {city} and I work as a {job}.",
    "My level is {level}, and I want to reach {goal} by next year.",
    "I prefer short examples with everyday words.",
    "I need English for meetings with customers from {country}.",
    "Actually my level is {level}, my teacher said so yesterday.",
    "I like learning with songs and TV series.",
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
    "我叫{name_zh}，我住在台北。",
    "我的英文程度大概是中級，想在明年考多益。",
    "請問「affect」和「effect」有什麼不同？",
    "我比較喜歡用生活化的例子來學習。",
    "可以幫我看看這句話的文法對不對嗎？",
    "我每天通勤的時候會聽英文 Podcast。",
    "上次你說的片語我還是不太懂，可以再解釋一次嗎？",
    "我下個月要去美國出差，需要練習自我介紹。",
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
_NAMES = ["Amy", "Ben", "Chloe", "David", "Emma", "Frank"]
_NAMES_ZH = ["小美", "阿明", "怡君", "志豪"]
_CITIES = ["Taipei", "Kaohsiung", "Taichung", "Tainan"]
_JOBS = ["nurse", "software engineer", "sales manager", "teacher"]
_LEVELS = ["A2", "B1", "B2"]
_GOALS = ["B2", "C1"]
_COUNTRIES = ["Japan", "Germany", "the United States", "Vietnam"]

LONG_EVERY = 8
"""About one turn in this many has a long user message or a long reply."""


@dataclass(frozen=True)
class Script:
    """A conversation to replay: ``user_messages[i]`` is answered with ``replies[i]``."""

    seed: int
    user_messages: tuple[str, ...]
    replies: tuple[str, ...]

    @property
    def turns(self) -> int:
        return len(self.user_messages)


def make_script(turns: int, seed: int = 7) -> Script:
    """A deterministic conversation of ``turns`` turns.

    The same ``(turns, seed)`` always gives the same script, and a longer script
    with the same seed starts with the shorter one.
    """
    rng = random.Random(seed)
    users: list[str] = []
    replies: list[str] = []
    for _ in range(turns):
        users.append(_user_message(rng))
        replies.append(_reply(rng))
    return Script(seed, tuple(users), tuple(replies))


def _fill(template: str, rng: random.Random) -> str:
    return template.format(
        name=rng.choice(_NAMES),
        name_zh=rng.choice(_NAMES_ZH),
        city=rng.choice(_CITIES),
        job=rng.choice(_JOBS),
        level=rng.choice(_LEVELS),
        goal=rng.choice(_GOALS),
        country=rng.choice(_COUNTRIES),
    )


def _sentence(rng: random.Random) -> str:
    pool = rng.choice([_EN_FACTS, _EN_QUESTIONS, _ZH_SENTENCES])
    return _fill(rng.choice(pool), rng)


def _user_message(rng: random.Random) -> str:
    if rng.randrange(LONG_EVERY) == 0:
        # A pasted paragraph to correct: 300-500 tokens, still well inside a 1,000-token budget.
        count = rng.randint(20, 32)
        return "Please correct this text:\n" + " ".join(_sentence(rng) for _ in range(count))
    return " ".join(_sentence(rng) for _ in range(rng.randint(1, 3)))


def _reply(rng: random.Random) -> str:
    pool = _EN_REPLY + _ZH_REPLY
    count = rng.randint(8, 14) if rng.randrange(LONG_EVERY) == 0 else rng.randint(1, 4)
    return " ".join(rng.choice(pool) for _ in range(count))
