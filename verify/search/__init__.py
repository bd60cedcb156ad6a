"""The search module (SPEC §6): probing hybrid and sparse architectures for failures, and the theorems' bounds."""
