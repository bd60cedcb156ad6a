"""Independent references the tests compare against: the scalar MPFR executor, a plain float64 forward pass, and
the tasks' answers computed the slow way."""
