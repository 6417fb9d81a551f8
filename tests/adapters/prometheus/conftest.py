from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adapters.prometheus.harness import PrometheusServer, start_prometheus, stop_prometheus


@pytest.fixture(scope="session")
def prometheus_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """One real Prometheus for the session (the tests join one xdist group, so one worker starts it)."""
    server = start_prometheus(tmp_path_factory.mktemp("prometheus"))
    try:
        yield server
    finally:
        stop_prometheus(server)
