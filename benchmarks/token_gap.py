"""How far Memora's local o200k_base count is from an OpenAI-compatible server's own count.

Plays a short conversation through the chat backend (English, then Traditional
Chinese), and replays each reply request it sent without streaming and with
``max_tokens=1``, so the server reports the prompt tokens its chat template
rendered. Prints one row per language: requests, local count, server count, and
the ratio server/local (minimum, median, maximum).

    .venv-llama/bin/python -m llama_cpp.server --model .models/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --port 8811 --n_ctx 2048 --chat_format chatml &
    .venv/bin/python benchmarks/token_gap.py --base-url http://127.0.0.1:8811/v1 --model smollm2
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend, chat_messages
from memora.memory import ShortTermMemory
from memora.memory.backend import Completion, ReplyRequest, SummaryRequest
from memora.text.tokens import LocalTokenCounter

CONVERSATIONS = {
    "English": [
        "My name is Ana and I am a nurse in Lisbon.",
        "I want to practise English for a conference in London next spring.",
        "What is the difference between 'since' and 'for'?",
        "Yesterday I have forgot my notes at home. Is this sentence correct?",
        "Can you give me three phrases for asking directions?",
        "Actually my level is B2, not B1.",
    ],
    "Traditional Chinese": [
        "我叫小美，在台北當護理師。",
        "我想為明年春天在倫敦的研討會練習英文。",
        "「since」和「for」有什麼不同？",
        "昨天我把筆記忘在家裡了，用英文要怎麼說？",
        "可以給我三個問路的句子嗎？",
        "其實我的程度是 B2，不是 B1。",
    ],
}


class Recorder:
    """The chat backend, recording each reply request it sends."""

    def __init__(self, inner: ChatCompletionsBackend) -> None:
        self.inner, self.label, self.offline, self.profile = inner, inner.label, False, inner.profile
        self.replies: list[ReplyRequest] = []

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.replies.append(request)
        return self.inner.stream_reply(request)

    def count_request(self, model: str, instructions: str, messages: Any) -> int | None:
        return self.inner.count_request(model, instructions, messages)

    def counting_source(self, model: str) -> str | None:
        return self.inner.counting_source(model)

    def summarize(self, request: SummaryRequest) -> Completion:
        return self.inner.summarize(request)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key=NO_KEY, max_retries=0, timeout=300)
    local = LocalTokenCounter()
    print("| conversation | requests | local (o200k_base) | server | server / local: min · median · max |")
    print("|---|---:|---:|---:|---|")
    for language, turns in CONVERSATIONS.items():
        recorder = Recorder(ChatCompletionsBackend(client))
        memory = ShortTermMemory(recorder, model=args.model, max_recent_turns=2, max_reply_tokens=48)
        for text in turns:
            with memory.turn(text) as turn:
                turn.run()
        counted, served = [], []
        for request in recorder.replies:
            counted.append(local.count("", request.instructions, request.messages))
            messages = chat_messages(request.instructions, request.messages)
            reply = client.chat.completions.create(model=args.model, messages=messages, max_tokens=1)  # type: ignore[arg-type]
            served.append(reply.usage.prompt_tokens if reply.usage else 0)
        ratios = [s / c for s, c in zip(served, counted, strict=True)]
        print(
            f"| {language} | {len(counted)} | {sum(counted):,} | {sum(served):,} | "
            f"{min(ratios):.2f} · {statistics.median(ratios):.2f} · {max(ratios):.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
