"""This browser's secret: read from its cookie, or made on a first visit and set by a small script.

The secret is what a conversation is bound to (``memora.store.owner``; the store keeps its hash).
Streamlit gives the cookies of the request that opened the session (``st.context.cookies``); a page
cannot set a cookie from the server, so ``remember_browser`` sets it from the browser. This module
holds the page's only raw HTML: that script, built from a validated secret and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st

from memora.store.owner import is_browser_secret, new_browser_secret
from memora.ui import state as keys

COOKIE = "memora_browser"
"""The cookie that holds this browser's secret."""
COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""400 days, the longest Chromium keeps a cookie; conversations idle for less than that come back."""


def browser_secret(state: Any) -> str:
    """This browser's secret: the one its cookie sent, else a new one, made on the session's first run so
    that its very first save is bound to it; ``remember_browser`` then sets the cookie. A cookie that is
    not a secret of ours (a hostile value) is ignored, like none."""
    if state[keys.BROWSER_SECRET] is None:
        cookie = st.context.cookies.get(COOKIE)
        state[keys.BROWSER_SECRET] = cookie if is_browser_secret(cookie) else new_browser_secret()
    secret: str = state[keys.BROWSER_SECRET]
    return secret


def remember_browser(secret: str) -> None:
    """Sets the cookie in the browser when it lacks it (a first visit, or cookies cleared meanwhile).

    If the browser has another secret already (two first-visit tabs opened at once, say: the other
    tab set its own), this tab reloads once, so that its session takes the browser's secret; a flag in
    the tab's sessionStorage keeps a browser that does not send the cookie back from reloading forever.
    ``secret`` is ours (``is_browser_secret``): it needs no escaping, and the JSON quoting is a second guard.
    This is the page's only raw HTML, and it holds nothing but that script.
    """
    st.html(cookie_script(secret), unsafe_allow_javascript=True, width="content")


def cookie_script(secret: str) -> str:
    """The script ``remember_browser`` runs; ``secret`` must be ours (``is_browser_secret``), else ValueError."""
    if not is_browser_secret(secret):
        raise ValueError("not a browser secret")
    return f"""<script>(function () {{
  var name = {json.dumps(COOKIE)}, secret = {json.dumps(secret)};
  var found = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
  if (!found) {{
    document.cookie = name + "=" + secret + "; Path=/; Max-Age={COOKIE_MAX_AGE_S}; SameSite=Strict" +
      (location.protocol === "https:" ? "; Secure" : "");
  }} else if (found[1] !== secret && !sessionStorage.getItem("memora_rekeyed")) {{
    sessionStorage.setItem("memora_rekeyed", "1");
    location.reload();
  }}
}})();</script>"""
