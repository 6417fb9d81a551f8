"""Around the pass: once, `--watch` or `--until-complete`, and what happens between passes (notifications, metrics,
health, the status page, evidence found, results for pull requests)."""
