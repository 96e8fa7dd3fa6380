"""The page under faults, bad input, many sessions and a locked classroom setup (AppTest).

The page half of the fault matrix (docs/fault-matrix.md): every fault kind,
at several steps, must leave the memory consistent, put the user's text back
into the chat input and say why. Then bad input, session isolation (2 and 20
AppTest sessions over the same script), the classroom lock and caps from the
environment, and the key's absence from everything a user or a log can see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.harness.servers import ResponsesServer, closed_port, status
from memora.app.page import state as keys
from memora.app.page import tools
from memora.app.page.browser import cookie_script
from memora.app.page.i18n import t
from memora.app.page.tools import upload_box_style
from memora.backends.openai_responses import OpenAIResponsesBackend
from memora.classroom.limits import SessionLimits
from memora.classroom.store.owner import new_browser_secret
from memora.classroom.transcript.format import dumps_transcript, parse_transcript, restore_memory
from memora.memory import ShortTermMemory
from memora.memory.core import minimum_budget
from memora.teaching.ledger import ledger_frame
from tests.support.app import APP, CLASSROOM_ENV, ENV_NAMES, assert_alternating, finish, new_app, open_panels, send, texts, tree_text, words
from tests.support.app import CLASSROOM_KEY as KEY
from tests.support.fakes import ScriptedBackend
from tests.support.faults import FAULTS, HTTP_KINDS, SCRIPTED_STEP, arm_http, heal_http

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def clean_env(tmp_path, monkeypatch):
    """As tests/test_app.py: no secrets file, no key, no classroom settings, unless a test sets them."""
    monkeypatch.chdir(tmp_path)
    # These page tests fold by the article's window, the default, set so a configured environment cannot change it.
    monkeypatch.setenv("MEMORA_FOLD_POLICY", "window")
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in (*ENV_NAMES, *CLASSROOM_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    with ResponsesServer() as running:
        yield running


def online_memory(server: ResponsesServer, **options) -> tuple[ShortTermMemory, OpenAIResponsesBackend, openai.OpenAI]:
    client = openai.OpenAI(api_key=KEY, base_url=server.url, timeout=10.0, max_retries=0)
    backend = OpenAIResponsesBackend(client)
    return ShortTermMemory(backend, **options), backend, client


# -- the fault matrix, page half ------------------------------------------------------------

PAGE_CELLS = [(step, kind) for kind in ("exception", "stop", "rerun", *HTTP_KINDS) for step in ("count", "fold", "reply", "midstream")]


@pytest.mark.parametrize(("step", "kind"), PAGE_CELLS, ids=[f"{s}-{k}" for s, k in PAGE_CELLS])
def test_page_fault_restores_the_text_and_says_why(step: str, kind: str, server: ResponsesServer) -> None:
    text = "I live in Taipei."
    if kind in HTTP_KINDS:
        memory, backend, client = online_memory(server, max_recent_turns=1)
        billed = server.billed
    else:
        backend = ScriptedBackend()
        memory = ShortTermMemory(backend, max_recent_turns=1)
        billed = backend.billed
    if step == "count":
        backend.count_remotely = True  # as MEMORA_TOKEN_COUNTING=api makes it
    at = new_app(memory)
    send(at, "My name is Ana.")
    send(at, "My level is B1.")
    history = list(memory.history)
    if step == "fold":
        # The page already folded, right after the last reply, what this turn needed (prefold).
        # Narrowing the window makes this turn's own prepare() fold again, so the fault hits that fold.
        memory.configure(max_recent_turns=0)

    if kind == "refused" and step in ("count", "reply"):
        # The page folded right after the last reply, so this turn's first request is the faulted one.
        backend.client = client.with_options(base_url=f"http://127.0.0.1:{closed_port()}/v1")
    elif kind in HTTP_KINDS:
        arm_http(step, kind, server, backend, client)
    else:
        backend.fail_next(SCRIPTED_STEP[step], FAULTS[kind])
    # Streamlit's stop and rerun, raised by the backend, reach the reply job's thread: they end the turn like any failure.
    finish(at.chat_input[0].set_value(text).run())

    assert not at.exception
    assert memory.history == history
    assert_alternating(memory)
    assert [(r.kind, r.total_tokens) for r in memory.ledger] == billed
    # The fault hit the intended step: the fold that completed after the last reply stays folded.
    assert memory.summarized_message_count == 2
    assert [r.kind for r in memory.ledger] == ["reply", "reply", "summary"]
    assert at.chat_input[0].proto.value == text
    shown = [e.value for e in (*at.error, *at.warning)]
    assert any("Its text is back in the input box." in message for message in shown), shown
    assert len(at.chat_message) == len(memory.history)
    assert KEY not in tree_text(at)

    # The page stays usable: the same text, resent, completes the turn.
    if kind in HTTP_KINDS:
        heal_http(backend, client)
    send(at, text)
    assert memory.history[-2].content == text
    assert memory.summarized_message_count == (6 if step == "fold" else 4)
    assert not at.error and not at.warning


def test_page_fault_messages_name_the_cause(server: ResponsesServer) -> None:
    memory, _, _ = online_memory(server)
    at = new_app(memory)
    server.queue_for("reply", status(429, "Rate limit reached for requests."))
    send(at, "Hello?")
    assert at.error[0].value == (
        "Your message got no reply: The model request failed: The model server is rate-limiting or out of quota "
        "(HTTP 429). Wait a moment and resend. Its text is back in the input box."
    )


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "blank", ["   ", "\n\t \n", "\u3000\u3000", " \r\n "], ids=["spaces", "newlines-tab", "ideographic-spaces", "crlf"]
)
def test_blank_messages_get_a_clear_message_and_the_page_stays_usable(blank: str, backend) -> None:
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, blank)
    assert at.warning[0].value == "The message is empty. Write something first."
    assert memory.history == [] and backend.replies == [] and not at.chat_message
    send(at, "Hello!")
    assert [m.content for m in memory.history] == ["Hello!", "reply 1"]


def test_a_200000_character_paste_is_refused_before_any_request_and_never_drawn(backend) -> None:
    memory = ShortTermMemory(backend, caps=SessionLimits())  # the caps the app's settings install by default
    at = new_app(memory)
    send(at, "Hello!")
    paste = ("The quick brown fox jumps over the lazy dog. " * 4445)[:200_000]
    send(at, paste)
    assert (len(backend.replies), len(backend.summaries)) == (1, 0)
    assert [m.content for m in memory.history] == ["Hello!", "reply 1"]
    assert len(at.chat_message) == 2
    assert at.error[0].value == (
        "Your message was not sent: The message has 200,000 characters; the limit is 20,000. Its text is back in the input box."
    )
    # Only the input box holds it: no chat message, markdown, code or alert carries it back to the browser.
    assert paste not in texts(at)
    assert at.chat_input[0].proto.value == paste
    # A command-shaped paste is refused by the same cap, before the command is parsed into a message.
    send(at, "/" + paste)
    assert "200,001 characters" in at.error[0].value and not at.code
    send(at, "Still here?")
    assert memory.history[-2].content == "Still here?"


def test_a_message_alone_over_the_budget_is_refused_before_it_is_drawn(backend) -> None:
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    too_long = "travel " * 1500
    send(at, too_long)
    assert memory.history == [] and backend.replies == [] and backend.summaries == []
    assert not at.chat_message and too_long not in texts(at)
    assert "but the budget (max_input_tokens) is 1000" in at.error[0].value
    assert at.chat_input[0].proto.value == too_long


def test_cjk_and_emoji_round_trip_through_the_page_commands_and_export(backend) -> None:
    text = "我想練習旅遊英文。한국어도 조금 해요. 日本語も 🌧️☔ 👩🏽‍💻 café naïve — “quotes”"
    memory = ShortTermMemory(backend, max_recent_turns=0)
    at = new_app(memory)
    send(at, text)
    send(at, "Next: 下一個問題 🚆")
    assert memory.history[0].content == text
    assert words(at.chat_message[0]) == text
    assert text in memory.summary  # folded with window 0, byte for byte
    send(at, "/history")
    assert text in at.code[0].value
    restored = restore_memory(parse_transcript(dumps_transcript(memory)), ScriptedBackend())
    assert restored.history == memory.history and restored.summary == memory.summary


def test_markdown_and_html_from_users_and_models_render_as_text() -> None:
    hostile = "**bold** <script>alert(1)</script> <img src=x onerror=alert(2)> [link](javascript:alert(3))"
    at = new_app()  # offline: its reply and its summary quote the user's text back
    at.session_state[keys.MEMORY].configure(max_recent_turns=0)
    send(at, hostile)
    send(at, "Second message, so the first one is folded into the summary.")
    at.session_state[keys.HISTORY_PANEL_OPEN] = True
    at.run()
    assert words(at.chat_message[0]) == hostile
    assert "<script>" in at.session_state[keys.MEMORY].summary
    assert all(not m.proto.allow_html for m in at.markdown)
    # The only raw HTML is the cookie script (memora/app/page/browser.py) and the upload box's style sheet
    # (memora/app/page/tools.py, the catalog's words for it), and neither holds anything of any message.
    blocked = t("en", "conversation.cookies_blocked")
    expected = [cookie_script(at.session_state[keys.BROWSER_SECRET], blocked), upload_box_style("en")]
    assert sorted(h.proto.body for h in at.get("html")) == sorted(expected)


def test_no_page_code_allows_raw_html(monkeypatch) -> None:
    """st.markdown escapes HTML unless unsafe_allow_html is set; st.html and components render it raw.

    Two exceptions: memora/app/page/browser.py sets the browser's cookie with one st.html script, built only
    from a secret that must match its pattern (a hostile value raises); memora/app/page/tools.py sets the upload
    box's words with one style sheet, whose catalog words cannot end it."""
    sources = [ROOT / "streamlit_app.py", *sorted((ROOT / "memora" / "app" / "page").glob("*.py"))]
    for path in sources:
        code = path.read_text(encoding="utf-8")
        for raw in ("unsafe_allow_html", "st.html(", "components.v1", "components.html"):
            if path.name == "browser.py" and raw == "st.html(":
                assert code.count(raw) == 1 and "st.html(\n        cookie_script(secret, blocked_notice, forgotten)," in code
                continue
            if path.name == "tools.py" and raw == "st.html(":
                assert code.count(raw) == 1 and "st.html(upload_box_style(lang))" in code
                continue
            assert raw not in code, f"{path.name} uses {raw}"
    for hostile in ('"; alert(1); "', "</script><img src=x>", "A" * 42 + "'"):
        with pytest.raises(ValueError):
            cookie_script(hostile, "Cookies are blocked.")
        with pytest.raises(ValueError):
            cookie_script(new_browser_secret(), "Cookies are blocked.", forgotten=hostile)
    # A hostile catalog word cannot end the upload box's style sheet either.
    monkeypatch.setattr(tools, "t", lambda lang, key, **fmt: '</style><img src=x onerror=alert(1)> "quoted"')
    sheet = upload_box_style("en")
    assert sheet.count("</style>") == 1 and sheet.endswith("</style>") and "<img" not in sheet
    # The blocked-cookies sentence comes from the catalogs, but even a hostile one cannot end the script or add markup.
    script = cookie_script(new_browser_secret(), '</script><img src=x onerror=alert(1)> & "quoted"')
    assert script.count("</script>") == 1 and script.endswith("</script>") and "<img" not in script and "\\u0026 " in script


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("/status foo", "The command /status takes no arguments (got: foo)."),
        ("/history\nand more", "The command /history takes no arguments (got: and more)."),
        ("/summary    <b>x</b>", "The command /summary takes no arguments (got: <b>x</b>)."),
        ("/", "Unknown command /. The commands are /history, /context, /summary and /status."),
        ("//history", "Unknown command //history. The commands are /history, /context, /summary and /status."),
        ("/statuses", "Unknown command /statuses. The commands are /history, /context, /summary and /status."),
    ],
    ids=["argument", "second-line", "html-argument", "bare-slash", "double-slash", "near-miss"],
)
def test_commands_with_odd_arguments_get_a_clear_message_and_call_no_model(command: str, expected: str, backend) -> None:
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    send(at, "Hello!")
    send(at, command)
    assert at.warning[0].value == expected
    assert len(backend.replies) == 1 and len(memory.history) == 2
    assert all(not m.proto.allow_html for m in at.markdown)


@pytest.mark.parametrize("command", ["/HISTORY", "  /history  ", "/History"])
def test_commands_ignore_case_and_surrounding_blanks(command: str, backend) -> None:
    at = new_app(ShortTermMemory(backend))
    send(at, "Hello!")
    send(at, command)
    assert at.code[0].value.splitlines()[0] == "  1 [current] user: Hello!", "the message the last request answered"


def test_budget_below_the_instructions_is_refused_with_the_floor(backend) -> None:
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    floor = minimum_budget(memory)
    for nonsense in (50, floor - 1):
        at.number_input(key=keys.BUDGET_INPUT).set_value(nonsense).run()
        assert memory.max_input_tokens == 1000
        assert at.error[0].value.startswith(f"Refused: max_input_tokens must be at least {floor}")
        assert at.number_input(key=keys.BUDGET_INPUT).value == 1000
    at.number_input(key=keys.BUDGET_INPUT).set_value(floor).run()
    assert memory.max_input_tokens == floor and not at.error


def test_zero_recent_turns_is_valid_and_folds_everything_completed(backend) -> None:
    memory = ShortTermMemory(backend)
    at = new_app(memory)
    at.number_input(key=keys.WINDOW_INPUT).set_value(0).run()
    assert memory.max_recent_turns == 0 and not at.error
    send(at, "My name is Ana.")
    send(at, "My level is B1.")
    assert memory.summarized_message_count == 4  # the second pair too, folded right after its reply
    assert list(memory.last_prepared.sources) == ["summary", "current"]


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("MEMORA_MAX_INPUT_TOKENS", "0", "MEMORA_MAX_INPUT_TOKENS must be a whole number from 1 to 1000000000000, not 0"),
        ("MEMORA_MAX_INPUT_TOKENS", "-1", "MEMORA_MAX_INPUT_TOKENS must be a whole number from 1 to 1000000000000, not -1"),
        ("MEMORA_MAX_INPUT_TOKENS", "lots", "MEMORA_MAX_INPUT_TOKENS must be a whole number"),
        ("MEMORA_MAX_INPUT_TOKENS", "50", "MEMORA_CONTEXT_WINDOW do not fit together: max_input_tokens must be at least"),
        ("MEMORA_MAX_RECENT_TURNS", "-1", "MEMORA_MAX_RECENT_TURNS must be a whole number from 0 to 1000000"),
        ("MEMORA_MAX_TURNS", "0", "MEMORA_MAX_TURNS must be a whole number from 1 to 1000000"),
        ("MEMORA_MAX_MESSAGE_CHARS", "-5", "MEMORA_MAX_MESSAGE_CHARS must be a whole number from 1 to 200000"),
        ("MEMORA_LOCK_SETTINGS", "maybe", "MEMORA_LOCK_SETTINGS must be true or false"),
    ],
)
def test_nonsense_in_the_environment_stops_the_page_and_says_why(monkeypatch, name: str, value: str, reason: str) -> None:
    """Issue 28 turned this around: the page used to open offline on the defaults; now it opens nothing at all."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv(name, value)
    at = AppTest.from_file(APP, default_timeout=30).run()
    assert not at.exception
    assert keys.MEMORY not in at.session_state, "no memory, so the key cannot be spent"
    assert at.error[0].value.startswith("Memora cannot start until the") and reason in at.code[0].value
    assert len(at.chat_input) == 0
    assert KEY not in tree_text(at)


# -- session isolation ----------------------------------------------------------------------------


@pytest.mark.parametrize("sessions", [2, 20])
def test_sessions_never_see_each_others_history_summary_settings_or_key(monkeypatch, server: ResponsesServer, sessions: int) -> None:
    monkeypatch.setenv("MEMORA_MAX_RECENT_TURNS", "0")  # every second message folds the first into the summary
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)  # where a typed key's requests go: the local server
    apps = [new_app() for _ in range(sessions)]
    # Interleaved, as concurrent students would be: everyone's first message, then everyone's second.
    for number, at in enumerate(apps):
        send(at, f"My name is Student{number:02d}.")
    apps[0].text_input(key=keys.API_KEY_INPUT).input("sk-test-typed-by-student-00").run()
    apps[1].number_input(key=keys.BUDGET_INPUT).set_value(1500).run()
    for number, at in enumerate(apps):
        send(at, f"I am {number + 10} years old.")

    memories = [at.session_state[keys.MEMORY] for at in apps]
    assert len({id(m) for m in memories}) == sessions
    for number, (at, memory) in enumerate(zip(apps, memories, strict=True)):
        own = f"Student{number:02d}"
        everyone_else = [f"Student{other:02d}" for other in range(sessions) if other != number]
        assert [m.content for m in memory.history[::2]] == [f"My name is {own}.", f"I am {number + 10} years old."]
        # Session 0 switched to the local server, whose summary is a fixed sentence.
        assert (own in memory.summary) != (number == 0) and not any(name in memory.summary for name in everyone_else)
        page = tree_text(at)
        assert own in page and not any(name in page for name in everyone_else)
        assert memory.max_input_tokens == (1500 if number == 1 else 1000)
        settings = at.session_state[keys.SETTINGS]
        if number == 0:
            assert settings.api_key == "sk-test-typed-by-student-00" and not memory.server.backend.offline
            assert [r.headers["authorization"] for r in server.requests] == ["Bearer sk-test-typed-by-student-00"] * 2
        else:
            assert settings.api_key is None and memory.server.backend.offline
            assert at.session_state[keys.KEY_SOURCE] is None
        assert "sk-test-typed-by-student-00" not in page


def test_nothing_is_cached_across_sessions() -> None:
    """st.cache_resource and st.cache_data are shared by every session; the page must keep session data out of them."""
    # Add a cached function here only if it reads no session data (a conversation, a key, a setting).
    # conversation.py's shared_store: one store connection per URL, from the server's own settings; it holds no conversation.
    allowed: set[str] = {"conversation.py:shared_store"}
    sources = [ROOT / "streamlit_app.py", *sorted((ROOT / "memora").rglob("*.py"))]
    cached = set()
    for path in sources:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            decorator = line.lstrip().startswith("@")  # a docstring that names the cache caches nothing
            if decorator and ("cache_resource" in line or "cache_data" in line or "st.cache" in line):
                # Named by the function it decorates, so that lines added above it do not move it.
                following = next((later for later in lines[number + 1 :] if later.lstrip().startswith("def ")), "")
                cached.add(f"{path.name}:{following.split('def ', 1)[-1].split('(', 1)[0] or number + 1}")
    assert cached <= allowed, f"review these for session data: {sorted(cached - allowed)}"


# -- classroom: lock and caps from the environment ------------------------------------------------


@pytest.fixture
def classroom(monkeypatch, server: ResponsesServer) -> ResponsesServer:
    """A teacher's setup: one key, a local stand-in for OpenAI, settings locked."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("MEMORA_MAX_RETRIES", "0")
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "true")
    return server


def test_locked_settings_are_disabled_and_the_key_field_is_hidden(classroom: ResponsesServer) -> None:
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    assert not memory.server.backend.offline and memory.model == "gpt-5-mini"
    assert "Settings are locked for this shared page" in at.info[0].value
    assert at.selectbox(key=keys.BACKEND_INPUT).disabled
    assert at.text_input(key=keys.MODEL_INPUT).disabled
    assert at.number_input(key=keys.BUDGET_INPUT).disabled and at.number_input(key=keys.WINDOW_INPUT).disabled
    assert not [w for w in at.text_input if w.key == keys.API_KEY_INPUT]
    send(at, "Hello!")
    assert memory.history[-1].content == classroom.reply_text and classroom.requests[-1].body["model"] == "gpt-5-mini"


def test_a_locked_page_with_a_model_turns_the_retention_probe_off(classroom: ResponsesServer) -> None:
    """The probe's requests run outside the session caps, so a locked classroom page does not offer it."""
    at = new_app()
    assert "the probe is off" in " ".join(c.value for c in at.caption)
    assert not [b for b in at.button if b.label == "Run the probe"]
    assert classroom.requests == []


def test_the_lock_is_enforced_on_the_server_not_only_in_the_widgets(classroom: ResponsesServer) -> None:
    """A crafted websocket message can carry a disabled widget's new value; the server discards it.

    AppTest, like a browser, will not change a disabled widget, so the test sets the
    value behind its guard: the server then receives what a hand-made request would send.
    Streamlit 1.67 itself drops a disabled widget's reported change and skips its
    callback; each settings callback also checks the lock (``_refuse_when_locked``)
    before changing anything, so the lock holds even if a widget were drawn enabled.
    Writing the widget's session key directly changes nothing either: only callbacks apply settings.
    """
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    backend = memory.server.backend

    def forge(widget, value) -> None:
        assert widget.disabled
        widget._value = value
        at.run()

    forge(at.selectbox(key=keys.BACKEND_INPUT), "offline")
    forge(at.text_input(key=keys.MODEL_INPUT), "gpt-5-pro")
    forge(at.number_input(key=keys.BUDGET_INPUT), 100_000)
    forge(at.number_input(key=keys.WINDOW_INPUT), 50)
    at.session_state[keys.API_KEY_INPUT] = "sk-test-student-own-key"
    at.run()
    assert memory.server.backend is backend and memory.model == "gpt-5-mini"
    assert (memory.max_input_tokens, memory.max_recent_turns) == (1000, 3)
    assert at.number_input(key=keys.BUDGET_INPUT).value == 1000
    assert at.text_input(key=keys.MODEL_INPUT).value == "gpt-5-mini"
    assert at.session_state[keys.SETTINGS].api_key == KEY and at.session_state[keys.KEY_SOURCE] == "env"
    send(at, "Hello!")
    assert classroom.requests[-1].body["model"] == "gpt-5-mini"
    # Deleting the conversation keeps the lock and the teacher's settings.
    next(b for b in at.button if b.label == "Yes, delete it").click().run()
    assert at.session_state[keys.SETTINGS].locked and at.selectbox(key=keys.BACKEND_INPUT).disabled


def test_turn_cap_from_the_environment(classroom: ResponsesServer, monkeypatch) -> None:
    monkeypatch.setenv("MEMORA_MAX_TURNS", "2")
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    send(at, "One.")
    send(at, "Two.")
    sent = len(classroom.requests)
    send(at, "Three.")
    assert len(classroom.requests) == sent and len(memory.history) == 4
    assert at.error[0].value == (
        "Your message was not sent: This session has reached its limit of 2 turns. To go on, start a new conversation: "
        "open the class link in a new tab, or delete this one. "
        "Its text is back in the input box."
    )
    assert at.chat_input[0].proto.value == "Three."


def test_token_cap_from_the_environment(classroom: ResponsesServer, monkeypatch) -> None:
    monkeypatch.setenv("MEMORA_MAX_SESSION_TOKENS", "50")
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    send(at, "One.")
    spent = memory.session_total_tokens
    assert spent >= 50
    send(at, "Two.")
    assert len(memory.history) == 2
    assert f"This session has used {spent:,} of its 50 tokens." in at.error[0].value
    assert at.chat_input[0].proto.value == "Two."


def test_message_character_cap_from_the_environment(classroom: ResponsesServer, monkeypatch) -> None:
    monkeypatch.setenv("MEMORA_MAX_MESSAGE_CHARS", "40")
    at = new_app()
    text = "x" * 41
    send(at, text)
    assert classroom.requests == [] and not at.chat_message
    assert "The message has 41 characters; the limit is 40." in at.error[0].value
    assert at.chat_input[0].proto.value == text
    send(at, "x" * 40)
    assert len(at.session_state[keys.MEMORY].history) == 2


# -- secrets ----------------------------------------------------------------------------------------------


def test_the_key_is_in_no_page_log_error_export_or_ledger(classroom: ResponsesServer, caplog, capsys) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="openai")  # the SDK's own debug log, as OPENAI_LOG=debug gives
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    memory.configure(max_recent_turns=1)
    send(at, "My name is Ana.")
    send(at, "My level is B1.")
    send(at, "I live in Taipei.")  # a fold and a reply
    classroom.queue_for("reply", status(401, f"Incorrect API key provided: {KEY}. You can find your API key at ..."))
    send(at, "Does a 401 show my key?")
    error = at.error[0].value
    assert "rejected the API key (HTTP 401)" in error and KEY not in error
    classroom.queue_for("reply", status(400, f"Invalid request for key {KEY}"))
    send(at, "And a 400?")
    assert "HTTP 400" in at.error[0].value and KEY not in at.error[0].value
    at.session_state[keys.USAGE_PANEL_OPEN] = True
    at.session_state[keys.HISTORY_PANEL_OPEN] = True
    at.run()

    assert classroom.requests[0].headers["authorization"] == f"Bearer {KEY}", "the key was really used"
    assert KEY not in tree_text(at)
    assert "Sending HTTP Request" in caplog.text, "the SDK's debug log was captured"
    assert KEY not in caplog.text
    captured = capsys.readouterr()
    assert KEY not in captured.out and KEY not in captured.err
    assert KEY.encode() not in dumps_transcript(memory)
    assert KEY not in ledger_frame(memory.ledger).to_csv(index=False)
    assert KEY not in repr(at.session_state[keys.SETTINGS]) and KEY not in repr(memory.ledger)


def test_every_settings_callback_checks_the_lock_itself(classroom: ResponsesServer, monkeypatch) -> None:
    """A widget drawn enabled (here: before the lock applied) still cannot change locked settings."""
    monkeypatch.setenv("MEMORA_LOCK_SETTINGS", "false")
    at = new_app()
    memory = at.session_state[keys.MEMORY]
    backend = memory.server.backend
    at.session_state[keys.SETTINGS] = at.session_state[keys.SETTINGS].with_changes(locked=True)
    at.number_input(key=keys.BUDGET_INPUT).set_value(100_000).run()
    assert memory.max_input_tokens == 1000
    assert "Refused: the settings are locked for this shared page." in [e.value for e in at.error]
    at.session_state[keys.SETTINGS] = at.session_state[keys.SETTINGS].with_changes(locked=False)
    at.run()
    at.session_state[keys.SETTINGS] = at.session_state[keys.SETTINGS].with_changes(locked=True)
    at.selectbox(key=keys.BACKEND_INPUT).set_value("offline").run()
    assert memory.server.backend is backend and at.selectbox(key=keys.BACKEND_INPUT).value == "openai"


def test_the_lock_and_caps_also_come_from_secrets(server: ResponsesServer) -> None:
    at = open_panels(AppTest.from_file(APP, default_timeout=30))
    at.secrets["OPENAI_API_KEY"] = KEY
    at.secrets["OPENAI_BASE_URL"] = server.url
    at.secrets["MEMORA_LOCK_SETTINGS"] = True
    at.secrets["MEMORA_MAX_TURNS"] = 1
    at.run()
    assert at.session_state[keys.KEY_SOURCE] == "secrets"
    assert at.selectbox(key=keys.BACKEND_INPUT).disabled and at.number_input(key=keys.BUDGET_INPUT).disabled
    send(at, "One.")
    send(at, "Two.")
    assert "limit of 1 turns" in at.error[0].value and len(at.session_state[keys.MEMORY].history) == 2
    assert KEY not in tree_text(at)
