"""``python -m benchmarks.memory``: a benchmark of short-term memory strategies, offline and deterministic.

It replays scripted conversations (``script.py``) against a recording backend
(``recording.py``) and compares full history, the article's v0.7 algorithm
(``article.py``, the reference) and Memora's memory under each fold policy,
with and without prefolding (``strategies.py``). Figures come from what the backend
was actually sent (``run.py``); ``report.py`` prints them as Markdown.
"""
