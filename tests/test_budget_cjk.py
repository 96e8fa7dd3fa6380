"""The budget holds in Chinese and Japanese too, against an emulated server whose tokenizer counts Han at 2.05x.

SmolLM2's tokenizer counts Chinese at 2.05x o200k_base (Japanese 2.32x), far above a margin learned from
English. ``benchmarks.harness.servers.ChatServer(han_ratio=2.05)`` counts that way over the chatml prompt it renders,
in its usage, in llama.cpp's tokenizer endpoints (``tokenizer="llama.cpp"``) and against its context
window. Each test replays what Memora sent to the server's own count.
"""

from __future__ import annotations

import openai
import pytest

from benchmarks.harness.servers import ChatServer, ResponsesServer, closed_port
from memora.app.repl import counting_words
from memora.backends.chat_completions import NO_KEY, ChatCompletionsBackend, chat_messages
from memora.backends.offline import OfflineBackend
from memora.backends.openai_errors import context_overflow, explain_error
from memora.backends.openai_responses import PROXY_PROFILE, OpenAIResponsesBackend
from memora.backends.server_tokenizer import LlamaCppTokenizer, probe, probed
from memora.memory import ShortTermMemory
from memora.memory.backend import BackendError, ContextOverflowError
from memora.memory.core import budget_in_force, request_sizes
from memora.text.calibration import BEST_KNOWN_RATIO, WORST_KNOWN_RATIO, Calibration, kind_tokens, request_kinds
from memora.text.messages import Message
from memora.text.usage import Usage, UsageRecord
from tests.support.memory import chat

HAN = 2.05

PASTED = (
    "我叫美玲，在台北的一家貿易公司上班。下個月我要去倫敦參加一個國際會議，需要用英文做簡報。請幫我把下面這段話翻譯成自然的英文："
    "「我們公司成立於二〇〇八年，主要出口電子零件到歐洲和東南亞。近年來，我們積極開發綠色能源相關的產品，希望在未來五年內將營收提高一倍。"
    "我們相信，透過與各國夥伴的合作，可以為客戶提供更有競爭力的解決方案。」"
)
FOLLOW_UPS = (
    "謝謝！可以再翻譯這一段嗎？「我們的工廠位於桃園，員工約有三百人，其中研發人員佔三分之一。」",
    "「營收提高一倍」用英文還有其他說法嗎？請給我三個例句。",
    "請幫我檢查這句英文：We are believe that cooperation can bring more competitive solutions.",
    "最後，請把我的自我介紹翻成英文：「大家好，我是美玲，負責公司在歐洲市場的業務。」",
)


def conversation(turns: int) -> list[str]:
    """A learner who opens with a long pasted Chinese paragraph, then asks for translations."""
    texts = [PASTED, *FOLLOW_UPS]
    return [texts[i % len(texts)] for i in range(turns)]


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=NO_KEY, base_url=url, max_retries=0, timeout=10)


def backend(server: ChatServer) -> ChatCompletionsBackend:
    client = client_for(server.url)
    return ChatCompletionsBackend(client, probe=True)


def server_counts(server: ChatServer, kind: str) -> list[int]:
    """The server's own count of every request of ``kind`` (``reply`` streamed, ``summary`` not) it received."""
    return [server.prompt_tokens(r.body["messages"]) for r in server.requests if server.kind_of(r) == kind]


@pytest.fixture(autouse=True)
def fresh_probes(monkeypatch):
    """Each test's server is new: the process-wide probe cache starts empty."""
    import memora.backends.server_tokenizer as module

    monkeypatch.setattr(module, "_probed", {})
    monkeypatch.setattr(module, "_unreachable", {})


# -- the server's own count ----------------------------------------------------------------


def test_with_the_servers_tokenizer_no_request_passes_the_budget_from_the_first_on():
    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp", summary_text="- 美玲想翻譯公司簡介。") as server:
        memory = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000, max_recent_turns=6, max_reply_tokens=64)
        for text in conversation(8):
            chat(memory, text)
        replies, summaries = server_counts(server, "reply"), server_counts(server, "summary")
    assert summaries, "the conversation outgrew the budget, so something was folded"
    assert max(replies) <= 1000 and max(summaries) <= 1000, (replies, summaries)
    assert max(replies) > 600  # not vacuous: the fullest request used most of the budget
    assert counting_words(memory.server) == "the server's tokenizer, exact (llama.cpp /apply-template + /tokenize)"
    # The ledger holds the server's own count of each request, and it is what the server then reported.
    for record in memory.ledger:
        assert record.server_counted_input_tokens == record.input_tokens and not record.disagrees
        assert record.source == "reported by the server" and not record.billed


def test_the_servers_count_lets_a_message_through_that_the_worst_known_margin_would_refuse():
    # Gemma 3 counts Chinese at 0.83x o200k_base: the worst known ratio (2.45x) is far too pessimistic for it.
    with ChatServer(han_ratio=0.83, tokenizer="llama.cpp") as server:
        memory = ShortTermMemory(backend(server), model="gemma", max_input_tokens=900, max_reply_tokens=64)
        text = "\n".join([PASTED] * 3)
        worst = Calibration(exact=False).seeing([text])
        local = memory._message_tokens(Message("user", text)) + request_sizes(memory).fixed
        assert worst.server_estimate(local) > 900  # the worst known margin alone would refuse it
        chat(memory, text)
        assert server_counts(server, "reply")[0] <= 900


def test_without_a_tokenizer_the_first_chinese_requests_are_planned_with_the_worst_known_cjk_ratio():
    with ChatServer(han_ratio=HAN, summary_text="- 美玲想翻譯公司簡介。") as server:
        memory = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000, max_recent_turns=1, max_reply_tokens=64)
        assert counting_words(memory.server) == "local, with a learned margin"
        for text in conversation(6):
            chat(memory, text)
        replies, summaries = server_counts(server, "reply"), server_counts(server, "summary")
    assert summaries and max(replies) <= 1000 and max(summaries) <= 1000, (replies, summaries)
    assert memory.server.calibration.kind_ratio("cjk") < WORST_KNOWN_RATIO["cjk"]  # learned from the server's own counts
    assert dict(memory.server.calibration.learned)["cjk"] >= HAN * 0.95


def test_a_japanese_message_never_seen_before_is_planned_with_the_worst_known_ratio():
    calibration = Calibration(exact=False).learn(100, 111)  # English, learned
    assert calibration.ratio == pytest.approx(1.11 * 1.03)
    seeing = calibration.seeing(["明日は東京で会議があります。"])
    assert seeing.ratio == WORST_KNOWN_RATIO["cjk"]


def test_a_mixed_request_teaches_each_kind_an_upper_bound_of_its_own_ratio():
    texts = ["You are an English tutor. Answer briefly and kindly, please.", PASTED]
    counted = 4 + sum(sum(kind_tokens(t).values()) for t in texts)
    kinds = request_kinds(counted, texts)
    cjk, latin = kinds["cjk"], kinds["latin"]
    reported = round(cjk * 2.05 + latin * 1.1)
    learned = dict(Calibration(exact=False).learn(counted, reported, kinds).learned)
    # Latin credited at its best known ratio: what is left for CJK is at least its real 2.05x.
    assert learned["cjk"] == pytest.approx((reported - latin * BEST_KNOWN_RATIO["latin"]) / cjk)
    assert learned["cjk"] >= 2.05


def test_the_calibration_never_learns_from_a_figure_that_may_be_an_estimate():
    with ResponsesServer(input_overhead=30) as server:
        client = openai.OpenAI(api_key="sk-proxy-key-0000", base_url=server.url, max_retries=0)
        memory = ShortTermMemory(OpenAIResponsesBackend(client, profile=PROXY_PROFILE), max_input_tokens=1000)
        chat(memory, "Hello, I would like to practise ordering food in English.")
    record = memory.ledger[-1]
    assert record.source == "reported by the proxy" and not record.billed and not record.teaches
    assert memory.server.calibration.reports == 0 and memory.server.calibration.learned == ()


def test_only_openai_bills():
    with ResponsesServer() as server:
        client = openai.OpenAI(api_key="sk-openai-key-0000", base_url=server.url, max_retries=0)
        memory = ShortTermMemory(OpenAIResponsesBackend(client), max_input_tokens=1000)
        chat(memory, "Hello!")
    assert memory.ledger[-1].source == "billed by OpenAI" and memory.ledger[-1].billed


def test_a_reported_figure_that_disagrees_with_the_servers_tokenizer_is_shown_as_disagreeing():
    # LiteLLM 1.108's streamed usage: 84 where the server's own tokenizer counted 95.
    record = UsageRecord.of(
        turn=1, kind="reply", model="m", counted_input_tokens=83, usage=Usage(84, 10, by="the server"),
        latency_s=0.1, input_budget=90, server_counted_input_tokens=95,
    )  # fmt: skip
    assert record.disagrees and not record.trusted and record.over_budget  # over by the server's own count: 95 > 90
    assert record.input_label == "reported by the server, disagreeing with the server tokenizer's 95"
    assert Usage(84, 10, estimated=True, by="LiteLLM").label == "estimated by LiteLLM"
    assert Usage(84, 10, estimated=True).label == "estimated locally (o200k_base)"


# -- context overflow ------------------------------------------------------------------------


def test_a_context_overflow_is_learned_from_and_retried_and_never_reaches_the_learner():
    # The server's window (600) is smaller than the budget (1,000) plus the largest output: Memora was not told.
    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp", context_window=600, summary_text="- 美玲想翻譯公司簡介。") as server:
        memory = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000, max_recent_turns=6, max_reply_tokens=64)
        for text in conversation(10):
            chat(memory, text)
        overflows, replies = server.overflows, server_counts(server, "reply")
    assert overflows == 2  # the streamed reply, which ended empty, then its one-token diagnosis: learned once
    assert sum(count >= 600 for count in replies) == 1
    assert len(memory.history) == 20  # every turn completed, none refused
    assert memory.server.server_window == 600 and budget_in_force(memory) == 600 - memory.limits.max_summary_tokens
    # After the overflow every request fit the window it gave.
    overflowed = next(i for i, count in enumerate(replies) if count >= 600)
    assert all(count <= budget_in_force(memory) for count in replies[overflowed + 1 :])
    # Each reply's record keeps the budget in force when its request was checked (issue 43), not max_input_tokens:
    # from the overflow on, the window's, so none is judged against a budget it was never checked against.
    budgets = [record.input_budget for record in memory.ledger if record.kind == "reply"]
    assert budgets[:overflowed] == [1000] * overflowed
    assert budgets[overflowed:] == [budget_in_force(memory)] * (len(budgets) - overflowed)
    assert not any(record.over_budget for record in memory.ledger)


def test_an_overflow_no_fold_can_cure_says_what_to_change_and_never_to_resend():
    # A window smaller than the summary's output cap: no request can fit it.
    with ChatServer(han_ratio=HAN, context_window=150) as server:
        memory = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000, max_reply_tokens=64)
        with pytest.raises(BackendError) as failed:
            chat(memory, PASTED)
    assert "resend" not in str(failed.value).lower() and "MEMORA_MAX_INPUT_TOKENS" in str(failed.value)
    assert memory.history == []  # the turn rolled back; the page keeps the learner's text


@pytest.mark.parametrize(
    ("message", "prompt", "window"),
    [
        ("Requested tokens (4868) exceed context window of 4096", 4868, 4096),  # llama-cpp-python's own
        ("request (4868 tokens) exceeds the available context size (4096 tokens), try increasing it", 4868, 4096),  # llama.cpp
        (
            "This model's maximum context length is 4096 tokens. However, you requested 4868 tokens "
            "(3868 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            3868,
            4096,
        ),  # vLLM, and llama-cpp-python's server
        ("The input length exceeds the context length", None, None),  # Ollama
        ("Your input exceeds the context window of this model. Please adjust your input and try again.", None, None),  # OpenAI
    ],
)
def test_context_overflow_messages_are_recognised_with_their_figures(message, prompt, window):
    overflow = context_overflow(message)
    assert isinstance(overflow, ContextOverflowError) and (overflow.prompt_tokens, overflow.window) == (prompt, window)
    assert "resend" not in str(overflow).lower()


def test_openais_context_length_exceeded_code_is_an_overflow():
    request = openai._base_client.httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")  # type: ignore[attr-defined]
    response = openai._base_client.httpx2.Response(400, request=request)  # type: ignore[attr-defined]
    body = {"error": {"message": "Too long.", "code": "context_length_exceeded", "type": "invalid_request_error"}}
    error = openai.BadRequestError("Too long.", response=response, body=body)
    assert isinstance(explain_error(error), ContextOverflowError)


# -- probing ------------------------------------------------------------------------------------


def test_the_probe_finds_llama_cpps_tokenizer_once_per_server():
    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp") as server:
        found = probed(client_for(server.url), "smollm2")
        asked = len(server.side_requests)
        assert isinstance(found, LlamaCppTokenizer) and probed(client_for(server.url), "smollm2") is found
        assert len(server.side_requests) == asked  # cached: not probed again
        messages = [{"role": "system", "content": "Hi"}, {"role": "user", "content": PASTED}]
        assert found.count(messages) == server.prompt_tokens(messages)
        assert server.requests == []  # no chat request was spent on probing


def test_the_tokenizer_endpoints_go_through_the_chat_clients_own_http_client():
    """Its key and default headers reach the tokenizer as they reach the chat endpoint (its proxy and connection
    pool are the same object too); the SDK's retries are not spent on a tokenizer."""
    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp") as server:
        client = openai.OpenAI(api_key="sk-classroom-0000", base_url=server.url, default_headers={"X-Classroom": "7b"})
        found = probed(client, "smollm2")
        assert isinstance(found, LlamaCppTokenizer) and found.endpoint.client is client
        paths = {request.path for request in server.side_requests}
        assert {"/apply-template", "/tokenize"} <= paths
        for request in server.side_requests:
            assert request.headers["authorization"] == "Bearer sk-classroom-0000"
            assert request.headers["x-classroom"] == "7b"


def test_a_server_without_a_tokenizer_is_planned_with_the_margin_and_a_server_down_is_probed_again_later():
    with ChatServer() as server:
        assert probe(client_for(server.url), "m") is None
    down = client_for(f"http://127.0.0.1:{closed_port()}/v1")
    assert probed(down, "m") is None
    import memora.backends.server_tokenizer as module

    key = (str(down.base_url), "m")
    assert key not in module._probed and key in module._unreachable  # asked again later, not never


def test_the_chat_backend_counts_what_it_will_send():
    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp") as server:
        chat_backend = backend(server)
        messages = (Message("user", PASTED),)
        assert chat_backend.count_request("m", "Be kind.", messages) == server.prompt_tokens(chat_messages("Be kind.", messages))


def test_the_status_panel_says_which_count_the_budget_uses():
    from memora.app.page.views import calibration_note

    with ChatServer(han_ratio=HAN, tokenizer="llama.cpp") as server:
        exact = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000)
        assert "the server's tokenizer, exact (llama.cpp /apply-template + /tokenize)" in calibration_note(exact, "en")
        assert "伺服器的分詞器，精確（llama.cpp /apply-template + /tokenize）" in calibration_note(exact, "zh-TW")
    with ChatServer(han_ratio=HAN) as server:
        local = ShortTermMemory(backend(server), model="smollm2", max_input_tokens=1000)
        local.plan("明日は東京で会議があります。")
        note = calibration_note(local, "en")
        assert note.startswith("Token counts: local, with a learned margin per kind of text")
        assert "Chinese/Japanese 2.45× (worst known)" in note and "Latin 1.71× (worst known)" in note
    offline = calibration_note(ShortTermMemory(OfflineBackend()), "en")
    assert "offline" in offline and "server's own tokenizer" not in offline


@pytest.mark.parametrize(("answer", "counts"), [("litellm-provider", True), ("litellm-estimate", False)])
def test_litellms_token_counter_is_used_only_when_the_provider_counted(answer, counts):
    with ChatServer(han_ratio=HAN, tokenizer=answer) as server:
        found = probe(client_for(server.url), "m")
    assert (found is not None and found.source == "LiteLLM /utils/token_counter") is counts


def test_a_summary_request_the_server_counts_over_the_budget_is_cut_further_before_it_is_sent():
    from memora.memory.backend import CHAT_SERVER_PROFILE
    from memora.memory.server import ServerCount, Summarizer
    from memora.text.tokens import LocalTokenCounter, count_message
    from tests.support.fakes import ScriptedBackend

    def exact(model, instructions, messages):  # a tokenizer counting three times o200k_base
        return 3 * LocalTokenCounter().count(model, instructions, messages)

    taught: list[ServerCount] = []
    fake = ScriptedBackend(profile=CHAT_SERVER_PROFILE, summary_text=lambda request: "- 美玲想翻譯公司簡介。")
    messages = (Message("user", PASTED), Message("assistant", "Sure. Here it is in English."))
    summarizer = Summarizer("m", "Summarize the conversation.", 40)
    version, record = summarizer.fold(
        fake, "", messages, (0, 2), room=400, message_tokens=tuple(count_message(m.role, m.content) for m in messages),
        turn=1, served_by="m", input_budget=500, exact=exact, counts=taught,
    )  # fmt: skip
    sent = fake.summaries[-1]
    assert exact("m", sent.instructions, [Message("user", sent.input_text)]) == record.server_counted_input_tokens <= 500
    assert taught and taught[0].server_tokens > 500  # the first count, over the budget, taught the calibration
    assert version.clipped == 1  # the pasted paragraph's middle was cut, with a marker


# -- a summary request the server counts over the budget is cut again, and its turn goes on --------------------------

VOCABULARY = "\n".join(
    f"{english} - {chinese}"
    for english, chinese in (
        ("luggage", "行李"),
        ("boarding pass", "登機證"),
        ("aisle seat", "走道座位"),
        ("customs", "海關"),
        ("receipt", "收據"),
        ("platform", "月台"),
        ("return ticket", "來回票"),
        ("delay", "延誤"),
        ("gate", "登機門"),
        ("check-in", "報到"),
    )
)
TRAVEL = (
    f"Please quiz me on these words:\n{VOCABULARY}",
    "How do I ask for directions to the British Museum?\nPlease give two ways.",
    f"Again, a shorter list this time:\n{VOCABULARY[:120]}",
)


def english_and_chinese(turns: int) -> list[str]:
    """A learner who alternates vocabulary lists, one word a line, with Chinese paragraphs to translate."""
    texts = [text for pair in zip(TRAVEL * 2, (PASTED, *FOLLOW_UPS), strict=False) for text in pair]
    return [texts[i % len(texts)] for i in range(turns)]


def summary_counts(server: ChatServer) -> int:
    """How many times the server's tokenizer counted a summary request (vLLM's /tokenize of its messages)."""
    return sum(r.path == "/tokenize" and "New messages:" in str(r.body) for r in server.side_requests)


@pytest.mark.parametrize("fold_ahead", [False, True], ids=["folding in the turn", "folding ahead"])
@pytest.mark.parametrize(
    "tokenizer",
    [{"newline_tokens": 24}, {"han_ratio": 2.5, "newline_tokens": 24}, {"han_ratio": 3.0, "newline_tokens": 24}],
    ids=["line breaks", "Chinese at 2.5x", "Chinese at 3x"],
)
def test_a_summary_request_cut_again_for_the_servers_count_never_fails_the_turn_it_was_billed_for(tokenizer, fold_ahead):
    # vLLM's /tokenize here charges 24 tokens for each line break, which the o200k_base plan cannot know: a summary
    # request of one-word-a-line lists is counted over the budget, cut again and sent. That path once crashed every
    # such turn after its summary was billed.
    budget, turns = 1000, 12
    texts = english_and_chinese(turns)
    summary = "- 美玲 plans a trip to London.\n- She wants natural English."
    reply = ("Sure.\n", "Here:\n", "1. luggage\n2. gate\n")
    with ChatServer(tokenizer="vllm", summary_text=summary, deltas=reply, **tokenizer) as server:
        memory = ShortTermMemory(backend(server), model="m", max_input_tokens=budget, max_recent_turns=2, max_reply_tokens=64)
        for text in texts:
            chat(memory, text)  # a failed turn raises here
            if fold_ahead:
                memory.prefold()
        replies, summaries = server_counts(server, "reply"), server_counts(server, "summary")
        recounted = summary_counts(server) - len(summaries)
    assert len(replies) == turns and [m.content for m in memory.history[::2]] == texts
    assert max(replies) <= budget and max(summaries) <= budget, (replies, summaries)
    assert recounted > 0, "not vacuous: some summary request was counted over the budget and cut again"
    # Every summary the server billed is in the ledger, and the ledger is the bill.
    assert [r.kind for r in memory.ledger].count("summary") == len(summaries)
    assert memory.session_total_tokens == sum(tokens for _, tokens in server.billed)
