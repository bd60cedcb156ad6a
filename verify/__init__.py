"""Verification: checkers, certificates, precision search, and the failure search."""
