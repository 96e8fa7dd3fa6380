"""A big class in Chromium: two processes behind the shipped Caddyfile on one PostgreSQL, a stop and a rolling restart.

``python -m memora.serve --processes 2`` as a teacher starts it (offline, so no key), Debian's Caddy and Chromium.
Two students, each a browser context of their own, pinned by Caddy's cookie to a different process, chat; the
first one's process is stopped (SIGTERM), and she sends her next message at once: Streamlit's page reconnects by
itself, through Caddy, to the other process, which opens her conversation from PostgreSQL (the ``?c=`` of her
address bar, her browser's cookie) and answers it there; the second student never notices. Then the teacher
restarts the class (``kill -HUP``): every process is replaced, and both students go on. No response either browser
receives is a 5xx.
"""

from __future__ import annotations

from benchmarks.harness.browser import Person, chat_texts, chromium, require_browser
from tests.support.bigclass import big_class, caddy_cookie
from tests.support.budget import isolated_postgres_url


def student(browser, proxy: str, pinned_to: int, errors: list[str]) -> Person:
    """A student's own browser, pinned by Caddy's cookie to the process on ``pinned_to``; every 5xx kept in ``errors``."""
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    context.add_cookies([{"name": "memora_lb", "value": caddy_cookie(pinned_to), "url": proxy}])
    context.on("response", lambda response: errors.append(f"{response.status} {response.url}") if response.status >= 500 else None)
    return Person(browser, proxy, context).ready()


def test_a_stop_and_a_rolling_restart_keep_every_conversation_and_show_no_student_a_5xx(postgres_url, tmp_path):
    require_browser()
    url = isolated_postgres_url(postgres_url)
    errors: list[str] = []
    with big_class(url, tmp_path) as running, chromium() as browser:
        a, b = running.ports
        ana, ben = student(browser, running.proxy, a, errors), student(browser, running.proxy, b, errors)
        for person, text in ((ana, "My name is Ana and I teach in Taichung."), (ben, "My name is Ben.")):
            person.type(text)
            person.wait_for_messages(2)
        running.stop_process(a)
        ana.type("What is my name?")  # on a page whose process is gone: the page reconnects through Caddy
        ana.wait_for_messages(4)
        ben.type("And mine?")
        ben.wait_for_messages(4)
        stopped_lb = lb_cookie(ana)
        ended = running.hang_up()  # both students are on b, which is replaced after a's process is
        for person, text in ((ana, "Where do I teach?"), (ben, "Thank you.")):
            person.type(text)
            person.wait_for_messages(6)
        ana_texts, ben_texts = chat_texts(ana.page), chat_texts(ben.page)
        pinned = {lb_cookie(ana), lb_cookie(ben)}
    assert stopped_lb == caddy_cookie(b), "Caddy pinned Ana's browser to the live process"
    assert "My name is Ana" in ana_texts[0] and "What is my name?" in ana_texts[2], "the message sent as her process stopped was kept"
    assert ended.startswith("memora.serve: rolling restart done") and pinned <= {caddy_cookie(port) for port in running.ports}
    assert "Where do I teach?" in ana_texts[4] and len(ana_texts) == 6, "her conversation went on after the restart"
    assert "My name is Ben" in ben_texts[0] and "Thank you." in ben_texts[4] and len(ben_texts) == 6
    assert errors == [], "no student saw a 5xx"
    # How soon they were back is a measure, not a test: benchmarks/classroom_load.py --rolling-restart (docs/classroom.md).


def lb_cookie(person: Person) -> str:
    return {cookie["name"]: cookie["value"] for cookie in person.context.cookies()}["memora_lb"]
