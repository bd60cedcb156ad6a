"""verify.result: the one verdict type, frozen, and its JSON form."""

from __future__ import annotations

import dataclasses
import json

import pytest

from verify.result import Counterexample, Result, Status


def test_a_result_is_frozen_and_its_dict_is_json_ready():
    example = Counterexample([0, 1, 2], 3, 1, {"blocks.0.hook_resid_post": [[0.5]]})
    kept = Counterexample([0, 1, 2], 3, 1)
    result = Result(Status.FALSIFIED, "sampled", {"format": "fp16", "semantics": "strict", "p": 16}, 10, 1, example,
                    {"seed": 0}, (kept,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = Status.VERIFIED
    out = result.as_dict()
    assert out == {"status": "falsified", "method": "sampled", "arithmetic": {"format": "fp16", "semantics": "strict",
                                                                               "p": 16},
                   "checked": 10, "failures": 1,
                   "counterexample": {"tokens": [0, 1, 2], "expected": 3, "output": 1,
                                      "trace": {"blocks.0.hook_resid_post": [[0.5]]}},
                   "detail": {"seed": 0}, "kept": [{"tokens": [0, 1, 2], "expected": 3, "output": 1, "trace": {}}]}
    assert json.loads(json.dumps(out)) == out


def test_the_fields_that_older_callers_give_by_position_keep_their_places():
    """A checker written against the five-field Result (verify.precision's Checker protocol) still builds one."""
    result = Result(Status.VERIFIED, "synthetic", {}, 1, 0)
    assert (result.counterexample, result.detail, result.kept) == (None, {}, ())
    assert result.as_dict()["status"] == "verified"
