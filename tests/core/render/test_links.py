"""Links into Airflow's UI (pure): the 3.4 backfill page where the server has it, else the DAG's backfill runs."""

from __future__ import annotations

import pytest
from packaging.version import Version

from controller.core.model.capabilities import capabilities_of
from controller.core.render.links import backfill_link, ui_base


@pytest.mark.parametrize(
    ("url", "base"),
    [
        ("https://airflow.example.com/", "https://airflow.example.com"),
        ("https://user:SECRET@airflow.example.com:8443/base/?token=SECRET#x", "https://airflow.example.com:8443/base"),
        ("http://[::1]:8080", "http://[::1]:8080"),
        ("not a url", None),
        (None, None),
    ],
)
def test_the_ui_base_carries_no_credentials(url: str | None, base: str | None) -> None:
    assert ui_base(url) == base


def test_a_backfill_links_to_its_page_on_3_4_else_to_its_dags_backfill_runs() -> None:
    base = "https://a.example"
    old, new = capabilities_of(Version("3.3.2")), capabilities_of(Version("3.4.0"))
    assert (
        backfill_link(base, old, "orders daily/x", 7)
        == "https://a.example/dags/orders%20daily%2Fx/runs?run_type=backfill"
    )
    assert backfill_link(base, new, "orders", 7) == "https://a.example/dags/orders/backfills/7"
    assert backfill_link(base, new, "orders", None) == "https://a.example/dags/orders/runs?run_type=backfill"
    assert backfill_link(base, None, "orders", 7) == "https://a.example/dags/orders/runs?run_type=backfill"
    assert backfill_link(None, new, "orders", 7) is None
    assert backfill_link(base, new, "", 7) is None
