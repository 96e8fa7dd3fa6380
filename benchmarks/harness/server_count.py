"""What Memora sent a real llama.cpp server, and that server's own count of it: the conversations in the learners'
languages, a recording backend, and the replay that asks the server to count each request.

``tests/test_real_server.py`` asserts on these counts; ``benchmarks/budget_by_server_count.py`` prints them.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from dataclasses import dataclass, field

import openai

from benchmarks.harness.llama_server import LlamaServer
from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend, chat_messages
from memora.backends.openai_errors import context_overflow
from memora.memory.backend import Completion, ReplyRequest, SummaryRequest
from memora.text.messages import Message

SENTENCES = (
    "My name is Ana and I work as a nurse in a busy hospital in Lisbon.",
    "I want to practise English for a conference in London next spring.",
    "Yesterday I tried to explain a patient's medicine to a tourist and I forgot many words.",
    "Could you help me with the difference between 'since' and 'for' in the present perfect?",
    "I usually study for twenty minutes on the train before my shift starts.",
    "My level is B1, but my listening is weaker than my reading.",
    "Last week I watched a British series without subtitles and understood about half of it.",
    "Please correct my mistakes gently and give me one short example each time.",
)


def message(turn: int, sentences: int) -> str:
    """A user message of ``sentences`` sentences, different for each turn."""
    return " ".join(SENTENCES[(turn + i) % len(SENTENCES)] for i in range(sentences))


@dataclass
class Recorder:
    """The real backend, with a record of every request it was sent and every completion it returned."""

    inner: ChatCompletionsBackend
    replies: list[ReplyRequest] = field(default_factory=list)
    summaries: list[tuple[SummaryRequest, Completion]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.inner.label

    @property
    def offline(self) -> bool:
        return False

    @property
    def profile(self):
        return self.inner.profile

    def counting_source(self, model: str):
        return self.inner.counting_source(model)

    def count_request(self, model: str, instructions: str, messages):
        return self.inner.count_request(model, instructions, messages)

    def stream_reply(self, request: ReplyRequest) -> Iterator[str | Completion]:
        self.replies.append(request)
        return self.inner.stream_reply(request)

    def summarize(self, request: SummaryRequest) -> Completion:
        completion = self.inner.summarize(request)
        self.summaries.append((request, completion))
        return completion


def backend_for(server: LlamaServer, *, probe: bool = True) -> Recorder:
    """The real chat backend for ``server``; ``probe=False`` ignores its tokenizer endpoint (the margins plan alone)."""
    client = openai.OpenAI(base_url=server.url, api_key=NO_KEY, max_retries=0, timeout=300)
    return Recorder(ChatCompletionsBackend(client, probe=probe))


def wire(request: ReplyRequest) -> list[dict[str, str]]:
    """The messages exactly as the chat backend sends them."""
    return chat_messages(request.instructions, request.messages)


CONVERSATIONS = {
    "English": [message(turn, 4) for turn in range(6)],
    "Traditional Chinese": [
        "我叫美玲，在台北的一家貿易公司上班。下個月我要去倫敦參加一個國際會議，需要用英文做簡報。請幫我把下面這段話翻譯成自然的英文："
        "「我們公司成立於二〇〇八年，主要出口電子零件到歐洲和東南亞。近年來，我們積極開發綠色能源相關的產品，希望在未來五年內將營收提高一倍。"
        "我們相信，透過與各國夥伴的合作，可以為客戶提供更有競爭力的解決方案。」",
        "謝謝！可以再翻譯這一段嗎？「我們的工廠位於桃園，員工約有三百人，其中研發人員佔三分之一。每年我們投入營收的百分之八於研究與開發，"
        "並與多所大學合作培育人才。」",
        "「營收提高一倍」用英文還有其他說法嗎？請給我三個例句，並說明它們在正式簡報裡的語氣差別。",
        "昨天我在捷運上讀了一篇關於氣候變遷的英文文章，有很多單字看不懂，例如 mitigation 和 resilience。"
        "可以用簡單的中文解釋，再各給我一個例句嗎？"
        "文章裡還有一句：「Adaptation measures must go hand in hand with emission cuts.」這句話應該怎麼翻成中文比較自然？",
        "請幫我檢查這句英文：We are believe that cooperation can bring more competitive solutions to our customers.",
        "最後，請把我的自我介紹翻成英文：「大家好，我是美玲，負責公司在歐洲市場的業務，很高興今天有機會和各位分享我們的經驗。」",
    ],
    "Japanese": [
        "はじめまして、健太と申します。大阪の小さな会社でエンジニアとして働いています。来月ロンドンで開かれる国際会議で、"
        "英語でプレゼンテーションをすることになりました。次の文章を自然な英語に翻訳していただけますか。"
        "「弊社は二〇〇八年に設立され、主に電子部品をヨーロッパと東南アジアに輸出しております。近年は再生可能エネルギー関連の製品開発に力を入れています。」",
        "ありがとうございます。「力を入れています」は英語でどう言うのが一番自然ですか？例文を三つお願いします。",
        "昨日、電車の中で気候変動についての英語の記事を読みましたが、mitigation や resilience といった単語が分かりませんでした。"
        "やさしい日本語で説明して、それぞれ例文を一つずつ教えてください。",
        "この英文をチェックしてください：I am work as engineer since five years in Osaka.",
        "最後に、自己紹介を英語にしてください。「皆さん、こんにちは。健太です。本日は弊社の取り組みについてお話しできることを嬉しく思います。」",
    ],
}


def server_count(server: LlamaServer, messages: list[dict[str, str]]) -> int:
    """The server's own count of a request's prompt; for one over its window, the count its refusal gives."""
    try:
        return server.prompt_tokens(messages)
    except urllib.error.HTTPError as error:
        refusal = context_overflow(error.read().decode())
        if refusal is None or refusal.prompt_tokens is None:
            raise
        return refusal.prompt_tokens


def replayed(server: LlamaServer, recorder: Recorder) -> tuple[list[int], list[int]]:
    """The server's own count of every reply and summary request Memora sent, replayed to it."""
    replies = [server_count(server, wire(r)) for r in recorder.replies]
    summaries = [
        server_count(server, chat_messages(request.instructions, [Message("user", request.input_text)]))
        for request, _ in recorder.summaries
    ]
    return replies, summaries
