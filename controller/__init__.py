"""backfillctl: a declarative, change-managed backfill controller for Apache Airflow 3."""

__version__ = "0.1.0"
