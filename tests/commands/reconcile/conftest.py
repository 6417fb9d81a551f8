"""The reconcile tests' bench: on the fake Airflow, unless a module (the real-Airflow ones) brings its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    yield b
    b.close()
