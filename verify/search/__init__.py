"""The search module (conventions §6): probing hybrid and sparse architectures for failures, and the theorems' bounds."""
