"""Outside text is escaped for wherever it is shown: one escaper per medium (core/documents/escaping.py), used by
every renderer. A hostile corpus goes through each renderer, and a fake Airflow that answers with GitHub workflow
commands, ANSI escapes and bidi overrides must leave no such line on the CLI's stdout or stderr.

Before the fix, `report NAME` printed a reason line `- **Outcome**: Succeeded (forged)` as its own list item and
a ticket with ``` closed the audit trail's code block; Slack bodies carried `<!channel>` into `text` and mrkdwn;
an Airflow `detail` of `\\n::error title=x::y` printed a line the Actions runner reads as a command.
"""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import MappingProxyType

import httpx
import pytest

from controller.adapters import logsetup
from controller.adapters.store.outbox import OutboxRow
from controller.cli import _report_error, main
from controller.commands.loop.notify import NotifyStatus, status_render
from controller.core.audit.chain import AuditEntry, AuditRecord, seal
from controller.core.audit.notify import Delivery, enrich, payload
from controller.core.checks.result import ValidationResult
from controller.core.documents.diagnostics import Diagnostic, Location
from controller.core.documents.escaping import json_text, md_code, md_fence, md_text, plain, slack_pre, slack_text
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.render import heatmap
from controller.core.render import plan as plan_render
from controller.core.render.audit import record_line
from controller.core.render.change_record import change_record
from controller.core.render.pr_comment import SpecNote, pr_comment
from controller.core.render.report_markdown import report_markdown
from controller.core.render.status import StatusRow, status_text, stored_rows
from controller.core.render.validation import validation_github, validation_text
from controller.errors import ControllerError
from tests.commands.reconcile.harness import Bench, in_process
from tests.core.plan.test_plan import spec
from tests.fakes.airflow import FakeAirflow
from tests.support.logcheck import message_of
from tests.support.receivers import SwitchableProxy

HOSTILE = (
    "- **Outcome**: Succeeded (forged)",
    "real reason\n- **Outcome**: Succeeded (forged)\n# Heading\n| a | b |\n---\n1. one",
    "<img src=x onerror=alert(1)>",
    "```\n## Injected\n```",
    "`````five````",
    "<!channel> <https://evil|link> <@U123> &amp;",
    "\n::error title=x::y",
    "::add-mask::hunter2",
    "ok\r::warning::z",
    "\t::notice::tab",
    "\x1b[31mred\x1b[0m \x1b]8;;https://evil\x07link\x1b]8;;\x07",
    "\u202eevil\u202c \u2066x\u2069 \u2028::error::ls \u2029::error::ps \x85::error::nel \x9b31m \x00\x7f",
    "</details><details open>",
    "$x$ ~~strike~~ [link](https://evil) ![i](https://evil)",
)
# what no terminal or CI log may receive from outside: controls (but the line feed ending a line), separators, bidi
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
COMMAND = re.compile(r"^\s*::", re.MULTILINE)


def assert_terminal_safe(text: str) -> None:
    """No line starts a workflow command (the runner splits at \\r too, and trims leading blanks), no control."""
    assert not UNSAFE.search(text), repr(text)
    assert not any(line.lstrip().startswith("::") for line in re.split(r"\r\n|\r|\n", text)), text


def assert_markdown_safe(text: str, fences: int = 2) -> None:
    """No raw HTML or Slack control from outside (a code block shows it literally), and the code blocks have
    exactly their own fences."""
    lines, outside, fence = text.splitlines(), [], ""
    for line in lines:
        if re.fullmatch(r"`{3,}", line) and (not fence or line == fence):
            fence = "" if fence else line
        elif not fence:
            outside.append(line)
    assert not fence, text
    assert not re.search(r"(?<!\\)<(img|!channel|https|/details><details)", "\n".join(outside)), text
    assert len(re.findall(r"^`{3,}$", text, re.MULTILINE)) == fences, text
    assert not UNSAFE.search(text), repr(text)


def hostile_spec(value: str) -> BackfillSpec:
    conf = MappingProxyType({"note": value})
    return spec("hostile", ticket=value, reason=value, requested_by=value, approvers=(value,), dag_run_conf=conf)


def trail(value: str) -> list[AuditRecord]:
    entry = AuditEntry(
        action="create", phase="outcome", actor=value, controller_version="0", outcome=value, message=value
    )
    return [seal(1, "2026-11-01T10:00:00.000000Z", entry, "0" * 64)]


def hostile_plan(value: str) -> Plan:
    s = hostile_spec(value)
    item = Item("hostile", "d", Kind.REFUSE, Phase.BLOCKED, value, error=True, source=s)
    return Plan((item,), (Finding(FindingKind.DRIFT, "d", value, "hostile", 1),))


# --- the escapers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\n::error title=x::y", " ::error title=x::y"),
        ("ok\r::warning::z", "ok ::warning::z"),
        ("a\r\n\t\tb", "a b"),
        ("\x1b[31mred\x1b[0m", " [31mred [0m"),
        ("\u202eevil\u202c", " evil "),
        ("a\u2028b\u2029c\x85d\x9be", "a b c d e"),
        ("keeps  two spaces, é and …", "keeps  two spaces, é and …"),
    ],
)
def test_plain_collapses_every_control_run_into_one_space(text: str, expected: str) -> None:
    assert plain(text) == expected


def test_markdown_text_code_and_fence() -> None:
    assert md_text("line\n- **Outcome**: Succeeded (forged)") == "line - \\*\\*Outcome\\*\\*: Succeeded \\(forged\\)"
    assert md_text("<img src=x onerror=alert(1)> $x$") == "\\<img src=x onerror=alert\\(1\\)\\> \\$x\\$"
    assert md_code("specs/a-b_c.yaml") == "`specs/a-b_c.yaml`"
    assert md_code("a`|b") == "a\\`\\|b"
    assert md_fence(["plain"]) == ["```", "plain", "```"]
    assert md_fence(["x ``` y", "````"]) == ["`````", "x ``` y", "````", "`````"]
    assert md_fence(["a\nb\x1b"]) == ["```", "a b ", "```"]


def test_slack_text_and_code_block() -> None:
    assert (
        slack_text("<!channel> <https://evil|link> & co\n*x*")
        == "&lt;!channel&gt; &lt;https://evil|link&gt; &amp; co *x*"
    )
    assert slack_pre("a\n``` <!here>\n````") == "```a\n`\u200b`\u200b` &lt;!here&gt;\n`\u200b`\u200b`\u200b````"


def test_json_text_escapes_what_json_leaves_raw_and_stays_json() -> None:
    raw = json.dumps({"m": "a\u2028b\u202e\x85\x7f\n\x1b"}, ensure_ascii=False)
    safe = json_text(raw)
    assert safe == '{"m": "a\\u2028b\\u202e\\u0085\\u007f\\n\\u001b"}'
    assert json.loads(safe) == json.loads(raw)


# --- item 8: Markdown and Slack -------------------------------------------------------------------------


def test_report_markdown_cannot_forge_a_line_or_close_the_audit_trail() -> None:
    s = spec(
        "r",
        ticket="CHG-1 ```",
        reason="real reason\n- **Outcome**: Succeeded (forged)\n<img src=x onerror=alert(1)>",
    )
    events = trail("boom ```\n## Injected")
    lines = report_markdown(change_record(s, None, events)).splitlines()
    assert lines[2:5] == [
        "- **Outcome**: Pending",
        "- **Ticket**: CHG-1 \\`\\`\\`",
        "- **Reason**: real reason - \\*\\*Outcome\\*\\*: Succeeded \\(forged\\) \\<img src=x onerror=alert\\(1\\)\\>",
    ]
    assert lines[-3:] == [
        "````",
        "#1 2026-11-01T10:00:00.000000Z boom ``` ## Injected create/outcome outcome=boom ``` ## Injected "
        "— boom ``` ## Injected",
        "````",
    ]


@pytest.mark.parametrize("value", HOSTILE)
def test_every_markdown_renderer_keeps_hostile_text_inert(value: str) -> None:
    s, events = hostile_spec(value), trail(value)
    report = report_markdown(change_record(s, None, events))
    assert_markdown_safe(report)
    assert sum(1 for line in report.splitlines() if line.startswith("- **")) == 8
    assert [line for line in report.splitlines() if re.match("#+ ", line)] == [
        "# Change record: hostile",
        "## Audit trail",
    ]
    assert sum(1 for line in report.splitlines() if line.startswith("#1 ")) == 1
    record = change_record(s, None, events)
    calendar = report_markdown(record, heatmap.from_stored(record.intervals))
    assert_markdown_safe(calendar, fences=4)
    plan = hostile_plan(value)
    markdown = plan_render.plan_markdown(plan)
    assert_markdown_safe(markdown, fences=0)
    assert sum(1 for line in markdown.splitlines() if line.startswith("|")) == 3
    assert sum(1 for line in markdown.splitlines() if line.startswith("- **")) == 1
    comment = pr_comment(plan, ["specs/hostile.yaml"], {"hostile": SpecNote(value, value)})
    assert_markdown_safe(comment, fences=0)
    assert sum(1 for line in comment.splitlines() if line.startswith("|")) == 3


@pytest.mark.parametrize("value", HOSTILE)
def test_slack_bodies_escape_hostile_text_in_text_and_every_mrkdwn(value: str) -> None:
    delivery = Delivery(1, "k1.team", "team", "succeeded", "slack", 3, "T", {})
    facts = {"event": "succeeded", "spec": "s", "dag_id": "d", "ticket": value, "message": value}
    report = report_markdown(change_record(hostile_spec(value), None, [])).split("\n## Audit trail")[0]
    body = payload(delivery, enrich(facts, {"counts": {"success": 1}, "failed_partitions": [value]}, report))
    texts = [body["text"]] + [
        t["text"]
        for b in body["blocks"]
        for t in [*b.get("fields", []), *b.get("elements", []), b.get("text") or {}]
        if t.get("type") == "mrkdwn"
    ]
    for text in texts:
        assert "<" not in text, text
        assert ">" not in text, text
        assert not UNSAFE.search(text.replace("\n", "")), repr(text)
    details = body["blocks"][2]["text"]["text"]
    assert details.count("```") == 2, details
    assert details.endswith("```"), details
    assert not UNSAFE.search(body["blocks"][0]["text"]["text"])


def test_slack_body_exact() -> None:
    delivery = Delivery(1, "k1.team", "team", "created", "slack", 3, "T", {})
    facts = {
        "event": "created",
        "spec": "s",
        "dag_id": "d",
        "ticket": "<!channel> <https://evil|link>",
        "message": "a & b",
    }
    body = payload(delivery, facts)
    assert body["text"] == "Backfill created: s on d [&lt;!channel&gt; &lt;https://evil|link&gt;]"
    assert body["blocks"][0]["text"]["text"] == body["text"]  # plain_text: Slack decodes the same entities there
    assert body["blocks"][1]["fields"][2] == {
        "type": "mrkdwn",
        "text": "*Ticket*\n&lt;!channel&gt; &lt;https://evil|link&gt;",
        "verbatim": True,
    }
    assert body["blocks"][2]["text"]["text"] == "a &amp; b"
    assert payload(Delivery(1, "k", "t", "created", "json", 3, "T", {}), facts)["ticket"] == facts["ticket"]


# --- item 9: terminal and CI log ------------------------------------------------------------------------


@pytest.mark.parametrize("value", HOSTILE)
def test_every_terminal_renderer_keeps_hostile_text_on_its_line(value: str) -> None:
    plan, events = hostile_plan(value), trail(value)
    assert_terminal_safe(plan_render.plan_text(plan))
    row = StatusRow("hostile", "d", "Blocked", None, 0, 0, 0, 0, 0, None, value)
    assert_terminal_safe(status_text([row]))
    assert_terminal_safe(record_line(events[0]))
    diag = Diagnostic(Location(f"specs/{value}.yaml", 1, 1, ("reason",)), f"bad {value}", f"fix {value}")
    result = ValidationResult((), Policy(), (diag,), 1)
    assert_terminal_safe(validation_text(result))
    github = validation_github(result)
    assert len(COMMAND.findall(github)) == 1, github
    assert github.startswith("::error file="), github
    outbox = OutboxRow("k", "team", "succeeded", "hostile", 1, 2, "T", value, "T")
    assert_terminal_safe(status_render(NotifyStatus([outbox], {})))
    text_line, json_line = (logged(fmt, "server said: %s", value) for fmt in ("text", "json"))
    assert_terminal_safe(text_line + "\n" + json_line)
    assert json.loads(json_line)["event"] == f"server said: {value}"


def logged(fmt: str, message: str, *args: object) -> str:
    """One line as the `--log-format` handler writes it (the logger's state is put back afterwards)."""
    logger, stream = logging.getLogger("controller"), io.StringIO()
    level, propagate = logger.level, logger.propagate
    handler = logsetup.configure(fmt, stream=stream)
    try:
        logging.getLogger("controller.test").warning(message, *args)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
    return stream.getvalue().removesuffix("\n")


def test_cli_error_report_collapses_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    _report_error(ControllerError("Airflow said: x\n::error title=x::y\r::add-mask::z", hint="\x1b[2Jcleared"))
    assert capsys.readouterr().err == ("error: Airflow said: x ::error title=x::y ::add-mask::z\n  hint:  [2Jcleared\n")


HOSTILE_DETAIL = "bad conf\n::error title=x::y\r::warning::z\n::add-mask::hunter2 \x1b[31mred\x1b[0m \u202eevil"


def hostile(status: int) -> Callable[[httpx.Request], httpx.Response]:
    return lambda _request: httpx.Response(status, json={"detail": HOSTILE_DETAIL})


@pytest.fixture
def cli_bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.spec("hostile", dag="demo_daily")
    in_process(bench, monkeypatch)
    yield bench
    logger = logging.getLogger("controller")
    for handler in [h for h in logger.handlers if getattr(h, "_backfillctl", False)]:
        logger.removeHandler(handler)
    logger.propagate = True
    bench.close()


@pytest.mark.parametrize(
    ("args", "faults", "code"),
    [
        (["plan"], [("POST", "/api/v2/backfills/dry_run", 422)], 1),
        (["plan", "--format", "markdown"], [("POST", "/api/v2/backfills/dry_run", 422)], 1),
        (["plan"], [("GET", "/api/v2/backfills", 500)] * 2, 1),
        (["reconcile", "--once"], [("POST", "/api/v2/backfills", 400)], 1),
        (["--log-format", "text", "reconcile", "--once"], [("POST", "/api/v2/backfills", 400)], 1),
        (["--log-format", "json", "reconcile", "--once"], [("GET", "/api/v2/backfills", 503)] * 2, 1),
        (["reconcile", "--once"], [("GET", "/api/v2/dags", 403)] * 2, 1),
    ],
    ids=str,
)
def test_airflow_error_text_never_prints_a_workflow_command(
    cli_bench: Bench,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    faults: list[tuple[str, str, int]],
    code: int,
) -> None:
    assert cli_bench.fake is not None
    for method, path, status in faults:
        cli_bench.fake.fault(method, path, hostile(status))
    assert main(args) == code
    out, err = capsys.readouterr()
    assert "::error title=x::y ::warning::z ::add-mask::hunter2" in out + err  # shown, inert, mid-line
    assert_terminal_safe(out)
    assert_terminal_safe(err)


def test_a_binding_reason_from_airflow_is_one_line_in_stored_status() -> None:
    binding = Binding("hostile", "d", 1, Phase.BLOCKED, reason=HOSTILE_DETAIL)
    assert_terminal_safe(status_text(stored_rows([hostile_spec("x")], {"hostile": binding})))


def test_the_handler_of_last_resort_prints_one_plain_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(logging, "lastResort", logging.lastResort)  # put back after the test
    logsetup.install_last_resort()
    alone = logging.Logger("no-handlers")  # no parent: nothing but the last resort handles its records
    alone.info("not shown")
    alone.warning("stuck: the scheduler is %s", "ok\n::add-mask::hunter2\r::error::x")
    (line,) = capsys.readouterr().err.splitlines()
    assert message_of(line) == "stuck: the scheduler is ok ::add-mask::hunter2 ::error::x"  # with its time, as all logs


@pytest.mark.parametrize(
    ("args", "path", "answer"),
    [
        (["plan", "--no-store"], "/api/v2/version", httpx.Response(200, json={"version": "2\n::error title=x::y"})),
        (["plan", "--no-store"], "/api/v2/dags", httpx.Response(403, json={"detail": HOSTILE_DETAIL})),
        (["plan", "--no-store"], "/api/v2/dags", httpx.Response(503, json={"detail": HOSTILE_DETAIL})),
        (["reconcile", "--once"], "/api/v2/backfills", httpx.Response(400, json={"detail": HOSTILE_DETAIL})),
    ],
    ids=["version", "403", "503-retried", "create-400"],
)
def test_a_hostile_fake_airflow_prints_no_workflow_command_from_a_real_cli(
    tmp_path: Path, args: list[str], path: str, answer: httpx.Response
) -> None:
    fake = FakeAirflow()
    method = "POST" if path == "/api/v2/backfills" else "GET"
    # a retried read fails at each of the preflight's attempts: on the DAG listing, its first page's two, then the
    # one of the light check it falls back to
    for _ in range(3 if answer.status_code == 503 else 2):
        fake.fault(method, path, lambda _request: answer)
    proxy = SwitchableProxy("http://fake-airflow", transport=fake.transport())
    bench = Bench(tmp_path, url=proxy.url, fake=fake)
    try:
        bench.spec("hostile", dag="demo_daily")
        done = subprocess.run(
            [sys.executable, "-m", "controller", *args],
            env=bench.cli_env(),
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    finally:
        proxy.close()
        bench.close()
    assert done.returncode == 1, done.stderr
    assert "::error title=x::y" in done.stderr  # shown, inert, mid-line
    assert_terminal_safe(done.stdout)
    assert_terminal_safe(done.stderr)
    if path == "/api/v2/dags" and answer.status_code == 503:  # the retry's warning: the handler of last resort
        assert message_of(done.stderr.splitlines()[0]).startswith("attempt #1/2 failed; will retry in "), done.stderr
