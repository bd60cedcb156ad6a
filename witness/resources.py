"""What this machine can hold, and refusing work that would not fit before any of it is allocated.

`require_memory(bytes, what)` raises `TooLarge` (one line, exit status 2 on the command line) when an estimate
exceeds `USABLE_FRACTION` of the memory the system reports available (Linux `MemAvailable`, else the physical
memory). The margin is there because estimates count the arrays a step holds, not the interpreter, the allocator's
slack or what other processes take meanwhile: a compile estimated at 20 GiB on a machine with 23 GiB available
exhausted it. Estimates are
made by whoever knows the shapes: a construction's `memory_bytes` (attached to its builder), a weights file's
header, a searched architecture's arrays.
"""

from __future__ import annotations

import os

from witness.errors import WitnessError


class TooLarge(WitnessError, MemoryError):
    """Work whose memory estimate exceeds what the machine has; the message gives both."""


def available_bytes() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def size_text(nbytes: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}" if nbytes < 2**60 else f"2^{nbytes.bit_length() - 1} bytes"
    return f"{nbytes} bytes"


USABLE_FRACTION = 0.75


def require_memory(nbytes: int, what: str) -> None:
    available = available_bytes()
    if nbytes > USABLE_FRACTION * available:
        raise TooLarge(f"{what} needs about {size_text(nbytes)} of memory; this machine has {size_text(available)} "
                       f"available, of which witness uses at most {USABLE_FRACTION:.0%}")


def count_text(count: int) -> str:
    """An exact count, or its power of two when it has thousands of digits (Python refuses to print those)."""
    if count.bit_length() <= 10_000:
        return str(count)
    return f"about 2^{count.bit_length() - 1}"
