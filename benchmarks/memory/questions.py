"""Probe questions for a real model: does it answer a planted fact correctly from what it was sent?

The retention probe (``retention.py``) asks whether a fact's latest value was *sent*; a real model may be sent it and
still not use it, or answer from an older value. At a checkpoint, each fact due there is asked as a direct question
("What is my name?": the issue found a plan-style question got 0 of 4 facts even with the full history, a direct
one 3 of 4), with the context of that turn's reply request in place of its current message. An answer is correct
when it holds some spelling of the latest value (``retention.carries``); an answer that holds it beside an older
value counts too, since the probe cannot tell which one the model meant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.memory.retention import Probed, carries
from memora.backends.base import drain
from memora.memory.backend import Backend, ReplyRequest
from memora.text.messages import Message

QUESTIONS = {
    "name": "Quick check before we go on: what is my name? Answer in a few words.",
    "city": "Quick check before we go on: which city do I live in? Answer in a few words.",
    "job": "Quick check before we go on: what is my job? Answer in a few words.",
    "level": "Quick check before we go on: what is my English level now? Answer in a few words.",
    "goal": "Quick check before we go on: what is my goal? Answer in a few words.",
    "country": "Quick check before we go on: which country are most of my customers from? Answer in a few words.",
}
"""One direct question per fact of ``script.FACTS``."""

ANSWER_TOKENS = 32
"""The output cap of an answer: a few words, and a small model cannot run on."""


@dataclass(frozen=True)
class Answered:
    """Probe questions asked at one request, and how many the model answered with the latest value."""

    correct: int = 0
    asked: int = 0


def ask(backend: Backend, request: ReplyRequest, due: Sequence[Probed]) -> Answered:
    """Asks ``backend`` each fact in ``due`` with ``request``'s context, its current (last) message replaced by the
    question; no facts due: nothing asked. Costs one model request per fact."""
    context = request.messages[:-1]
    correct = 0
    for fact in due:
        question = ReplyRequest(
            request.model, request.instructions, (*context, Message("user", QUESTIONS[fact.fact])), max_output_tokens=ANSWER_TOKENS
        )
        answer = drain(backend.stream_reply(question)).text
        correct += carries(answer, fact.fact, fact.latest)
    return Answered(correct, len(due))
