"""Texts in and out: strict YAML, located diagnostics, JSON Schema checks, patterns, the starter files, escaping."""
