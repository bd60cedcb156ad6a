"""Find construction builders by name through the `witness.constructions` entry-point group.

The core never imports `constructions/` directly (the dependency arrow points the other way); the installed
package declares its builders in pyproject.toml and they are looked up here at call time.
"""

from __future__ import annotations

from typing import Any, Callable

from witness.errors import ParameterError
from witness.resources import require_memory

GROUP = "witness.constructions"


def entry_points(group: str):
    """`importlib.metadata.entry_points`, imported when a construction is looked up: `import witness` and
    `witness --help` need no package metadata (it takes a tenth of a CPU-second)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


def construction_names() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def builder(name: str) -> Callable[..., Any]:
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise ParameterError(f"unknown construction {name!r}; known: {', '.join(construction_names()) or 'none'}")
    return found[0].load()


def compile(name: str, **params: Any):
    """Build the network of construction `name`, e.g. compile("composition", L=3, m=4, n=[2, 4]). A builder with a
    `memory_bytes(**params)` estimate is refused (`TooLarge`) before it allocates more than the machine has."""
    build = builder(name)
    try:
        estimate = getattr(build, "memory_bytes", None)
        if estimate is not None:
            require_memory(estimate(**params), f"compiling {name} {params}")
        return build(**params)
    except TypeError as exc:
        raise ParameterError(f"bad parameters for construction {name}: {exc}") from None
