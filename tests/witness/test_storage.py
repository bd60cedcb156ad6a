"""Narrow storage dtypes: chosen exactly, kept without copies, written and read bit for bit (header dtypes checked,
old float64 files still read), and invisible to every consumer, which computes in float64 as before."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import safetensors.numpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import witness
from constructions.composition import memory_bytes
from verify import checker
from verify.certify import certify
from verify.certify.networks import weights_of
from verify.result import Status
from tests.oracles import mpfr_reference as reference
from lab import strategies as ws
from witness.arith import FLOAT64, arithmetic
from witness.errors import FileFormatError
from witness.execute import run
from witness.io import HEADER_KEY, header
from witness.ir import Embedding
from witness.storage import STORAGE_DTYPES, is_sealed, narrowest_dtype, seal
from lab.train import accuracy


@pytest.mark.parametrize("values, expected", [
    ([0.0, 1.0, -1.0, 127.0, -128.0], "int8"),
    ([0.0, 128.0, 255.0], "uint8"),
    ([-1.0, 255.0], "int16"),
    ([-32768.0, 32767.0], "int16"),
    ([0.5, -2.0], "float16"),
    ([-0.0], "float16"),  # an integer dtype has no negative zero
    ([65504.0, 2.0**-24], "float16"),  # float16's largest value and smallest subnormal
    ([40000.5], "float32"),
    ([2.0**24, 2.0**-30], "float32"),
    ([2.0**24 + 1], "float64"),
    ([0.1], "float64"),
    ([], "int8"),
])
def test_the_narrowest_dtype_holds_every_value_exactly(values, expected):
    assert narrowest_dtype(np.array(values, dtype=np.float64)) == np.dtype(expected)


def test_an_integer_array_beyond_every_narrow_dtype_is_float64():
    assert narrowest_dtype(np.array([70000], dtype=np.int64)) == np.dtype("float32")
    assert narrowest_dtype(np.array([2**53 + 1], dtype=np.int64)) == np.dtype("float64")


# -- ownership: no copy of an array nothing else can write ---------------------------------------------------------
def test_the_ir_keeps_a_sealed_array_and_copies_one_that_can_still_change():
    W_E, W_pos = seal(np.ones((3, 2), np.int8)), np.ones((4, 2), np.float16)
    embedding = Embedding(W_E, W_pos)
    assert embedding.W_E is W_E
    assert embedding.W_pos is not W_pos and embedding.W_pos.dtype == np.float16 and W_pos.flags.writeable
    base = np.zeros((3, 2), np.int8)
    view = base[:]
    view.setflags(write=False)  # read-only, but `base` can still change it
    assert not is_sealed(view) and Embedding(view, W_pos).W_E is not view
    assert Embedding(np.zeros((3, 2), np.int64), W_pos).W_E.dtype == np.float64  # not a storage dtype


def test_compile_builds_each_table_once_in_int8():
    tracemalloc.start()
    network = witness.compile("composition", L=2, m=100, n=[99])  # 10,002 tokens
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    arrays = sum(array.nbytes for array in network.state_dict().values())
    for array in (network.embedding.W_E, network.embedding.W_pos, network.readout.W_U):
        assert array.dtype == np.int8 and is_sealed(array)
    assert peak < 1.5 * arrays  # a second copy of W_E and W_pos, two thirds of the arrays, would exceed it
    assert peak <= memory_bytes(2, 100, [99])  # the guard's estimate covers what the compile holds


@pytest.mark.parametrize("suffix", ["npz", "safetensors"])
def test_load_keeps_the_arrays_it_reads(tmp_path, suffix):
    network = witness.compile("composition", L=2, m=316, n=[316])  # 100,174 tokens
    path = tmp_path / f"net.{suffix}"
    network.save(path)
    arrays = sum(array.nbytes for array in network.state_dict().values())
    del network
    tracemalloc.start()
    loaded = witness.load(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert all(is_sealed(array) for array in loaded.state_dict().values())
    assert peak < 1.5 * arrays


# -- files ---------------------------------------------------------------------------------------------------------
@st.composite
def narrow_networks(draw):
    """A random network whose every array is stored in a drawn storage dtype, with values that dtype holds
    (negative zeros included in the float dtypes)."""
    network, _ = draw(ws.networks())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    state = {}
    for name, array in network.state_dict().items():
        dtype = draw(st.sampled_from(STORAGE_DTYPES))
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            values = rng.integers(info.min, info.max, size=array.shape, endpoint=True).astype(dtype)
        else:
            values = rng.normal(0, 100, size=array.shape).astype(dtype)
            values[rng.random(array.shape) < 0.1] = -0.0
        state[name] = values
    return network.with_arrays(state)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(narrow_networks(), st.sampled_from(["npz", "safetensors"]))
def test_narrow_arrays_round_trip_bit_for_bit(tmp_path, network, suffix):
    path = tmp_path / f"net.{suffix}"
    network.save(path)
    loaded = witness.load(path)
    for name, array in network.state_dict().items():
        back = loaded.state_dict()[name]
        assert back.dtype == array.dtype and back.shape == array.shape
        assert back.tobytes() == array.tobytes(), name  # bits, the sign of zero included


def npz_parts(network):
    return dict(network.state_dict()), header(network)


def write_npz(path, arrays, head):
    np.savez(path, **arrays, **{HEADER_KEY: np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)})
    return path


def one_line_error(path) -> str:
    with pytest.raises(FileFormatError) as info:
        witness.load(path)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_an_array_stored_in_another_dtype_than_its_header_says_is_refused(tmp_path):
    network = witness.compile("composition", L=2, m=2, n=[2])
    arrays, head = npz_parts(network)
    arrays["embed.W_E"] = arrays["embed.W_E"].astype(np.int16)  # the same values, another dtype
    message = one_line_error(write_npz(tmp_path / "f.npz", arrays, head))
    assert "embed.W_E is stored as int16, the header says int8" in message
    path = tmp_path / "f.safetensors"
    path.write_bytes(safetensors.numpy.save(arrays, metadata={HEADER_KEY: json.dumps(head)}))
    assert "embed.W_E is stored as int16, the header says int8" in one_line_error(path)
    with pytest.raises(checker.Refused, match="embed.W_E is stored as int16"):
        checker.load_weights(path)


def test_a_header_dtype_witness_does_not_store_is_refused_before_reading(tmp_path):
    network = witness.compile("composition", L=2, m=2, n=[2])
    arrays, head = npz_parts(network)
    head["dtypes"]["embed.W_E"] = "int64"
    assert "header gives embed.W_E the dtype 'int64'" in one_line_error(write_npz(tmp_path / "f.npz", arrays, head))
    del head["dtypes"]["embed.W_E"]
    assert "dtypes do not name the arrays" in one_line_error(write_npz(tmp_path / "g.npz", arrays, head))


def float64_copy(network):
    copy = network.with_arrays({name: np.asarray(array, dtype=np.float64)
                                for name, array in network.state_dict().items()})
    assert all(array.dtype == np.float64 for array in copy.state_dict().values())
    return copy


def test_an_old_float64_file_without_dtypes_still_loads(tmp_path):
    """What witness wrote before it recorded dtypes: float64 arrays and a header without them."""
    network = witness.compile("composition", L=2, m=2, n=[2])
    arrays, head = npz_parts(float64_copy(network))
    del head["dtypes"]
    path = write_npz(tmp_path / "old.npz", arrays, head)
    loaded = witness.load(path)
    assert all(array.dtype == np.float64 for array in loaded.state_dict().values())
    tokens = network.task.random_tokens(seed=0, count=50)
    assert loaded.run(tokens) == list(network.task.answers(tokens))
    assert checker.load_weights(path).fingerprint() == weights_of(network).fingerprint()


# -- consumers -----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def narrow_and_wide():
    network = witness.compile("composition", L=2, m=3, n=[2])
    assert {array.dtype.name for array in network.state_dict().values()} == {"int8", "float16"}
    return network, float64_copy(network)


@pytest.mark.parametrize("fmt, semantics", [(None, None), ("fp64", "strict"), ("fp16", "strict"),
                                            ("fixed:4,4", "strict"), ("fp16", "theory"), ("bf16", "mixed")])
def test_the_executor_computes_the_same_logits(narrow_and_wide, fmt, semantics):
    narrow, wide = narrow_and_wide
    arith = FLOAT64 if fmt is None else arithmetic(fmt, semantics)
    tokens = narrow.task.random_tokens(seed=1, count=64)
    ours, theirs = run(narrow, tokens, arith, trace=True), run(wide, tokens, arith, trace=True)
    assert ours.logits.dtype == np.float64 and ours.logits.tobytes() == theirs.logits.tobytes()
    assert ours.trace.keys() == theirs.trace.keys()
    assert all(ours.trace[hook].tobytes() == theirs.trace[hook].tobytes() for hook in ours.trace)
    if fmt is None:
        assert list(ours.predictions[:, 0]) == list(narrow.task.answers(tokens))
        assert accuracy(narrow, tokens) == accuracy(wide, tokens) == 1.0


def test_the_mpfr_reference_computes_the_same_logits(narrow_and_wide):
    narrow, wide = narrow_and_wide
    fmt = arithmetic("fp16", "strict").format
    for tokens in narrow.task.random_tokens(seed=2, count=3):
        ours, theirs = reference.reference_run(narrow, tokens, fmt), reference.reference_run(wide, tokens, fmt)
        assert ours.logits.tobytes() == theirs.logits.tobytes()


def test_the_torch_module_computes_the_same_logits(narrow_and_wide):
    torch = pytest.importorskip("torch")
    import lab.torch as wt

    narrow, wide = narrow_and_wide
    tokens = torch.as_tensor(narrow.task.random_tokens(seed=3, count=16))
    for dtype in (torch.float64, torch.float32):
        ours = wt.to_module(narrow, dtype=dtype).read_logits(tokens)
        theirs = wt.to_module(wide, dtype=dtype).read_logits(tokens)
        assert ours.dtype == dtype and torch.equal(ours, theirs)
    lens_ours, lens_theirs = wt.transformer_lens_state(narrow), wt.transformer_lens_state(wide)
    assert all(lens_ours[name].dtype == np.float64 and np.array_equal(lens_ours[name], lens_theirs[name])
               for name in lens_ours)


def test_certify_and_the_checker_see_the_same_network(narrow_and_wide, tmp_path):
    narrow, wide = narrow_and_wide
    ours, theirs = (certify(network, arithmetic("fp16", "strict")) for network in (narrow, wide))
    assert ours.status is theirs.status is Status.VERIFIED
    assert ours.detail["certificate"] == theirs.detail["certificate"]  # the sha256 of the float64 values included
    narrow.save(tmp_path / "net.npz")
    (tmp_path / "cert.json").write_text(json.dumps(ours.detail["certificate"]))
    weights = checker.load_weights(tmp_path / "net.npz")
    assert all(array.dtype == np.float64 for array in weights.arrays.values())
    assert weights.fingerprint() == weights_of(wide).fingerprint()
    assert checker.check_files(tmp_path / "cert.json", tmp_path / "net.npz")["confirmed"]
