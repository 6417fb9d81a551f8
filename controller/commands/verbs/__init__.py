"""One module per user command that is more than a pass: validate, new, init, status, report, audit, stop, the PR
comment."""
