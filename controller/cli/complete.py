"""Shell completion (`backfillctl --install-completion`): spec names, the DAG ids the specs name, and stop ids.

Completion runs on every TAB, so it reads only what it must: the file names under the specs folder (a spec's name is
its file name), a `dag_id:` line per file, and the store's stops when the store file or server answers; anything that
fails completes nothing rather than printing an error into the shell.
"""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start.
import os
import re
from pathlib import Path

SUFFIXES = (".yaml", ".yml")
_DAG_ID = re.compile(r"^dag_id:\s*[\"']?([^\"'#\s]+)", re.MULTILINE)


def _spec_files() -> list[Path]:
    folder = Path(os.environ.get("BACKFILLCTL_SPECS_DIR") or "specs")
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file() and p.stem != "policy")


def spec_names(incomplete: str) -> list[str]:
    """The specs whose names start with what was typed."""
    return [p.stem for p in _spec_files() if p.stem.startswith(incomplete)]


def dag_ids(incomplete: str) -> list[str]:
    """The DAG ids the specs name, each once."""
    found = set()
    for path in _spec_files():
        try:
            match = _DAG_ID.search(path.read_text(errors="replace")[:4096])
        except OSError:
            continue
        if match and match.group(1).startswith(incomplete):
            found.add(match.group(1))
    return sorted(found)


def stop_ids(incomplete: str) -> list[str]:
    """The stops in force as `#id` (and their target), from the store when it answers (the store alone, not
    `runtime.session.open_store`: a completion imports no HTTP client)."""
    from controller.adapters.store import Store
    from controller.commands.runtime.settings import Settings
    from controller.errors import ControllerError

    try:
        with Store(Settings.from_env(os.environ).store_url, read_only=True) as store:
            stops = store.stops()
    except ControllerError:
        return []
    shown = [f"#{s.id}" for s in stops] + [s.target for s in stops]
    return [s for s in dict.fromkeys(shown) if s.startswith(incomplete)]
