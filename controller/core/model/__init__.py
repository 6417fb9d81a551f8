"""The values: the spec, the policy, what Airflow holds, a binding and its phase, guards, chunks, date ranges."""
