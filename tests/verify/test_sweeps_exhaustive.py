"""verify.sweeps.exhaustive: the chunked check on a 2-worker local cluster gives the serial check's Result."""

from __future__ import annotations

import json

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import all_composition_inputs, composition_answer_from_tokens
from tests.verify.test_verify import FIXED_4_4, overflowing_on_token_2
from verify import check, sweeps
from witness.arith import arithmetic, parse_format
from witness.errors import ParameterError
from witness.execute import run
from lab.sweep import Engine


def without_chunks(result) -> str:
    """The Result as JSON text without the chunk count (text, so that NaNs in a trace compare equal)."""
    out = result.as_dict()
    out["detail"] = {k: v for k, v in out["detail"].items() if k != "chunks"}
    return json.dumps(out, sort_keys=True)


def broken(network):
    """The network with answer 0's readout column removed: exactly the inputs whose answer is 0 go wrong."""
    W_U = network.state_dict()["unembed.W_U"].copy()
    W_U[:, 0] = 0.0
    return network.with_arrays({"unembed.W_U": W_U})


@pytest.mark.parametrize("fmt, breaking", [("fp16", False), ("fp16", True), ("float:2,2", False),
                                           ("fixed:2,2", False)])
def test_chunked_on_two_workers_equals_the_serial_check(fmt, breaking):
    # fp16: verified; broken: some wrong answers; float:2,2: every answer wrong; fixed:2,2: a run overflows and
    # ends the check.
    network = witness.compile("composition", L=1, m=4)
    network = broken(network) if breaking else network
    arith = arithmetic(parse_format(fmt), "strict")
    serial = check.exhaustive(network, arith)
    chunked = sweeps.exhaustive(network, arith, Engine(workers=2), chunks=3)
    assert without_chunks(chunked) == without_chunks(serial)
    if fmt == "fp16" and not breaking:
        assert chunked.status.value == "verified" and chunked.checked == 4**4 * 4


def test_chunked_counts_every_wrong_input_like_a_plain_loop():
    network = broken(witness.compile("composition", L=1, m=3))
    arith = arithmetic(parse_format("fp16"), "strict")
    result = sweeps.exhaustive(network, arith, chunks=5)  # in-process
    wrong = sum(int(run(network, np.array([tokens]), arith).predictions[0][0])
                != composition_answer_from_tokens(3, (), tokens) for tokens in all_composition_inputs(3, ()))
    assert result.checked == 3**3 * 3 and 0 < result.failures == wrong < result.checked
    assert result.status.value == "falsified"


def test_an_overflow_in_a_later_chunk_ends_the_check_there_as_in_the_serial_check():
    # One input per chunk: inputs 0 and 1 pass, input 2 overflows, and the 78 chunks after it are discarded.
    network, arith = overflowing_on_token_2(), FIXED_4_4
    serial = check.exhaustive(network, arith)
    chunked = sweeps.exhaustive(network, arith, chunks=81)  # in-process
    assert chunked.detail["chunks"] == 81 and (chunked.checked, chunked.failures) == (3, 1)
    assert (chunked.status, chunked.counterexample) == (serial.status, serial.counterexample)
    # the message locates the overflowing value in the batch that ran it: a chunk's batch, not the serial one
    for result in (chunked, serial):
        assert result.detail["stopped_by_overflow"].startswith("fixed:4,4 overflow in add at index (")


def test_bad_chunks_are_refused():
    network = witness.compile("composition", L=1, m=2)
    with pytest.raises(ParameterError):
        sweeps.exhaustive(network, arithmetic(parse_format("fp16"), "strict"), chunks=0)
