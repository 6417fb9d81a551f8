"""The planner: desired and observed in, a Plan out; which runs are a spec's own, provenance, stuck backfills."""
