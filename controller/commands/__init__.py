"""Orchestration: the only layer that sequences I/O steps (adapters) around the pure core."""
