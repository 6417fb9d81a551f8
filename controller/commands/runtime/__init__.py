"""The process around a command: settings from the environment, opening the store, the Airflow client and the lease,
which Airflow is which, logging and the collector.  No Reconciler here."""
