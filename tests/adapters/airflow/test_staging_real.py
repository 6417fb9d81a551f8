"""Two real Airflows at once, as production and its staging (issue 28): the harness starts the second one
(`staging_airflow_url`) beside the session's (`airflow_url`), each with its own home, port, metadata database
and JWT secret. Real Airflow only: what is proven is that the two instances do not share anything."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from controller.adapters.airflow import AirflowClient
from controller.core.model.secret import Secret
from controller.errors import AirflowAuthError
from tests.adapters.airflow.test_contract import PUBLISH, wait_finished
from tests.conftest import AIRFLOW_VERSION


@pytest.fixture
def both(airflow_url: str, staging_airflow_url: str) -> Iterator[tuple[AirflowClient, AirflowClient]]:
    with (
        AirflowClient(airflow_url, username="admin", password=Secret("admin")) as production,
        AirflowClient(staging_airflow_url, username="admin", password=Secret("admin")) as staging,
    ):
        yield production, staging


def test_production_and_staging_are_two_independent_airflows(both: tuple[AirflowClient, AirflowClient]) -> None:
    production, staging = both
    assert production.base_url != staging.base_url
    assert (production.version(), staging.version()) == (AIRFLOW_VERSION, AIRFLOW_VERSION)
    for client in both:
        health = client.health()
        assert {c: health[c]["status"] for c in ("metadatabase", "scheduler", "dag_processor")} == {
            "metadatabase": "healthy",
            "scheduler": "healthy",
            "dag_processor": "healthy",
        }
    run_id = f"backfillctl__staging-real__{secrets.token_hex(4)}"
    run, created = staging.trigger_run(PUBLISH, run_id, {"where": "staging"})
    assert (run.run_id, created) == (run_id, True)
    assert production.get_run(PUBLISH, run_id) is None  # another metadata database
    assert wait_finished(staging, PUBLISH, run_id).state == "success"  # its own scheduler and execution API ran it
    assert production.get_run(PUBLISH, run_id) is None
    # its own JWT secret: staging's token means nothing to production
    token = staging.transport.token
    assert token is not None
    with AirflowClient(production.base_url, token=token) as borrowed, pytest.raises(AirflowAuthError) as refused:
        borrowed.get_run(PUBLISH, run_id)
    assert (refused.value.status, refused.value.detail) == (403, "Invalid JWT token")
