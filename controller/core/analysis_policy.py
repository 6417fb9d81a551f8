"""`downstream.<system>.analysis` of the policy: its value (`parse_analysis`) and what `validate` says of it (pure).

The schema checks the types and the duration syntax; the rules between fields are here, each with where it is,
what is wrong and how to fix it. `parse_analysis` builds a value only from an analysis without problems: a policy
with one is refused by `validate`, and reconcile does not run on a tree that does not validate.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from controller.core.analysis import Analysis, Direction, default_resume, number, parse_duration
from controller.core.diagnostics import Diagnostic, PathPart
from controller.core.yamlsafe import Document

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|/|@")
Problem = tuple[tuple[PathPart, ...], str, str]  # (path inside `analysis`, what is wrong, how to fix it)


def parse_analysis(system: str, raw: Mapping[str, Any] | None) -> Analysis | None:
    """The system's analysis (None: it has none, or it has problems that `validate` reports)."""
    if raw is None or next(analysis_problems(system, raw), None) is not None:
        return None
    direction = Direction.ABOVE if "pause_above" in raw else Direction.BELOW
    pause_at = float(raw[f"pause_{direction.value}"])
    resume = raw.get("resume_below" if direction is Direction.ABOVE else "resume_above")
    pause_after = raw.get("on_inconclusive", {}).get("pause_after")
    throttle = raw.get("throttle_above")
    return Analysis(
        system=system,
        url_env=raw["prometheus"]["url_env"],
        query=raw["prometheus"]["query"],
        direction=direction,
        pause_at=pause_at,
        resume_at=default_resume(direction, pause_at) if resume is None else float(resume),
        max_sample_age=_duration(raw["max_sample_age"]),
        for_passes=raw.get("for", 1),
        min_pause=timedelta(minutes=raw.get("min_pause_minutes", 0)),
        pause_after=None if pause_after is None else _duration(pause_after),
        throttle_at=None if throttle is None else float(throttle),
        throttle_max_active_runs=raw.get("throttle_max_active_runs"),
    )


def _duration(text: str) -> timedelta:
    found = parse_duration(text)
    if found is None:  # the schema's pattern let it through: the two disagree
        raise ValueError(f"{text!r} is not a duration")
    return found


def check_policy_analysis(doc: Document) -> Iterator[Diagnostic]:
    """Every system's analysis in the policy document (that passed the schema)."""
    systems = doc.data.get("downstream", {}) if isinstance(doc.data, Mapping) else {}
    for system, raw in systems.items():
        analysis = raw.get("analysis")
        if analysis is None:
            continue
        for path, message, hint in analysis_problems(system, analysis):
            yield Diagnostic(doc.locate(("downstream", system, "analysis", *path)), message, hint)


def analysis_problems(system: str, raw: Mapping[str, Any]) -> Iterator[Problem]:
    """What is wrong with one system's analysis, in the order of its fields."""
    yield from _url_env(system, raw["prometheus"]["url_env"])
    for path in (("max_sample_age",), ("on_inconclusive", "pause_after")):
        text = raw.get(path[0]) if len(path) == 1 else raw.get(path[0], {}).get(path[1])
        if text is not None and parse_duration(text) is None:
            yield path, f"{'.'.join(map(str, path))} {text!r} of {system} is zero", "write a duration like 90s or 2m"
    above, below = raw.get("pause_above"), raw.get("pause_below")
    if above is not None and below is not None:
        yield (
            ("pause_below",),
            f"analysis of {system} sets both pause_above and pause_below",
            "keep one: pause_above when high values are load (CPU, queue depth), pause_below when low ones are "
            "(free slots)",
        )
        return
    if above is None and below is None:
        yield (
            (),
            f"analysis of {system} sets neither pause_above nor pause_below",
            "add `pause_above: 0.85` (pause when the query's value is higher) or `pause_below:` (when it is lower)",
        )
        return
    direction = Direction.ABOVE if above is not None else Direction.BELOW
    yield from _resume(system, raw, direction)
    yield from _throttle(system, raw, direction)


def _url_env(system: str, name: str) -> Iterator[Problem]:
    if _ENV_NAME.match(name):
        return
    where = ("prometheus", "url_env")
    if _URL_LIKE.search(name):  # never echoed: a URL in a file may carry credentials
        yield (
            where,
            f"url_env of {system} holds an address; it names the environment variable that holds it",
            "put the URL into an environment variable and name it, e.g. `url_env: BACKFILLCTL_PROMETHEUS_URL`",
        )
        return
    yield (
        where,
        f"url_env {name!r} of {system} is not an environment variable name",
        "use upper-case letters, digits and '_', not starting with a digit, e.g. BACKFILLCTL_PROMETHEUS_URL",
    )


def _resume(system: str, raw: Mapping[str, Any], direction: Direction) -> Iterator[Problem]:
    pause_key = f"pause_{direction.value}"
    resume_key, wrong_key = ("resume_below", "resume_above")[:: 1 if direction is Direction.ABOVE else -1]
    if wrong_key in raw:
        yield (
            (wrong_key,),
            f"{wrong_key} does not go with {pause_key} in the analysis of {system}",
            f"write {resume_key} (the value the load must get back {resume_key.removeprefix('resume_')} to resume)",
        )
        return
    pause_at, given = float(raw[pause_key]), raw.get(resume_key)
    resume_at = default_resume(direction, pause_at) if given is None else float(given)
    safe = resume_at < pause_at if direction is Direction.ABOVE else resume_at > pause_at
    if safe:
        return
    side = "below" if direction is Direction.ABOVE else "above"
    if given is None:
        yield (
            (pause_key,),
            f"{pause_key} {number(pause_at)} of {system} leaves no room for the default resume threshold "
            f"(10 % of {number(pause_at)} is 0): it would flap between pause and resume",
            f"set {resume_key} explicitly, {side} {number(pause_at)}",
        )
        return
    yield (
        (resume_key,),
        f"{resume_key} {number(resume_at)} is not {side} {pause_key} {number(pause_at)} in the analysis of {system}: "
        "it would flap between pause and resume",
        f"set {resume_key} {side} {number(pause_at)} (default: {number(default_resume(direction, pause_at))}), "
        "or remove it",
    )


def _throttle(system: str, raw: Mapping[str, Any], direction: Direction) -> Iterator[Problem]:
    above, runs = raw.get("throttle_above"), raw.get("throttle_max_active_runs")
    if above is None and runs is None:
        return
    if direction is Direction.BELOW:
        yield (
            ("throttle_above" if above is not None else "throttle_max_active_runs",),
            f"throttling goes with pause_above; the analysis of {system} pauses below a value",
            "remove throttle_above and throttle_max_active_runs, or use pause_above",
        )
        return
    if above is None or runs is None:
        present, missing = ("throttle_above", "throttle_max_active_runs")[:: 1 if runs is None else -1]
        yield (
            (present,),
            f"{present} of {system} needs {missing}",
            "throttle_above is the value above which a chunked spec's next chunk runs with throttle_max_active_runs",
        )
        return
    if float(above) >= float(raw["pause_above"]):
        yield (
            ("throttle_above",),
            f"throttle_above {number(above)} is not below pause_above {number(raw['pause_above'])} in the "
            f"analysis of {system}: it would pause before it throttles",
            f"set throttle_above below {number(raw['pause_above'])}",
        )
