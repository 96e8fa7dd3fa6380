"""The retention probe: do planted facts survive folding into the summary?

A scenario (a JSON file in ``memora/scenarios/``) plants facts in the first
user turns: a level, a goal, a name, a correction, an open question. The probe
then sends filler turns until every planted turn has left the recent window
and been folded into the summary, asks a final question, and checks each fact
twice: in the summary that the final request sent, and in the final answer.

A fact is **kept** when all its expected keywords are found and none of its
stale keywords (the value a correction replaced) is asserted; **stale** when a
stale keyword is asserted and an expected one is missing; **mixed** when both
are there (read that one yourself); **missing** otherwise. A stale keyword
right after a negation ("B2, not B1", "corrected from B1", 不是 B1) does not
count as asserted. Keywords are whole-word and case-insensitive; Chinese
keywords match as substrings. Keyword checks are a screen, not a judge: a
model may keep a fact in other words.

Offline, the final answer is the offline engine's description of the context,
so the answer column shows what reached the request; the probe then tests the
plumbing and the extractive summarizer, not a model.

Run ``python -m memora.probe`` (``--help`` for options), or call ``run_probe``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from memora import strict
from memora.backends.base import Backend, BackendError
from memora.memory import DEFAULT_MODEL, MAX_INPUT_TOKENS, ShortTermMemory

SCENARIO_FORMAT = "memora-probe-scenario"
SCENARIO_VERSION = 1
MAX_SCENARIO_BYTES = 256 * 1024
MAX_TURN_CHARS = 2000
FactKind = Literal["fact", "correction", "unresolved_question"]
FACT_KINDS: tuple[FactKind, ...] = ("fact", "correction", "unresolved_question")
Status = Literal["kept", "mixed", "stale", "missing"]

_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_NEGATION_BEFORE = re.compile(
    r"(?:\b(?:not|no longer|instead of|rather than|from|previously|formerly)|不是|而不是|而非|不再是|從)\W{0,3}$",
    re.IGNORECASE,
)


class ScenarioError(strict.StrictError):
    """A scenario file is malformed. ``code`` and ``path`` say what and where."""


@dataclass(frozen=True)
class Fact:
    """One planted fact. Each item of ``expect`` must be found; an item that is a
    tuple is a set of alternatives (any one will do). ``stale`` are the values
    a correction replaced, which must not be asserted any more."""

    id: str
    kind: FactKind
    description: str
    expect: tuple[tuple[str, ...], ...]
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    description: str
    language: str
    plant: tuple[str, ...]
    filler: tuple[str, ...]
    final_question: str
    facts: tuple[Fact, ...]
    max_recent_turns: int = 2
    max_input_tokens: int = MAX_INPUT_TOKENS
    max_filler_turns: int = 12


@dataclass(frozen=True)
class Recall:
    """A fact's fate in one text: its status and the keywords that decided it."""

    status: Status
    found: tuple[str, ...]
    stale_found: tuple[str, ...]


@dataclass(frozen=True)
class FactResult:
    fact: Fact
    summary: Recall
    answer: Recall


@dataclass(frozen=True)
class ProbeReport:
    """What one probe run found.

    ``folded`` is False when the planted turns never left the recent window
    within ``max_filler_turns``: then the summary was never tested and the
    recall figures mean nothing (``conclusive`` is False).
    ``summary`` is the summary the final request sent; ``answer`` the final reply.
    Recall is the share of facts whose status is ``kept``.
    """

    scenario_id: str
    scenario_title: str
    backend_label: str
    offline: bool
    model: str
    filler_turns: int
    folded: bool
    summary: str
    answer: str
    facts: tuple[FactResult, ...]
    summary_versions: int
    session_total_tokens: int

    @property
    def conclusive(self) -> bool:
        return self.folded

    @property
    def summary_recall(self) -> float:
        return _share(r.summary.status == "kept" for r in self.facts)

    @property
    def answer_recall(self) -> float:
        return _share(r.answer.status == "kept" for r in self.facts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every field, plus the two recall figures."""
        data = asdict(self)
        data["conclusive"] = self.conclusive
        data["summary_recall"] = self.summary_recall
        data["answer_recall"] = self.answer_recall
        return data


def _share(flags: Any) -> float:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else 0.0


# -- scenarios ----------------------------------------------------------------


def parse_scenario(raw: bytes | str) -> Scenario:
    """A scenario from JSON text, validated strictly; raises ScenarioError.

    Unknown keys, wrong types, empty texts, duplicate fact ids, a correction
    without stale values, and files over 256 KiB are all errors.
    """
    data = strict.parse_json(raw, ScenarioError, max_bytes=MAX_SCENARIO_BYTES)
    E = ScenarioError
    root = strict.obj(
        data, "", E,
        ("format", "version", "id", "title", "language", "plant", "filler", "final_question", "facts"),
        ("description", "max_recent_turns", "max_input_tokens", "max_filler_turns"),
    )
    if root["format"] != SCENARIO_FORMAT:
        raise E("wrong_format", f"this is not a probe scenario (format {str(root['format'])[:40]!r}).", "format")
    if strict.integer(root["version"], "version", E, 0, 10**6) != SCENARIO_VERSION:
        raise E("unsupported_version", f"version {root['version']} is not supported; this Memora reads version {SCENARIO_VERSION}.",
                "version", version=root["version"], supported=SCENARIO_VERSION)
    scenario_id = strict.string(root["id"], "id", E, 64)
    if not _ID.match(scenario_id):
        raise E("bad_value", "an id is lowercase letters, digits and dashes.", "id")

    def texts(key: str, max_items: int) -> tuple[str, ...]:
        items = strict.array(root[key], key, E, max_items)
        if not items:
            raise E("empty_list", "must have at least one item.", key)
        return tuple(strict.string(t, f"{key}[{i}]", E, MAX_TURN_CHARS, allow_empty=False) for i, t in enumerate(items))

    facts = []
    for i, raw_fact in enumerate(strict.array(root["facts"], "facts", E, 50)):
        path = f"facts[{i}]"
        fact = strict.obj(raw_fact, path, E, ("id", "kind", "description", "expect"), ("stale",))
        expect = []
        for j, item in enumerate(strict.array(fact["expect"], f"{path}.expect", E, 10)):
            options = item if isinstance(item, list) else [item]
            strict.array(options, f"{path}.expect[{j}]", E, 10)
            if not options:
                raise E("empty_list", "must have at least one keyword.", f"{path}.expect[{j}]")
            expect.append(tuple(strict.string(k, f"{path}.expect[{j}]", E, 100, allow_empty=False) for k in options))
        if not expect:
            raise E("empty_list", "a fact needs at least one expected keyword.", f"{path}.expect")
        stale = tuple(
            strict.string(k, f"{path}.stale[{j}]", E, 100, allow_empty=False)
            for j, k in enumerate(strict.array(fact.get("stale", []), f"{path}.stale", E, 10))
        )
        kind = strict.choice(fact["kind"], f"{path}.kind", E, FACT_KINDS)
        if kind == "correction" and not stale:
            raise E("missing_key", "a correction needs the stale values it replaced.", f"{path}.stale", key="stale")
        fact_id = strict.string(fact["id"], f"{path}.id", E, 64)
        if not _ID.match(fact_id):
            raise E("bad_value", "an id is lowercase letters, digits and dashes.", f"{path}.id")
        if any(f.id == fact_id for f in facts):
            raise E("duplicate_id", f"the fact id {fact_id!r} is used twice.", f"{path}.id", id=fact_id)
        facts.append(Fact(fact_id, kind, strict.string(fact["description"], f"{path}.description", E, 200), tuple(expect), stale))
    if not facts:
        raise E("empty_list", "a scenario needs at least one fact.", "facts")

    return Scenario(
        id=scenario_id,
        title=strict.string(root["title"], "title", E, 200, allow_empty=False),
        description=strict.string(root.get("description", ""), "description", E, 1000),
        language=strict.string(root["language"], "language", E, 16, allow_empty=False),
        plant=texts("plant", 20),
        filler=texts("filler", 50),
        final_question=strict.string(root["final_question"], "final_question", E, MAX_TURN_CHARS, allow_empty=False),
        facts=tuple(facts),
        max_recent_turns=strict.integer(root.get("max_recent_turns", 2), "max_recent_turns", E, 0, 20),
        max_input_tokens=strict.integer(root.get("max_input_tokens", MAX_INPUT_TOKENS), "max_input_tokens", E, 1, 1_000_000),
        max_filler_turns=strict.integer(root.get("max_filler_turns", 12), "max_filler_turns", E, 1, 100),
    )


def bundled_scenarios() -> tuple[Scenario, ...]:
    """Every scenario shipped in ``memora/scenarios``, sorted by id."""
    folder = resources.files("memora") / "scenarios"
    found = [parse_scenario(entry.read_bytes()) for entry in folder.iterdir() if entry.name.endswith(".json")]
    return tuple(sorted(found, key=lambda s: s.id))


def load_scenario(name_or_path: str) -> Scenario:
    """A bundled scenario by id, or a scenario file by path. Raises ScenarioError if neither exists."""
    for scenario in bundled_scenarios():
        if scenario.id == name_or_path:
            return scenario
    path = Path(name_or_path)
    if path.is_file():
        if path.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioError("too_large", f"The file is over {MAX_SCENARIO_BYTES:,} bytes.", limit=MAX_SCENARIO_BYTES)
        return parse_scenario(path.read_bytes())
    ids = ", ".join(s.id for s in bundled_scenarios())
    raise ScenarioError("unknown_scenario", f"No scenario {name_or_path!r}; bundled: {ids}.", name=name_or_path)


# -- checking -----------------------------------------------------------------


def _occurrences(text: str, keyword: str) -> list[int]:
    if _CJK.search(keyword):
        pattern = re.compile(re.escape(keyword), re.IGNORECASE)
    else:
        pattern = re.compile(rf"(?<!\w){re.escape(keyword)}(?!\w)", re.IGNORECASE)
    return [m.start() for m in pattern.finditer(text)]


def check_fact(fact: Fact, text: str) -> Recall:
    """The fact's status in ``text``; see the module docstring for the rules."""
    found = []
    complete = True
    for options in fact.expect:
        hit = next((k for k in options if _occurrences(text, k)), None)
        if hit is None:
            complete = False
        else:
            found.append(hit)
    stale_found = tuple(
        k for k in fact.stale if any(not _NEGATION_BEFORE.search(text[max(0, at - 24) : at]) for at in _occurrences(text, k))
    )
    if complete and not stale_found:
        status: Status = "kept"
    elif complete:
        status = "mixed"
    elif stale_found:
        status = "stale"
    else:
        status = "missing"
    return Recall(status, tuple(found), stale_found)


# -- running ------------------------------------------------------------------


def run_probe(
    scenario: Scenario,
    backend: Backend,
    *,
    model: str = DEFAULT_MODEL,
    on_turn: Callable[[int, str], None] | None = None,
) -> ProbeReport:
    """Plays ``scenario`` against ``backend`` in a fresh memory and checks every fact.

    ``on_turn(number, text)`` is called before each user turn (for a progress bar).
    Model errors (``BackendError``) and budget errors propagate: a probe that
    could not finish has no result. The fresh memory uses the scenario's window
    and budget, so the caller's own conversation is never touched.
    """
    memory = ShortTermMemory(
        backend, model=model, max_input_tokens=scenario.max_input_tokens, max_recent_turns=scenario.max_recent_turns
    )
    number = 0

    def say(text: str) -> str:
        nonlocal number
        number += 1
        if on_turn:
            on_turn(number, text)
        with memory.turn(text) as turn:
            return turn.run()

    for text in scenario.plant:
        say(text)
    planted_end = len(memory.history)
    filler = 0
    while memory.summarized_message_count < planted_end and filler < scenario.max_filler_turns:
        say(scenario.filler[filler % len(scenario.filler)])
        filler += 1
    answer = say(scenario.final_question)
    # The final request may fold once more; check what it actually sent.
    summary = memory.summary
    return ProbeReport(
        scenario_id=scenario.id,
        scenario_title=scenario.title,
        backend_label=memory.backend.label,
        offline=bool(getattr(memory.backend, "offline", False)),
        model=model,
        filler_turns=filler,
        folded=memory.summarized_message_count >= planted_end,
        summary=summary,
        answer=answer,
        facts=tuple(FactResult(f, check_fact(f, summary), check_fact(f, answer)) for f in scenario.facts),
        summary_versions=len(memory.summary_versions),
        session_total_tokens=memory.session_total_tokens,
    )


# -- output -------------------------------------------------------------------


def format_report(report: ProbeReport) -> str:
    """A plain-text table: one row per fact, a recall line, and the final summary."""
    rows = [("fact", "kind", "summary", "answer")] + [
        (r.fact.description, r.fact.kind, r.summary.status, r.answer.status) for r in report.facts
    ]
    widths = [max(_width(row[i]) for row in rows) for i in range(4)]
    lines = [f"Scenario: {report.scenario_id} - {report.scenario_title}",
             f"Backend: {report.backend_label} · model {report.model} · {report.filler_turns} filler turns · "
             f"{report.summary_versions} summary versions · {report.session_total_tokens} tokens"]
    if report.offline:
        lines.append("Offline: the answer column checks the context the offline engine describes, not a model's reply.")
    if not report.folded:
        lines.append("INCONCLUSIVE: the planted turns were never folded into the summary; raise max_filler_turns.")
    lines.append("")
    for k, row in enumerate(rows):
        lines.append("  ".join(cell + " " * (w - _width(cell)) for cell, w in zip(row, widths)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(f"Recall: summary {report.summary_recall:.0%}, answer {report.answer_recall:.0%} ({len(report.facts)} facts)")
    lines.append("Summary sent with the final question:")
    lines.extend("  " + line for line in (report.summary or "(empty)").splitlines())
    return "\n".join(lines)


def _width(text: str) -> int:
    """Terminal columns: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def main(argv: Sequence[str] | None = None) -> int:
    from memora.settings import BACKENDS, SettingsError, build_backend, load_settings

    parser = argparse.ArgumentParser(prog="python -m memora.probe", description="Checks which planted facts survive the summary.")
    parser.add_argument("scenarios", nargs="*", help="scenario ids or JSON files (default: every bundled scenario)")
    parser.add_argument(
        "--backend", choices=BACKENDS, help="override MEMORA_BACKEND (default: openai with a key, else offline; chat needs MEMORA_BASE_URL)"
    )
    parser.add_argument("--model", help="override MEMORA_MODEL")
    parser.add_argument("--json", action="store_true", help="print the reports as JSON instead of tables")
    parser.add_argument("--list", action="store_true", help="list the bundled scenarios and exit")
    args = parser.parse_args(argv)

    try:
        if args.list:
            for scenario in bundled_scenarios():
                print(f"{scenario.id}\t{scenario.language}\t{scenario.title}")
            return 0
        scenarios = [load_scenario(s) for s in args.scenarios] if args.scenarios else list(bundled_scenarios())
        settings = load_settings()
        if args.backend:
            settings = settings.with_changes(backend=args.backend)
        if args.model:
            settings = settings.with_changes(model=args.model)
        backend = build_backend(settings)
    except (ScenarioError, SettingsError) as error:
        print(f"probe: {error}", file=sys.stderr)
        return 2
    reports = []
    for scenario in scenarios:
        try:
            reports.append(run_probe(scenario, backend, model=settings.model))
        except (BackendError, ValueError) as error:
            print(f"probe: {scenario.id} failed: {error}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], ensure_ascii=False, indent=2))
    else:
        print("\n\n".join(format_report(r) for r in reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
