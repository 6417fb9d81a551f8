"""Which backfills are a spec's, found by index (dates, then parameters) as a scan of every pair finds them (pure)."""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.airflow import Backfill
from controller.core.model.spec import BackfillSpec, ReprocessBehavior
from controller.core.plan.matching import chunk_of, chunks_among, matched, matches
from tests.core.plan.test_plan import JAN1, T0, spec

DAY = timedelta(days=1)
Shape = tuple[int, int, str, int, str | None, str]


def _spec(n: int, shape: Shape) -> BackfillSpec:
    first, length, reprocess, concurrency, conf, dag = shape
    conf_value = None if conf is None else {"mode": conf}
    return spec(
        f"s{n}",
        dag=dag,
        from_date=JAN1 + first * DAY,
        to_date=JAN1 + (first + length) * DAY,
        reprocess_behavior=ReprocessBehavior(reprocess),
        max_active_runs=concurrency,
        dag_run_conf=None if conf_value is None else MappingProxyType(conf_value),
    )


def _backfill(n: int, shape: Shape) -> Backfill:
    first, length, reprocess, concurrency, conf, dag = shape
    day = JAN1 + first * DAY
    return Backfill(n, dag, day, day + length * DAY, reprocess, concurrency, False, conf and {"mode": conf}, T0, T0)


shapes = st.tuples(
    st.integers(0, 8),
    st.integers(-1, 4),  # -1: a range that ends before it starts, as no spec has but a server could answer
    st.sampled_from(["none", "failed"]),
    st.integers(1, 2),
    st.sampled_from([None, "a", "b"]),
    st.sampled_from(["d", "e"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(shapes, max_size=8), st.lists(shapes, max_size=12))
def test_the_pairs_and_chunks_found_by_index_are_those_a_scan_of_every_pair_finds(
    spec_shapes: list[Shape], backfill_shapes: list[Shape]
) -> None:
    specs = [_spec(n, s) for n, s in enumerate(spec_shapes) if s[1] >= 0]
    backfills = [_backfill(100 + n, s) for n, s in enumerate(backfill_shapes)]
    assert list(matched(specs, backfills)) == [(s, b) for s in specs for b in backfills if matches(s, b)]
    assert chunks_among(specs, backfills) == {b.id for b in backfills if any(chunk_of(s, b) for s in specs)}


def test_a_chunk_inside_a_specs_range_is_found_and_one_reaching_past_it_or_asking_otherwise_is_not() -> None:
    whole = _spec(0, (0, 9, "none", 2, None, "d"))
    inside, past = _backfill(1, (2, 3, "none", 1, None, "d")), _backfill(2, (8, 3, "none", 2, None, "d"))
    other = _backfill(3, (2, 3, "failed", 2, None, "d"))
    assert chunks_among([whole], [inside, past, other]) == {1}
    assert list(matched([whole], [inside, _backfill(4, (0, 9, "none", 2, None, "d"))])) == [
        (whole, _backfill(4, (0, 9, "none", 2, None, "d")))
    ]
