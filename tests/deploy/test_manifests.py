"""deploy/: the Kubernetes manifests pass kubernetes-validate in strict mode and say what the deployment needs
(one replica, Recreate, a full clone, the DDL role for migrate and the DML-only role for reconcile, probes on
/healthz, nothing mounted it does not need); the systemd units pass `systemd-analyze verify` and are hardened."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controller.adapters.monitor import Health, Metrics, MonitorServer

KUBERNETES = "1.30.0"  # the oldest Kubernetes these manifests are checked against (native sidecars not needed)


def documents(repo_root: Path) -> dict[str, dict[str, Any]]:
    """kind → the one resource of that kind under deploy/kubernetes."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((repo_root / "deploy" / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert doc["kind"] not in found
            found[doc["kind"]] = doc
    return found


@pytest.mark.parametrize("version", [KUBERNETES, kubernetes_validate.latest_version()])
def test_every_manifest_validates_strictly(repo_root: Path, version: str) -> None:
    docs = documents(repo_root)
    assert sorted(docs) == ["ConfigMap", "Deployment", "ServiceAccount"]
    for doc in docs.values():
        kubernetes_validate.validate(doc, version, strict=True)


def test_strict_validation_is_what_refuses_an_unknown_key(repo_root: Path) -> None:
    deployment = documents(repo_root)["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(deployment, KUBERNETES, strict=True)


def container(pod: dict[str, Any], name: str, *, init: bool = False) -> dict[str, Any]:
    (found,) = [c for c in pod["initContainers" if init else "containers"] if c["name"] == name]
    return found


def secret_of(env: list[dict[str, Any]], name: str) -> str:
    (entry,) = [e for e in env if e["name"] == name]
    return str(entry["valueFrom"]["secretKeyRef"]["name"])


def test_the_deployment_runs_one_reconciler_on_a_full_clone(repo_root: Path) -> None:
    deployment = documents(repo_root)["Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}  # never two versions against one store
    pod = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["git-clone", "store-migrate"]
    assert [c["name"] for c in pod["containers"]] == ["reconcile", "git-sync"]
    for sync in (container(pod, "git-clone", init=True), container(pod, "git-sync")):
        assert "--depth=0" in sync["args"]
        assert "--ref=main" in sync["args"]
        assert "--link=repo" in sync["args"]
    assert "--one-time" in container(pod, "git-clone", init=True)["args"]
    config = documents(repo_root)["ConfigMap"]["data"]
    assert config["BACKFILLCTL_SPECS_DIR"] == "/git/repo/specs"  # git-sync's --root=/git --link=repo, then specs/
    assert "--root=/git" in container(pod, "git-sync")["args"]
    assert "    BACKFILLCTL_SPECS_DIR=/git/repo/specs\n" in (repo_root / "Dockerfile").read_text()  # the image's
    migrate = container(pod, "store-migrate", init=True)
    reconcile = container(pod, "reconcile")
    assert migrate["args"] == ["store", "migrate"]
    assert reconcile["args"][:2] == ["reconcile", "--watch"]
    assert secret_of(migrate["env"], "BACKFILLCTL_STORE_URL") == "backfillctl-store-migrator"
    assert secret_of(reconcile["env"], "BACKFILLCTL_STORE_URL") == "backfillctl-store-reconciler"
    every_secret = {e["valueFrom"]["secretKeyRef"]["name"] for c in (migrate, reconcile) for e in c["env"]}
    assert "backfillctl-store-migrator" not in {secret_of(reconcile["env"], e["name"]) for e in reconcile["env"]}
    assert every_secret == {
        "backfillctl-store-migrator",
        "backfillctl-store-reconciler",
        "backfillctl-airflow",
        "backfillctl-audit",
        "backfillctl-github-app",
    }
    assert all("value" not in e for c in (migrate, reconcile) for e in c["env"])  # references, never values


def test_the_probes_ask_the_health_endpoint_of_the_metrics_port(repo_root: Path) -> None:
    pod = documents(repo_root)["Deployment"]["spec"]["template"]["spec"]
    reconcile = container(pod, "reconcile")
    assert "--metrics-port=9108" in reconcile["args"]
    assert "--metrics-host=0.0.0.0" in reconcile["args"]  # the kubelet probes the pod's address
    assert reconcile["ports"] == [{"name": "metrics", "containerPort": 9108}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert reconcile[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    server = MonitorServer(Metrics(), Health(), port=0)  # the path is the one the monitor serves health on
    try:
        answer = server.route("/healthz")
    finally:
        server.close()
    assert (answer.status, answer.body) == (200, b"ok (starting)\n")


def test_nothing_runs_as_root_or_mounts_what_it_does_not_need(repo_root: Path) -> None:
    docs = documents(repo_root)
    assert docs["ServiceAccount"]["automountServiceAccountToken"] is False
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["serviceAccountName"] == docs["ServiceAccount"]["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's USER
    for each in [*pod["initContainers"], *pod["containers"]]:
        assert each["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        assert set(each["resources"]["requests"]) == {"cpu", "memory"}
    reconcile = container(pod, "reconcile")
    assert {m["name"]: m.get("readOnly", False) for m in reconcile["volumeMounts"]} == {
        "git": True,
        "github-app": True,
        "tmp": False,
    }


SYSTEMD = ("backfillctl-watch.service", "backfillctl-reconcile.service", "backfillctl-reconcile.timer")


def unit(repo_root: Path, name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)  # SystemCallFilter is given twice
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((repo_root / "deploy" / "systemd" / name).read_text(encoding="utf-8"))
    return parser


def verify(units: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", "--man=no", *sorted(str(p) for p in units.iterdir())],
        capture_output=True,
        text=True,
        check=False,
    )


def copied(repo_root: Path, tmp_path: Path, change: tuple[str, str] = ("", "")) -> Path:
    """The units with ExecStart's /opt/backfillctl/bin/backfillctl pointing at a stand-in executable in tmp_path
    (verify checks that the program exists), and `change` made to the watch service."""
    program = tmp_path / "bin" / "backfillctl"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    units = tmp_path / "units"
    units.mkdir()
    for name in SYSTEMD:
        text = (repo_root / "deploy" / "systemd" / name).read_text(encoding="utf-8")
        text = text.replace("/opt/backfillctl/bin/backfillctl", str(program))
        if name == "backfillctl-watch.service":
            text = text.replace(*change)
        (units / name).write_text(text)
    return units


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_verifies_the_units_without_a_word(repo_root: Path, tmp_path: Path) -> None:
    done = verify(copied(repo_root, tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_analyze_is_what_refuses_a_broken_unit(repo_root: Path, tmp_path: Path) -> None:
    done = verify(copied(repo_root, tmp_path, ("Type=exec", "Type=exce")))
    assert "backfillctl-watch.service:19: Failed to parse service type, ignoring: exce\n" in done.stderr


def test_the_units_are_hardened_and_read_secrets_from_a_file(repo_root: Path) -> None:
    watch, once = unit(repo_root, SYSTEMD[0])["Service"], unit(repo_root, SYSTEMD[1])["Service"]
    assert watch["ExecStart"] == "/opt/backfillctl/bin/backfillctl reconcile --watch --metrics-port 9108"
    assert once["ExecStart"] == "/opt/backfillctl/bin/backfillctl reconcile --once --lock-timeout 600"
    for service in (watch, once):
        assert service["User"] == "backfillctl"
        assert service["NoNewPrivileges"] == "yes"
        assert service["ProtectSystem"] == "strict"
        assert service["CapabilityBoundingSet"] == ""
        assert service["EnvironmentFile"] == "/etc/backfillctl/watch.env"
        assert "BACKFILLCTL_STORE_URL" not in service.get("Environment", "")
        assert "PASSWORD" not in service.get("Environment", "")
    timer = unit(repo_root, SYSTEMD[2])
    assert timer["Timer"]["Unit"] == "backfillctl-reconcile.service"
    assert timer["Timer"]["OnCalendar"] == "*:0/15"
    assert unit(repo_root, SYSTEMD[0])["Unit"]["Conflicts"] == (
        "backfillctl-reconcile.timer backfillctl-reconcile.service"
    )
