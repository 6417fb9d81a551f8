"""Arithmetic over the values: what the guards decide, chunk sizes and the halt, schedules, retries, follow-ups."""
