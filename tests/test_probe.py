import json

import pytest

from memora.app.probe import main
from memora.backends import OfflineBackend
from memora.backends.offline import merge_summary, retracted_values, topic_key
from memora.teaching.probe import (
    Fact,
    ScenarioError,
    bundled_scenarios,
    check_fact,
    format_report,
    load_scenario,
    parse_scenario,
    run_probe,
)
from memora.text.messages import user
from tests.support.fakes import ScriptedBackend


def scenario_json(**changes) -> str:
    data = {
        "format": "memora-probe-scenario",
        "version": 1,
        "id": "tiny",
        "title": "Tiny",
        "language": "en",
        "max_recent_turns": 1,
        "plant": ["My English level is B1.", "Actually I'm B2, not B1."],
        "filler": ["What does 'hike' mean?"],
        "final_question": "Plan a practice for my level.",
        "facts": [{"id": "level", "kind": "correction", "description": "B2", "expect": ["B2"], "stale": ["B1"]}],
    }
    data.update(changes)
    return json.dumps(data)


def test_bundled_scenarios_include_the_articles_check():
    scenarios = {s.id: s for s in bundled_scenarios()}
    assert len(scenarios) >= 3
    article = scenarios["article-b1-travel"]
    assert article.final_question == "Please plan a practice for my level and goal."
    assert {f.id for f in article.facts} == {"level", "goal"}
    assert scenarios["article-b1-travel-zh"].plant == ("我的英文程度是 B1，我最近想練習旅遊英文。",)
    kinds = {f.kind for f in scenarios["correction-and-open-question"].facts}
    assert kinds == {"fact", "correction", "unresolved_question"}


def test_probe_folds_the_planted_turns_before_asking():
    backend = ScriptedBackend(summary_text=lambda r: "Level B2 (not B1). Travel English.")
    scenario = parse_scenario(scenario_json())
    report = run_probe(scenario, backend)

    planted = {m.content for request in backend.summaries for m in request.new_messages}
    assert set(scenario.plant) <= planted  # every planted turn reached a summary request
    final = backend.replies[-1]
    assert final.messages[-1].content == scenario.final_question
    assert final.messages[0].role == "developer" and final.messages[0].content.endswith(report.summary)
    assert all(scenario.plant[0] != m.content for m in final.messages)  # no longer verbatim in the window
    assert report.folded and report.conclusive
    assert report.answer == f"reply {len(backend.replies)}"
    assert report.filler_turns == len(backend.replies) - len(scenario.plant) - 1
    (result,) = report.facts
    assert result.summary.status == "kept" and result.summary.found == ("B2",)
    assert result.answer.status == "missing"
    assert report.summary_recall == 1.0 and report.answer_recall == 0.0


def test_probe_reports_a_stale_correction_from_a_summarizer_that_keeps_the_old_value():
    backend = ScriptedBackend(summary_text=lambda r: "The user's level is B1.")
    report = run_probe(parse_scenario(scenario_json()), backend)
    assert report.facts[0].summary.status == "stale"
    assert report.facts[0].summary.stale_found == ("B1",)


def test_probe_is_inconclusive_when_nothing_gets_folded():
    backend = ScriptedBackend()
    scenario = parse_scenario(scenario_json(max_recent_turns=10, max_filler_turns=2))
    report = run_probe(scenario, backend)
    assert not report.folded and not report.conclusive
    assert backend.summaries == []
    assert report.filler_turns == 2
    assert "INCONCLUSIVE" in format_report(report)


def test_offline_probe_keeps_every_fact_of_every_bundled_scenario():
    for scenario in bundled_scenarios():
        report = run_probe(scenario, OfflineBackend())
        assert report.folded and report.offline
        assert [r.summary.status for r in report.facts] == ["kept"] * len(scenario.facts), (scenario.id, report.summary)
        assert report.summary_recall == report.answer_recall == 1.0


def test_correction_replaces_the_old_level_in_the_offline_summary():
    report = run_probe(load_scenario("correction-and-open-question"), OfflineBackend())
    assert "My English level is B1." not in report.summary
    assert "Actually I'm B2, not B1." in report.summary
    assert "Mina" in report.summary  # "I'm B2" did not replace the name


@pytest.mark.parametrize(
    "text, status",
    [
        ("Level: B2, not B1.", "kept"),
        ("Level B2 (corrected from B1).", "kept"),
        ("Level B2. Earlier: level B1.", "mixed"),
        ("Level B1.", "stale"),
        ("No level given. AB2 is not a level.", "missing"),
    ],
)
def test_check_fact_statuses(text, status):
    fact = Fact("level", "correction", "level", (("B2",),), ("B1",))
    assert check_fact(fact, text).status == status


def test_check_fact_alternatives_and_chinese_substrings():
    fact = Fact("goal", "fact", "goal", (("travel", "旅遊"),))
    assert check_fact(fact, "想練習旅遊英文").status == "kept"
    assert check_fact(fact, "Travel English").found == ("travel",)
    assert check_fact(fact, "time-travelling").status == "missing"


def test_extractive_correction_retracts_only_the_corrected_clause():
    summary = merge_summary(
        "",
        [user("My name is Mina."), user("My level is B1, and I want travel English."), user("Actually I'm B2, not B1.")],
        150,
    )
    assert summary.splitlines() == ["- My name is Mina.", "- I want travel English.", "- Actually I'm B2, not B1."]
    again = merge_summary(summary, [user("Sorry, I'm C1, not B2.")], 150)
    assert again.splitlines() == ["- My name is Mina.", "- I want travel English.", "- Sorry, I'm C1, not B2."]
    assert retracted_values("I'm not sure about that.") == []
    assert retracted_values("其實我是 B2，不是 B1。") == ["B1"]
    assert topic_key("I'm B2.") is None and topic_key("My level is B2.") == "my level is"


@pytest.mark.parametrize(
    "change, code, path",
    [
        ({"surprise": 1}, "unknown_key", ""),
        ({"version": 2}, "unsupported_version", "version"),
        ({"format": "other"}, "wrong_format", "format"),
        ({"plant": []}, "empty_list", "plant"),
        ({"plant": ["   "]}, "empty_string", "plant[0]"),
        ({"plant": "My level is B1."}, "wrong_type", "plant"),
        ({"id": "Bad Id"}, "bad_value", "id"),
        ({"max_recent_turns": True}, "wrong_type", "max_recent_turns"),
        ({"facts": [{"id": "x", "kind": "correction", "description": "", "expect": ["B2"]}]}, "missing_key", "facts[0].stale"),
        ({"facts": [{"id": "x", "kind": "guess", "description": "", "expect": ["B2"]}]}, "bad_value", "facts[0].kind"),
        ({"facts": [{"id": "x", "kind": "fact", "description": "", "expect": []}]}, "empty_list", "facts[0].expect"),
        ({"facts": [{"id": "x", "kind": "fact", "description": "", "expect": ["a"]}] * 2}, "duplicate_id", "facts[1].id"),
    ],
)
def test_bad_scenarios_are_rejected_with_a_code_and_path(change, code, path):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(scenario_json(**change))
    assert caught.value.code == code and caught.value.path == path


def test_unknown_scenario_names_the_bundled_ones():
    with pytest.raises(ScenarioError) as caught:
        load_scenario("no-such-scenario")
    assert caught.value.code == "unknown_scenario" and "article-b1-travel" in str(caught.value)


def test_cli_prints_a_table_and_json(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MEMORA_BACKEND", raising=False)
    assert main(["article-b1-travel"]) == 0
    table = capsys.readouterr().out
    assert "English level B1" in table and "Facts kept: in the summary 2 of 2, in what would have been sent 2 of 2" in table
    assert "Recall" not in table and "· model" not in table.splitlines()[1], "offline, the header names no model"

    path = tmp_path / "tiny.json"
    path.write_text(scenario_json())
    assert main(["--json", "--backend", "offline", str(path)]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["scenario_id"] == "tiny" and report["offline"] is True
    assert report["facts"][0]["summary"]["status"] == "kept"

    path.write_text("{")
    assert main([str(path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_cli_runs_against_a_chat_server_with_backend_chat(capsys, monkeypatch):
    from benchmarks.harness.servers import ChatServer

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ChatServer() as server:
        monkeypatch.setenv("MEMORA_BASE_URL", server.url)
        monkeypatch.setenv("MEMORA_MODEL", "llama3.2")
        assert main(["--backend", "chat", "article-b1-travel"]) == 0
        paths = {request.path for request in server.requests}
    assert paths == {"/v1/chat/completions"}
    assert "OpenAI-compatible server" in capsys.readouterr().out


def test_the_published_schema_is_the_models_and_accepts_every_bundled_scenario(capsys):
    """Regenerate with ``python -m memora.app.probe --schema > memora/teaching/scenarios/scenario.schema.json``."""
    from importlib import resources

    from memora.teaching.probe import SCHEMA_FILE, scenario_schema

    folder = resources.files("memora.teaching") / "scenarios"
    published = json.loads((folder / SCHEMA_FILE).read_text(encoding="utf-8"))
    assert published == scenario_schema(), "the committed schema drifted from ScenarioFile"
    assert main(["--schema"]) == 0 and json.loads(capsys.readouterr().out) == published

    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(published)
    for entry in folder.iterdir():
        if entry.name.endswith(".json") and entry.name != SCHEMA_FILE:
            assert not list(validator.iter_errors(json.loads(entry.read_bytes()))), entry.name
    correction = json.loads(scenario_json(facts=[{"id": "x", "kind": "correction", "description": "", "expect": ["B2"]}]))
    assert [e.validator for e in validator.iter_errors(correction)] == ["required"], "the schema knows a correction needs stale values"
