"""The command line `witness`: one module per command group, each turning options into calls of the packages
below it (experiments, verify, lab, constructions, the core) and their results into one payload (text or JSON)."""
