"""One reconcile pass: the specs, the observation of Airflow, holds, analysis, consumers, the gate, apply and record,
stages; what `plan`, `status` and `reconcile` share."""
