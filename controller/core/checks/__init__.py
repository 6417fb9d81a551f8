"""Checks of a tree of specs: the loaded spec, the validator, guard, DAG and change rules, the approval gate."""
