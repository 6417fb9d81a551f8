"""`python -m controller` runs the CLI."""

from controller.cli import entry

entry()
