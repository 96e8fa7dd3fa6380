"""The retention probe in a terminal: ``python -m memora.app.probe`` (``memora.teaching.probe`` is
the probe itself).

The settings pick the backend, as for the page and the REPL (``MEMORA_BACKEND``, ``MEMORA_MODEL``),
and ``--backend`` / ``--model`` override them. Exit status: 0 when every scenario ran, 1 when a
request failed (the reports of the scenarios before it are not printed), 2 for a scenario file or
setting that is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from memora.app.build import build_backend
from memora.app.settings import BACKENDS, SettingsError, load_settings
from memora.memory.backend import BackendError
from memora.teaching.probe import (
    SCHEMA_FILE,
    ScenarioError,
    bundled_scenarios,
    format_report,
    load_scenario,
    run_probe,
    scenario_schema,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memora.app.probe",
        description="Checks which planted facts survive the summary.",
    )
    parser.add_argument(
        "scenarios", nargs="*", help="scenario ids or JSON files (default: every bundled scenario)"
    )
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help=(
            "override MEMORA_BACKEND (default: openai with a key, else offline; chat needs "
            "MEMORA_BASE_URL)"
        ),
    )
    parser.add_argument("--model", help="override MEMORA_MODEL")
    parser.add_argument(
        "--json", action="store_true", help="print the reports as JSON instead of tables"
    )
    parser.add_argument("--list", action="store_true", help="list the bundled scenarios and exit")
    parser.add_argument(
        "--schema",
        action="store_true",
        help=(
            f"print the scenario files' JSON Schema (memora/teaching/scenarios/{SCHEMA_FILE}) and "
            "exit"
        ),
    )
    args = parser.parse_args(argv)

    if args.schema:
        print(json.dumps(scenario_schema(), ensure_ascii=False, indent=2))
        return 0
    try:
        if args.list:
            for scenario in bundled_scenarios():
                print(f"{scenario.id}\t{scenario.language}\t{scenario.title}")
            return 0
        scenarios = (
            [load_scenario(s) for s in args.scenarios]
            if args.scenarios
            else list(bundled_scenarios())
        )
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
