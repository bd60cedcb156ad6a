"""Constructions: functions from task parameters to explicit networks, each with its argument beside the weights.

Builders are registered as entry points (group `witness.constructions` in pyproject.toml), which is how the
core's `witness.compile` finds them without importing this package.
"""
