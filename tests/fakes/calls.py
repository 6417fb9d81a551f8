"""Counting a client's Airflow calls through its observer hook: what the metrics see, nothing kept by the client."""

from __future__ import annotations

from controller.adapters.airflow import AirflowClient

Call = tuple[str, str]  # (method, path)


def record_calls(client: AirflowClient) -> list[Call]:
    """(method, path) of every request `client` sends from now on, in order (the token login is not one)."""
    calls: list[Call] = []
    client.observer = lambda method, path, _status: calls.append((method, path))
    return calls
