"""Rendering (returns strings): plans, validation, audit, status, the status page, the HTML report, PR comment."""
