"""This browser's secret: read from its cookie, or made on a first visit and set by a small script.

The secret is what a conversation is bound to (``memora.classroom.store.owner``; the store keeps its
hash). Streamlit gives the cookies of the request that opened the session (``st.context.cookies``);
a page cannot set a cookie from the server, so ``remember_browser`` sets it from the browser (and
replaces a malformed or forgotten one). This module holds the page's only raw HTML: that script,
built from validated secrets and one catalog sentence, which the script shows as text when cookies
are blocked.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from memora.app.page import state as keys
from memora.classroom.store.owner import is_browser_secret, new_browser_secret

COOKIE = "memora_browser"
"""The cookie that holds this browser's secret."""
COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""400 days, the longest Chromium keeps a cookie; conversations idle for less than that come
back."""


def browser_secret(state: Any) -> str:
    """This browser's secret: the one its cookie sent, else a new one, made on the session's first
    run so that its very first save is bound to it; ``remember_browser`` then sets the cookie. A
    cookie that is not a secret of ours (a hostile value) is ignored, like none."""
    if state[keys.BROWSER_SECRET] is None:
        cookie = st.context.cookies.get(COOKIE)
        state[keys.BROWSER_SECRET] = cookie if is_browser_secret(cookie) else new_browser_secret()
    secret: str = state[keys.BROWSER_SECRET]
    return secret


def remember_browser(secret: str, blocked_notice: str, forgotten: str | None = None) -> None:
    """Sets the cookie in the browser when it lacks a secret of ours: a first visit, cookies cleared
    meanwhile, a malformed value (which the server ignored, so it is replaced, or every reload would
    lose the conversation), or ``forgotten``, the secret this session forgot (*Forget this
    browser*).

    If the browser has another secret already (two first-visit tabs opened at once, say: the other
    tab set its own), this tab reloads once, so that its session takes the browser's secret; a flag
    in the tab's sessionStorage keeps a browser that does not send the cookie back from reloading
    forever. When the cookie cannot be set (cookies blocked), ``blocked_notice`` is shown in its
    place: a reload will start over. This is the page's only raw HTML, and it holds nothing but that
    script.
    """
    st.html(
        cookie_script(secret, blocked_notice, forgotten),
        unsafe_allow_javascript=True,
        width="content",
    )


def cookie_script(secret: str, blocked_notice: str, forgotten: str | None = None) -> str:
    """The script ``remember_browser`` runs. ``secret`` and ``forgotten`` must be ours
    (``is_browser_secret``), else ValueError: they need no escaping, and the JSON quoting is a
    second guard. ``blocked_notice`` is any text: it is quoted for a script (no ``<``, ``>`` or
    ``&`` left raw) and shown as text, never markup."""
    bad_forgotten = forgotten is not None and not is_browser_secret(forgotten)
    if not is_browser_secret(secret) or bad_forgotten:
        raise ValueError("not a browser secret")
    return f"""<script>(function () {{
  var name = {json.dumps(COOKIE)}, secret = {json.dumps(secret)};
  var forgotten = {json.dumps(forgotten)};
  var pattern = new RegExp("(?:^|; )" + name + "=([^;]*)");
  var found = document.cookie.match(pattern), current = found ? found[1] : null;
  if (current === null || !/^[A-Za-z0-9_-]{{43}}$/.test(current) || current === forgotten) {{
    document.cookie = name + "=" + secret + "; Path=/; Max-Age={COOKIE_MAX_AGE_S}" +
      "; SameSite=Strict" + (location.protocol === "https:" ? "; Secure" : "");
    var kept = document.cookie.match(pattern);
    if (!navigator.cookieEnabled || !kept || kept[1] !== secret) {{
      var notice = document.createElement("div");
      notice.setAttribute("role", "alert");
      notice.setAttribute("data-testid", "memoraCookiesBlocked");
      notice.style.cssText =
        "padding:0.75rem 1rem;border-radius:0.5rem;background:rgba(255,189,69,0.2);";
      notice.textContent = {_script_string(blocked_notice)};
      var here = document.currentScript;
      (here && here.parentNode ? here.parentNode : document.body).appendChild(notice);
    }}
  }} else if (current !== secret) {{
    try {{
      if (!sessionStorage.getItem("memora_rekeyed")) {{
        sessionStorage.setItem("memora_rekeyed", "1");
        location.reload();
      }}
    }} catch (blocked) {{}}  // storage blocked: never reload, rather than reload forever
  }}
}})();</script>"""


def _script_string(text: str) -> str:
    """``text`` as a JavaScript string literal that cannot end the script element or start
    markup."""
    return json.dumps(text).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
