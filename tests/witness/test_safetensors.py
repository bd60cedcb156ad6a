"""`.safetensors` as a second weights format: same arrays, same JSON header, same validation as `.npz`."""

import json

import numpy as np
import pytest
import safetensors
import safetensors.numpy
from hypothesis import HealthCheck, given, settings

import witness
from lab import strategies as ws
from witness.errors import FileFormatError
from witness.io import HEADER_KEY, header


def assert_same_network(a, b):
    state_a, state_b = a.state_dict(), b.state_dict()
    assert state_a.keys() == state_b.keys()
    for name in state_a:
        assert np.array_equal(state_a[name], state_b[name]), name
    assert a.structure() == b.structure() and a.basis == b.basis and a.meta == b.meta


def test_compiled_network_round_trips_and_still_answers(tmp_path):
    network = witness.compile("composition", L=2, m=2, n=[2])
    path = tmp_path / "net.safetensors"
    network.save(path)
    back = witness.load(path)
    assert_same_network(network, back)
    tokens = network.task.random_tokens(0, 50)
    assert back.run(tokens) == list(network.task.answers(tokens))


def test_file_is_plain_safetensors_with_the_npz_header(tmp_path):
    """Any safetensors reader sees TransformerLens-named arrays, in the dtypes the header states, and our header in
    the metadata."""
    network = witness.compile("composition", L=1, m=3)
    network.save(tmp_path / "net.safetensors")
    network.save(tmp_path / "net.npz")
    with safetensors.safe_open(tmp_path / "net.safetensors", framework="numpy") as handle:
        metadata = handle.metadata()
        names = set(handle.keys())
        W_Q = handle.get_tensor("blocks.0.attn.W_Q")
    assert json.loads(metadata[HEADER_KEY]) == json.loads(json.dumps(header(network)))
    with np.load(tmp_path / "net.npz", allow_pickle=False) as archive:
        assert json.loads(archive[HEADER_KEY].tobytes()) == json.loads(metadata[HEADER_KEY])
        assert names == set(archive.files) - {HEADER_KEY}
    assert W_Q.dtype.name == json.loads(metadata[HEADER_KEY])["dtypes"]["blocks.0.attn.W_Q"] == "int8"
    assert np.array_equal(W_Q, network.layers[0].mixer.W_Q)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ws.networks())
def test_random_networks_round_trip(tmp_path, net_and_tokens):
    network, tokens = net_and_tokens
    rng = np.random.default_rng(len(tokens))
    network = network.with_arrays({k: rng.normal(size=v.shape) for k, v in network.state_dict().items()})
    network.save(tmp_path / "r.safetensors")
    back = witness.load(tmp_path / "r.safetensors")
    assert_same_network(network, back)
    assert np.array_equal(np.asarray(back.run(tokens)), np.asarray(network.run(tokens)))


def write(path, arrays, head):
    metadata = None if head is None else {HEADER_KEY: head}
    path.write_bytes(safetensors.numpy.save(arrays, metadata=metadata))


@pytest.mark.parametrize("damage, message", [
    ("truncate", "not a readable .safetensors"),
    ("garbage", "not a readable .safetensors"),
    ("no header", "no __witness_header__ metadata"),
    ("bad json", "header is not valid JSON"),
    ("missing array", "arrays do not match the header"),
    ("wrong shape", "has shape"),
])
def test_damaged_files_are_one_clear_error(tmp_path, damage, message):
    network = witness.compile("composition", L=1, m=3)
    path = tmp_path / "bad.safetensors"
    network.save(path)
    arrays = dict(network.state_dict())
    head = json.dumps(header(network))
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-7])
    elif damage == "garbage":
        path.write_bytes(b"not a safetensors file")
    elif damage == "no header":
        write(path, arrays, None)
    elif damage == "bad json":
        write(path, arrays, head[:-1])
    elif damage == "missing array":
        arrays.pop("unembed.b_U")
        write(path, arrays, head)
    elif damage == "wrong shape":
        arrays["unembed.b_U"] = np.zeros(7)
        write(path, arrays, head)
    with pytest.raises(FileFormatError, match=message):
        witness.load(path)


def test_cli_reads_safetensors(tmp_path, capsys):
    from cli.main import main

    path = tmp_path / "net.safetensors"
    assert main(["compile", "composition", "--L", "1", "--m", "3", "-o", str(path)]) == 0
    assert main(["run", str(path), "--random", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["correct"] == out["total"] == 20
