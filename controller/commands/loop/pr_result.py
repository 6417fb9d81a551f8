"""`reconcile --result-dir DIR`: what the last pass created, refused, queued or blocked, written for the pull requests
behind it (`core.render.pr_result`): `result.json`, and `pr-N.md` per pull request to tell. The reusable workflow's
`pr-result` job posts the comments without the production secrets (docs/ci-trust.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.core.render.links import ui_base
from controller.core.render.pr_result import pr_comments, result_entries, result_json
from controller.errors import StoreError, UsageError

if TYPE_CHECKING:
    from controller.commands.reconcile.gate import EvidenceGiven
    from controller.commands.reconcile.reconciler import PassResult


def write_result(settings: Settings, last: PassResult, given: EvidenceGiven, folder: Path) -> list[Path]:
    """Write the files into `folder` (created; earlier `pr-*.md` removed): each spec's pull request as the store
    recorded its approval, else every change this run's evidence names."""
    try:
        with open_store(settings, read_only=True) as store:
            bindings = store.bindings()
    except StoreError:  # no store yet (a first pass refused before it): the pull requests are this run's changes
        bindings = {}
    carried = {n: b.approval.pr_number if b.approval is not None else None for n, b in bindings.items()}
    changes = sorted({d.change.number for d in given.documents if d.change is not None})
    entries = result_entries(last.current, last.applied, carried, ui_base(settings.airflow_url))
    commit = last.source.commit if last.source is not None else None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("pr-*.md"):
            old.unlink()
        written = [folder / "result.json"]
        written[0].write_text(json.dumps(result_json(commit, changes, entries), indent=2, sort_keys=True) + "\n")
        for number, body in pr_comments(entries, changes).items():
            path = folder / f"pr-{number}.md"
            path.write_text(body)
            written.append(path)
    except OSError as exc:
        raise UsageError(f"--result-dir {folder}: {exc.strerror or exc}", hint="give a folder it can write") from None
    return written
