"""What a command's start imports: only the CLI module that registers it (a pass under cron or `--watch` does not
pay for `init`'s or `audit`'s modules), and `--help` lists every command in one order however it was reached."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from controller import __version__
from controller.cli import HOMES, PARTS, _command

PROBE = """
import json, sys
from controller.cli import main
main({argv!r})
found = [m for m in sys.modules if m.startswith("controller.cli.") and m.rpartition(".")[2] in {parts!r}]
print(json.dumps(sorted(found)))
"""


def _cli_modules(argv: list[str]) -> list[str]:
    code = PROBE.format(argv=argv, parts=set(PARTS))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_a_command_imports_only_the_module_that_registers_it() -> None:
    assert _cli_modules(["reconcile", "--help"]) == ["controller.cli.reconcile"]
    assert _cli_modules(["audit", "verify", "--help"]) == ["controller.cli.audit"]
    assert _cli_modules(["--log-format", "json", "status", "--help"]) == ["controller.cli.status"]


def test_help_and_an_unknown_command_register_every_command() -> None:
    every = sorted(f"controller.cli.{name}" for name in PARTS)
    assert _cli_modules(["--help"]) == every
    assert _cli_modules(["reconsile"]) == every  # so that click can say which commands there are


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        ([], None),
        (["--help"], None),
        (["--version"], None),
        (["--log-format", "json", "plan"], "plan"),
        (["--log-format=json", "plan", "--no-store"], "plan"),
        (["store", "migrate"], "store"),
    ],
)
def test_the_command_is_the_first_argument_that_is_not_a_root_option(argv: list[str], command: str | None) -> None:
    assert _command(argv) == command


def test_every_command_has_a_home_and_help_lists_them_in_one_order() -> None:
    """An earlier call in the process registered `reconcile` first: `--help` still lists `validate` first."""
    code = """
from controller.cli import main
main(["reconcile", "--help"])
main(["--help"])
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    fresh = subprocess.run(
        [sys.executable, "-m", "controller", "--help"], capture_output=True, text=True, check=True
    ).stdout
    commands = [line.split()[0] for line in fresh.splitlines() if line.startswith("  ") and line.split()[0] in HOMES]
    assert commands == [
        "validate",
        "new",
        "init",
        "plan",
        "reconcile",
        "status",
        "report",
        "notify",  # the command groups after the commands
        "audit",
        "store",
        "evidence",
        "stop",
    ]
    assert done.stdout.endswith(fresh)


def test_version_is_answered_without_typer_and_as_typer_answers_it() -> None:
    probe = "import sys; from controller.cli import main; main(['--version']); print('typer' in sys.modules)"
    quick = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert quick.splitlines() == [f"backfillctl {__version__}", "False"]
    via_typer = "from controller.cli import main; main(['--log-format', 'text', '--version'])"
    typer_out = subprocess.run([sys.executable, "-c", via_typer], capture_output=True, text=True, check=True).stdout
    assert typer_out == f"backfillctl {__version__}\n"


def test_the_console_script_leaves_httpxs_own_command_line_unimported() -> None:
    """The process that ends with the command skips httpx's CLI (click, rich, pygments): httpx still works."""
    probe = """
import sys
sys.argv = ["backfillctl", "--version"]
from controller.cli import entry
try:
    entry()
except SystemExit as done:
    code = done.code
import httpx, rich.console
cli = sys.modules.get("httpx._main")
print(code, cli is None, "pygments" in sys.modules, httpx.Response(204).status_code)
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert done.splitlines() == [f"backfillctl {__version__}", "0 True False 204"]
