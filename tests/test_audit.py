from hypothesis import given, settings
from hypothesis import strategies as st

from memora.backends import OfflineBackend
from memora.memory import ShortTermMemory
from memora.teaching.audit import DiffSegment, audit_summaries, diff_markdown, escape_markdown, tokenize, word_diff
from tests.support.fakes import ScriptedBackend
from tests.support.memory import chat


def test_each_version_lists_what_it_folded_and_costs():
    backend = ScriptedBackend()
    memory = ShortTermMemory(backend, max_recent_turns=1)
    chat(memory, "My level is B1.", "I like travel.", "My name is Mina.", "Teach me idioms.")
    audits = audit_summaries(memory.conversation.versions, memory.history)

    assert len(audits) == len(memory.conversation.versions) == len(backend.summaries) >= 2
    for audit, version, request in zip(audits, memory.conversation.versions, backend.summaries, strict=True):
        start, end = version.folded
        assert audit.folded_messages == tuple(memory.history[start:end]) == request.new_messages
        assert audit.tokens == version.tokens > 0
        assert audit.text == version.text
    first, second = audits[0], audits[1]
    assert first.version == 1 and first.previous_text == ""
    assert first.folded == (0, 2) and first.folded_messages[0].content == "My level is B1."
    assert first.diff == (DiffSegment("added", first.text),)
    assert second.previous_text == first.text == backend.summaries[1].existing_summary
    assert second.folded[0] == first.summarized_message_count


def test_diff_shows_the_correction_replacing_the_old_level():
    memory = ShortTermMemory(OfflineBackend(), max_recent_turns=1)
    chat(memory, "My English level is B1.", "Where is the station?", "Actually my English level is B2.", "Thanks.", "Bye now.")
    audit = next(
        a for a in audit_summaries(memory.conversation.versions, memory.history) if any("B2" in m.content for m in a.folded_messages)
    )
    removed = "".join(s.text for s in audit.diff if s.kind == "removed")
    added = "".join(s.text for s in audit.diff if s.kind == "added")
    assert "B1" in removed and "B2" in added
    assert "B1" not in audit.text
    assert audit.removed_words >= 1 and audit.added_words >= 1


def test_cjk_diff_changes_one_word_not_the_sentence():
    old, new = "我的英文程度是 B1，我想練習旅遊英文。", "我的英文程度是 B2，我想練習旅遊英文。"
    assert word_diff(old, new) == (
        DiffSegment("same", "我的英文程度是 "),
        DiffSegment("removed", "B1"),
        DiffSegment("added", "B2"),
        DiffSegment("same", "，我想練習旅遊英文。"),
    )
    assert tokenize("練習 travel English")[:2] == ["練", "習 "]


def test_diff_reconstructs_both_texts_and_ignores_reflowed_whitespace():
    old, new = "- I like tea.\n- I live in Taipei.", "- I like tea.\n- I live in Tainan.\n- My name is Ana."
    segments = word_diff(old, new)
    assert "".join(s.text for s in segments if s.kind != "removed") == new
    assert "".join(s.text for s in segments if s.kind != "added").split() == old.split()
    assert word_diff("a  b\nc", "a b c") == (DiffSegment("same", "a b c"),)
    assert word_diff("", "") == ()
    assert word_diff("gone", "") == (DiffSegment("removed", "gone"),)


def test_rewrite_without_folding_has_an_empty_range():
    backend = ScriptedBackend(summary_text=lambda request: "Level B2.")
    memory = ShortTermMemory(backend)
    chat(memory, "hello")
    memory.update_summary([])
    (audit,) = audit_summaries(memory.conversation.versions, memory.history)
    assert audit.folded == (0, 0) and audit.folded_messages == ()
    assert audit.summarized_message_count == 0


def test_markdown_escapes_user_text_and_marks_changes():
    hostile = "<script>alert(1)</script> [click](javascript:x) ![img](http://e/x.png) **bold** :red[x] $x$ # head"
    rendered = diff_markdown(word_diff("", hostile))
    assert "<" not in rendered.replace("\\<", "")
    assert "](" not in rendered.replace("\\](", "")
    assert "\\[click\\]\\(javascript\\:x\\)" in rendered
    assert rendered.startswith("**") and rendered.endswith("**")
    assert escape_markdown("a_b*c") == "a\\_b\\*c"


def test_markdown_marks_words_per_line_with_hard_breaks():
    segments = (
        DiffSegment("same", "- "),
        DiffSegment("removed", "B1. "),
        DiffSegment("added", "B2.\n- Mina "),
        DiffSegment("same", "likes tea."),
    )
    assert diff_markdown(segments) == "\\- ~~B1\\.~~ **B2\\.**  \n**\\- Mina** likes tea\\."
    assert diff_markdown(()) == ""


_words = st.lists(st.sampled_from(["B1", "B2", "I", "like", "tea.", "我", "的", "程度", "，", "- ", "\n", "  "]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(_words, _words)
def test_any_diff_rebuilds_new_exactly_and_old_up_to_whitespace(old_words, new_words):
    old, new = " ".join(old_words), " ".join(new_words)
    segments = word_diff(old, new)
    assert "".join(s.text for s in segments if s.kind != "removed") == new
    assert "".join(s.text for s in segments if s.kind != "added").split() == old.split()
    assert all(s.text for s in segments)
    assert all(a.kind != b.kind for a, b in zip(segments, segments[1:]))  # noqa: B905, RUF007 - assertion kept as written
    assert "<" not in diff_markdown(segments)


def test_last_audits_only_the_newest_versions_numbered_and_diffed_as_in_the_full_list():
    from memora.memory import SummaryVersion
    from memora.teaching.audit import audit_summaries
    from memora.text.messages import Message

    history = [Message("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(8)]
    versions = [SummaryVersion(f"level B{n}", 2 * n, (2 * n - 2, 2 * n), 10 * n, n + 1) for n in range(1, 5)]
    full = audit_summaries(versions, history)
    assert audit_summaries(versions, history, last=2) == full[2:]
    assert audit_summaries(versions, history, last=2)[0].previous_text == "level B2"
    assert audit_summaries(versions, history, last=10) == full
    assert audit_summaries(versions, history, last=0) == ()
