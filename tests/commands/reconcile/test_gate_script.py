""".github/scripts/evidence, run as the reconcile workflow would run it (a fake `gh` answering from canned GitHub
answers; the real backfillctl, git and jq): one document per pull request behind the commits `evidence needed`
lists (a rebase, a squash, a merge commit), a direct push's document, `--evidence-unavailable` for a commit GitHub
could not answer for; the arguments it writes gate the reconcile that follows."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from controller.commands.reconcile.evidence import read_document
from controller.commands.reconcile.gate import EvidenceGiven
from controller.core.model.evidence import MergeMethod
from tests.commands.reconcile.forge import Forge, Merged, git, pull_json
from tests.commands.reconcile.harness import Bench

SCRIPT = Path(__file__).resolve().parents[3] / ".github" / "scripts" / "evidence"
FAKE_GH = """
import json, os, sys
answers = json.load(open(os.environ["FAKE_GH"]))
if sys.argv[1:] == ["auth", "setup-git"]:
    open(os.environ["FAKE_GH"] + ".setup", "w").write("done")
    sys.exit(0)
args = [a for a in sys.argv[1:] if a not in ("api", "--paginate", "--slurp")]
jq = args[args.index("--jq") + 1] if "--jq" in args else None
path = args[0]
if path not in answers:
    sys.stderr.write("HTTP 502: Bad Gateway")
    sys.exit(1)
answer = answers[path]
if jq == ".permission":
    print(answer["permission"])
elif jq == ".[].number":
    print("\\n".join(str(p["number"]) for p in answer))
else:
    print(json.dumps(answer))
"""


def github_review(login: str | None, state: str, commit: str, review_id: int) -> dict[str, Any]:
    return {
        "id": review_id,
        "user": None if login is None else {"login": login},
        "state": state,
        "commit_id": commit,
        "submitted_at": "2026-11-01T10:00:00Z",
    }


def test_the_script_writes_the_evidence_the_gate_reads(bench: Bench, tmp_path: Path) -> None:
    forge = Forge(bench)
    bench.policy("version: 1\nrequire_reviewed_merge: true\n")
    start = forge.commit("policy")
    bench.store.record_reconciled(start, None)
    merges: list[Merged] = []
    for method, names in (("rebase", ("r-one", "r-two")), ("squash", ("s-one",)), ("merge", ("m-one",))):
        pull = forge.open()
        for name in names:
            if name.endswith("one"):
                bench.spec(name, dag="demo_tz")
            else:
                bench.spec(name, dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T02:00:00Z")
            forge.push(pull, f"add {name}")
        merges.append(forge.merge(pull, method))
    bench.spec("pushed", dag="demo_daily")
    pushed = forge.commit("pushed on main")
    bench.spec("outage", dag="demo_daily", start="2025-02-01", end="2025-02-02")
    outage = forge.commit("GitHub cannot say")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(bench.root, "remote", "add", "origin", str(origin))
    for merged in merges:
        git(bench.root, "push", "-q", "origin", f"{merged.pull.head}:refs/pull/{merged.pull.number}/head")
    repo = "repos/acme/specs"
    answers: dict[str, Any] = {f"{repo}/commits/{pushed}/pulls": []}
    for merged in merges:
        number, pull = merged.pull.number, pull_json(merged)
        # each commit a rebase landed on main is the pull request's too (a cherry-pick a second later is another
        # commit than the branch's: asked for, it must be known)
        landed = git(bench.root, "rev-list", "--first-parent", f"{merged.base_sha}..{merged.merge_sha}").split()
        for commit in [*landed, *merged.pull.commits]:
            answers[f"{repo}/commits/{commit}/pulls"] = [pull]
        answers[f"{repo}/pulls/{number}"] = pull
        reviews = [
            github_review("bob", "APPROVED", merged.pull.head, number * 10),
            github_review(None, "COMMENTED", merged.pull.head, 1),
        ]
        answers[f"{repo}/pulls/{number}/reviews"] = [reviews]
    answers[f"{repo}/collaborators/bob/permission"] = {"permission": "write"}
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f"#!{sys.executable}\n{FAKE_GH}")
    (bin_dir / "gh").chmod(0o755 | stat.S_IEXEC)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
        "FAKE_GH": str(tmp_path / "answers.json"),
        "GITHUB_REPOSITORY": "acme/specs",
        "BACKFILLCTL_STORE_URL": bench.store_url,
        "BACKFILLCTL_SPECS_DIR": "specs",
    }
    out = tmp_path / "evidence"
    done = subprocess.run(
        ["bash", str(SCRIPT), str(out)], cwd=bench.root, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "answers.json.setup").exists()  # git fetches refs/pull/N/head with gh's credential
    assert (
        f"::warning title=backfillctl evidence::cannot read the pull request behind {outage} (HTTP 502: Bad "
        "Gateway); its changes are held" in done.stdout
    )
    args = (out / "args").read_text().splitlines()
    files = [Path(args[i + 1]) for i, a in enumerate(args) if a == "--evidence"]
    unavailable = [args[i + 1] for i, a in enumerate(args) if a == "--evidence-unavailable"]
    documents = [read_document(f) for f in files]
    assert [(d.change.number if d.change else None, d.commit) for d in documents] == [
        (41, merges[0].merge_sha),
        (42, merges[1].merge_sha),
        (43, merges[2].merge_sha),
        (None, pushed),
    ]
    assert [
        (d.change.merge_method, d.change.base_sha, d.change.head_sha) for d in documents if d.change is not None
    ] == [(MergeMethod(m.method), m.base_sha, m.pull.head) for m in merges]
    assert [(r.reviewer, r.permission) for r in documents[0].reviews] == [("bob", "write")]  # the ghost skipped
    assert unavailable == [outage]
    reconciler = bench.reconciler()
    reconciler.evidence = EvidenceGiven(tuple(documents), tuple(unavailable))
    result = reconciler.run_once()
    assert [r.split(":")[0] for r in result.refused] == ["pushed"]  # pushed without a pull request
    held = {i.spec: i.reason for i in result.plan.items if i.reason.startswith("held:")}
    assert list(held) == ["outage"]
    assert bench.fake is not None
    assert sorted(b["dag_id"] for b in bench.fake.backfills.values()) == ["demo_hourly", "demo_tz"]


def test_the_script_swallows_no_error() -> None:
    text = SCRIPT.read_text()
    assert "set -eo pipefail" in text
    assert not re.search(r"\|\|\s*(true|:)|set \+e|continue-on-error", text)
