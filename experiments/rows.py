"""The base of the rows experiments return: frozen dataclasses that write themselves as their JSON files hold them.

A row's JSON object lists its fields in the order the dataclass declares them, so the declaration fixes the key
order of report.json, trained.json and capacity.json, which `--stored` replays and the tests read. A field declared
with `optional()` is left out where it holds None: a row that never had the value (a construction that is not
installed has no budget) writes no key for it, as these files always did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

R = TypeVar("R", bound="Row")


def optional() -> Any:
    """A field that is None where the row has no such value, and is then left out of the row's JSON."""
    return dataclasses.field(default=None, metadata={"omit_if_none": True})


@dataclasses.dataclass(frozen=True, kw_only=True)
class Row:
    """A row; a subclass that sets `STAGE` opens its JSON object with `"stage": STAGE` (the report's rows say which
    stage made them)."""

    STAGE: ClassVar[str | None] = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {} if self.STAGE is None else {"stage": self.STAGE}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None or not field.metadata.get("omit_if_none"):
                data[field.name] = value
        return data

    @classmethod
    def from_json(cls: type[R], data: Mapping[str, Any]) -> R:
        """The row `to_json` wrote; a TypeError names a key the row does not have (or one it lacks)."""
        fields = dict(data)
        stage = fields.pop("stage", None)
        if stage != cls.STAGE:
            raise TypeError(f"a {cls.__name__} has stage {cls.STAGE!r}, not {stage!r}")
        return cls(**fields)
