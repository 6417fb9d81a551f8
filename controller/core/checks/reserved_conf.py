"""Keys Airflow reserves for its serialisation, refused in a spec's `dag_run_conf` on every line (pure).

Airflow 3.4 answers 422 to a create or dry run whose `dag_run_conf` holds one of them in any nested mapping
(`check_conf_reserved_keys`, airflow/api_fastapi/core_api/datamodels/common.py: `FORBIDDEN_XCOM_KEYS` of
airflow/_shared/serialization); older lines take them, and code that decodes the conf (serde) would read the
mapping as a serialised object. They never mean anything to a DAG, so backfillctl refuses them everywhere, with
the located path; a spec already applied keeps what ran and gets a warning. Strings are not looked into
(Airflow does not either: a conf string stays a string).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, PathPart, Severity

RESERVED_CONF_KEYS = frozenset(
    {"__classname__", "__version__", "__data__", "__id__", "__cache__", "__type", "__source", "__var"}
)
APPLIED_NOTE = "the spec was applied already: what ran keeps its conf; a new spec must not use these keys"


def reserved_in(value: Any, path: tuple[PathPart, ...] = ()) -> Iterator[tuple[tuple[PathPart, ...], list[str]]]:
    """Every mapping under `value` that holds reserved keys: its path and those keys (sorted)."""
    if isinstance(value, Mapping):
        found = sorted(RESERVED_CONF_KEYS & {k for k in value if isinstance(k, str)})
        if found:
            yield path, found
        for key, item in value.items():
            yield from reserved_in(item, (*path, str(key)))
    elif isinstance(value, Sequence) and not isinstance(value, str | bytes):
        for index, item in enumerate(value):
            yield from reserved_in(item, (*path, index))


def check_reserved_conf(item: LoadedSpec, *, applied: bool) -> Iterator[Diagnostic]:
    """An error per mapping of `dag_run_conf` holding reserved keys (a warning on a spec already applied)."""
    conf = item.spec.dag_run_conf
    if conf is None:
        return
    for path, keys in reserved_in(conf):
        message = (
            f"this mapping holds {', '.join(keys)}: Airflow reserves {'these keys' if len(keys) > 1 else 'this key'} "
            "for its serialisation (Airflow 3.4 refuses the backfill with 422; older releases would hand the DAG "
            "a value its code decodes as a serialised object)"
        )
        if applied:
            yield Diagnostic(item.at("dag_run_conf", *path), f"{message} ({APPLIED_NOTE})", None, Severity.WARNING)
        else:
            yield Diagnostic(item.at("dag_run_conf", *path), message, "rename the key (without the double underscores)")
