"""The analysis against a real Prometheus (issue 27 §1): the adapter's observation through `evaluate`, exact verdicts
and reasons. Each test owns its metric names, so the tests share one Prometheus and its two exporters."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from controller.adapters.prometheus import PrometheusClient, client_from_env
from controller.core.model.analysis import Analysis, Direction, Inconclusive, Observation, Sample
from controller.core.rules.analysis import NEW_STATE, AnalysisState, LoadAction, evaluate
from controller.errors import ConfigError
from tests.adapters.prometheus.harness import PrometheusServer, free_port, wait
from tests.core.rules.test_analysis import WAREHOUSE


@pytest.fixture
def client(prometheus_server: PrometheusServer) -> Iterator[PrometheusClient]:
    with PrometheusClient(prometheus_server.url) as found:
        yield found


def analysis(query: str, **changes: object) -> Analysis:
    """The unit tests' warehouse analysis (pause above 0.85, resume below 0.7, samples up to 2m old) on `query`."""
    return replace(WAREHOUSE, query=query, **changes)  # type: ignore[arg-type]


def seen(client: PrometheusClient, query: str, value: float) -> Sample:
    """Wait until Prometheus answers `value` for `query` (the exporter was just set), and return the sample."""

    def probe() -> Sample | None:
        found = client.query(query)
        return found if isinstance(found, Sample) and found.value == value else None

    return wait(probe, f"{query} = {value}")


def observed(client: PrometheusClient, query: str, what: type[Observation], text: str = "") -> Observation:
    def probe() -> Observation | None:
        found = client.query(query)
        return found if isinstance(found, what) and (not text or text in str(found)) else None

    return wait(probe, f"{query}: {what.__name__} {text}")


class Passes:
    """Evaluate the same config pass after pass, carrying the state (as the planner will, through JSON)."""

    def __init__(self, config: Analysis) -> None:
        self.config, self.state = config, NEW_STATE

    def __call__(self, observation: Observation, now: datetime | None = None) -> tuple[LoadAction, str]:
        moment = now or (observation.time if isinstance(observation, Sample) else datetime.now(UTC))
        verdict, state = evaluate(self.config, self.state, observation, moment)
        self.state = AnalysisState.from_json(state.to_json())
        return verdict.action, verdict.reason


def test_over_and_under_with_hysteresis(prometheus_server: PrometheusServer, client: PrometheusClient) -> None:
    exporter, query = prometheus_server.main, "max(t_hyst_cpu_ratio)"
    passes = Passes(analysis(query))
    steps = [
        (0.5, LoadAction.RESUME, f"ok: warehouse load 0.5, pauses > 0.85 ({query})"),
        (0.95, LoadAction.PAUSE, f"waiting: warehouse load 0.95 > 0.85 ({query})"),
        (0.8, LoadAction.PAUSE, f"waiting: warehouse load 0.8, resumes < 0.7 ({query})"),
        (0.75, LoadAction.PAUSE, f"waiting: warehouse load 0.75, resumes < 0.7 ({query})"),
        (0.6, LoadAction.RESUME, f"resuming: warehouse load 0.6 < 0.7 ({query})"),
        (0.8, LoadAction.RESUME, f"ok: warehouse load 0.8, pauses > 0.85 ({query})"),
    ]
    for value, action, reason in steps:
        exporter.set('t_hyst_cpu_ratio{node="a"}', value)
        exporter.set('t_hyst_cpu_ratio{node="b"}', 0.1)  # max() of two series: one value
        assert passes(seen(client, query, value)) == (action, reason)


def test_for_counts_consecutive_evaluations(prometheus_server: PrometheusServer, client: PrometheusClient) -> None:
    exporter, query = prometheus_server.main, "max(t_for_cpu_ratio)"
    passes = Passes(analysis(query, for_passes=2))
    exporter.set("t_for_cpu_ratio", 0.9)
    first = seen(client, query, 0.9)
    assert passes(first) == (
        LoadAction.HOLD,
        f"holding: warehouse load 0.9 > 0.85, 1 of 2 passes before pausing ({query})",
    )
    later = wait(lambda: (s := seen(client, query, 0.9)).time > first.time and s, "a newer evaluation")
    assert passes(later) == (LoadAction.PAUSE, f"waiting: warehouse load 0.9 > 0.85 ({query})")


def test_pause_below_free_slots(prometheus_server: PrometheusServer, client: PrometheusClient) -> None:
    exporter, query = prometheus_server.main, "min(t_below_open_slots)"
    passes = Passes(analysis(query, direction=Direction.BELOW, pause_at=10.0, resume_at=11.0))
    for value, action in (
        (12, LoadAction.RESUME),
        (9, LoadAction.PAUSE),
        (10.5, LoadAction.PAUSE),
        (11.5, LoadAction.RESUME),
    ):
        exporter.set("t_below_open_slots", value)
        assert passes(seen(client, query, value))[0] is action


def test_a_sample_older_than_max_sample_age_is_stale(
    prometheus_server: PrometheusServer, client: PrometheusClient
) -> None:
    """Prometheus stamps an instant answer with its evaluation time: a sample read 5 minutes ago (a lagging
    Prometheus, a skewed clock) is stale when evaluated now."""
    prometheus_server.main.set("t_age_cpu_ratio", 0.1)
    sample = seen(client, "max(t_age_cpu_ratio)", 0.1)
    passes = Passes(analysis("max(t_age_cpu_ratio)"))
    assert passes(sample, sample.time + timedelta(minutes=5)) == (
        LoadAction.INCONCLUSIVE,
        "inconclusive: warehouse: sample 5m old > max_sample_age 2m (max(t_age_cpu_ratio))",
    )


def test_a_frozen_value_is_stale_with_timestamp_in_the_query(
    prometheus_server: PrometheusServer, client: PrometheusClient
) -> None:
    """An exporter that keeps serving an old sample (its own timestamp): the query checks the sample's age with
    `timestamp()` and answers no series once it is older than 3 seconds."""
    stamp_ms = int(datetime.now(UTC).timestamp() * 1000)
    prometheus_server.main.set("t_frozen_cpu_ratio", f"0.2 {stamp_ms}")
    query = "max(t_frozen_cpu_ratio) and on() (time() - max(timestamp(t_frozen_cpu_ratio)) < 3)"
    seen(client, query, 0.2)
    stale = observed(client, query, Inconclusive)
    passes = Passes(analysis(query, pause_after=timedelta(minutes=10)))
    action, reason = passes(stale, datetime(2026, 3, 2, 12, 0, tzinfo=UTC))
    assert action is LoadAction.INCONCLUSIVE
    assert reason == (
        "inconclusive: warehouse: the query returned no series (a stopped exporter, or a selector that matches "
        f"nothing); pausing at 12:10Z if it stays so ({query})"
    )


def test_a_dead_exporter_is_inconclusive_then_fails_closed(
    prometheus_server: PrometheusServer, client: PrometheusClient
) -> None:
    exporter, query = prometheus_server.flaky, "max(t_dead_cpu_ratio)"
    # the passes are minutes apart on the controller's clock; the samples' own age stays within max_sample_age
    passes = Passes(analysis(query, pause_after=timedelta(minutes=10), max_sample_age=timedelta(hours=1)))
    exporter.set("t_dead_cpu_ratio", 0.3)
    t0 = seen(client, query, 0.3).time
    assert passes(Sample(0.3, t0), t0)[0] is LoadAction.RESUME
    exporter.down = True
    try:
        gone = observed(client, query, Inconclusive)
    finally:
        exporter.down = False
    assert gone == Inconclusive("the query returned no series (a stopped exporter, or a selector that matches nothing)")
    assert passes(gone, t0 + timedelta(minutes=1))[0] is LoadAction.INCONCLUSIVE
    assert passes(gone, t0 + timedelta(minutes=11)) == (
        LoadAction.FAIL_CLOSED,
        "fail-closed: warehouse: the query returned no series (a stopped exporter, or a selector that matches "
        f"nothing); inconclusive for 10m >= pause_after 10m ({query})",
    )
    back = seen(client, query, 0.3)
    assert passes(back, t0 + timedelta(minutes=12)) == (
        LoadAction.RESUME,
        f"resuming: warehouse load 0.3 < 0.7 ({query})",
    )


def test_nan_is_inconclusive(prometheus_server: PrometheusServer, client: PrometheusClient) -> None:
    prometheus_server.main.set("t_nan_ratio", "NaN")
    prometheus_server.main.set("t_inf_ratio", "+Inf")
    nan = Inconclusive("the value is NaN (not a number)")
    assert observed(client, "max(t_nan_ratio)", Inconclusive, "NaN") == nan
    assert observed(client, "t_inf_ratio", Inconclusive, "Inf") == Inconclusive("the value is +Inf")
    assert observed(client, "-t_inf_ratio", Inconclusive, "Inf") == Inconclusive("the value is -Inf")
    action, reason = Passes(analysis("max(t_nan_ratio)"))(Inconclusive("the value is NaN (not a number)"))
    assert (action, reason) == (
        LoadAction.INCONCLUSIVE,
        "inconclusive: warehouse: the value is NaN (not a number) (max(t_nan_ratio))",
    )


def test_two_series_are_inconclusive(prometheus_server: PrometheusServer, client: PrometheusClient) -> None:
    prometheus_server.main.set('t_two_cpu_ratio{node="a"}', 0.5)
    prometheus_server.main.set('t_two_cpu_ratio{node="b"}', 0.6)
    found = observed(client, "t_two_cpu_ratio", Inconclusive, "2 series")
    assert found == Inconclusive(
        "the query returned 2 series, one is needed ({node='a'}, {node='b'}); aggregate them, e.g. max(…)"
    )


def test_a_scalar_answer_is_one_value(client: PrometheusClient) -> None:
    found = client.query("scalar(vector(0.25))")
    assert isinstance(found, Sample)
    assert found.value == 0.25
    assert abs((datetime.now(UTC) - found.time).total_seconds()) < 60


def test_a_range_answer_is_inconclusive(client: PrometheusClient) -> None:
    assert client.query("vector(1)[1m:10s]") == Inconclusive(
        "the query answers a matrix, not one instant value; write an instant query"
    )
    assert client.query('"text"') == Inconclusive(
        "the query answers a string, not one instant value; write an instant query"
    )


def test_a_bad_query_is_inconclusive_with_prometheus_words(client: PrometheusClient) -> None:
    found = client.query("max(")
    assert found == Inconclusive(
        'Prometheus answered 400 bad_data: invalid parameter "query": 1:5: parse error: unclosed left parenthesis'
    )
    verdict, _ = evaluate(analysis("max("), NEW_STATE, found, datetime(2026, 3, 2, 12, 0, tzinfo=UTC))
    assert verdict.action is LoadAction.INCONCLUSIVE
    assert verdict.reason == f"inconclusive: warehouse: {found.reason} (max()"


def test_unreachable_prometheus_never_shows_credentials() -> None:
    port = free_port()  # nothing listens there
    with PrometheusClient(f"http://reader:s3cret-canary@127.0.0.1:{port}", timeout=2) as client:
        found = client.query("max(up)")
    assert found == Inconclusive(f"Prometheus http://reader:***@127.0.0.1:{port} unreachable (ConnectError)")
    assert "s3cret-canary" not in repr(client)


def test_the_url_comes_from_the_named_environment_variable(prometheus_server: PrometheusServer) -> None:
    with client_from_env("BACKFILLCTL_PROMETHEUS_URL", {"BACKFILLCTL_PROMETHEUS_URL": prometheus_server.url}) as c:
        assert isinstance(c.query("vector(1)"), Sample)
    with pytest.raises(ConfigError, match=r"^BACKFILLCTL_PROMETHEUS_URL is not set$"):
        client_from_env("BACKFILLCTL_PROMETHEUS_URL", {})
    with pytest.raises(ConfigError, match=r"^PROM is not an http:// or https:// address$"):
        client_from_env("PROM", {"PROM": "prometheus:9090"})
