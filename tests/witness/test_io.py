"""Weights files: save -> load is bit for bit, and every malformed file is one clear FileFormatError."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

import witness
import witness.resources
from witness import FileFormatError
from lab import strategies as ws
from witness.io import HEADER_KEY, header


def assert_identical(a: witness.Network, b: witness.Network) -> None:
    state_a, state_b = a.state_dict(), b.state_dict()
    assert list(state_a) == list(state_b)
    for name in state_a:
        assert state_a[name].dtype == state_b[name].dtype
        assert state_a[name].shape == state_b[name].shape
        assert state_a[name].tobytes() == state_b[name].tobytes(), name  # bits, including the sign of zero
    assert a.basis == b.basis
    assert a.meta == b.meta
    assert a.structure() == b.structure()


def test_composition_round_trip(tmp_path):
    net = witness.compile("composition", L=3, m=4, n=[2, 4])
    net.save(tmp_path / "net.npz")
    loaded = witness.load(tmp_path / "net.npz")
    assert_identical(net, loaded)
    tokens = net.task.random_tokens(seed=0, count=20)
    assert loaded.run(tokens) == net.run(tokens)
    assert loaded.task == net.task


@settings(max_examples=40, deadline=None)
@given(ws.networks())
def test_random_network_round_trip(network_and_tokens):
    network, _ = network_and_tokens
    with tempfile.TemporaryDirectory() as folder:
        network.save(Path(folder) / "net.npz")
        assert_identical(network, witness.load(Path(folder) / "net.npz"))


def test_loads_str_paths_and_names_the_arrays_like_transformer_lens(tmp_path):
    net = witness.compile("composition", L=2, m=2, n=[2])
    path = str(tmp_path / "net.npz")
    net.save(path)
    with np.load(path, allow_pickle=False) as archive:
        names = set(archive.files)
    assert {"embed.W_E", "pos_embed.W_pos", "blocks.0.attn.W_Q", "blocks.2.attn.W_O", "blocks.1.mlp.W_in",
            "unembed.W_U", "unembed.b_U", HEADER_KEY} <= names
    assert_identical(net, witness.load(path))


# -- malformed files -----------------------------------------------------------------------------------------
def good_parts() -> tuple[dict[str, np.ndarray], dict]:
    net = witness.compile("composition", L=2, m=2, n=[2])
    return dict(net.state_dict()), header(net)


def write(path: Path, arrays: dict[str, np.ndarray], head: dict | None = None, raw_header: bytes | None = None,
          allow_pickle_arrays: bool = False) -> Path:
    entries = dict(arrays)
    if head is not None:
        raw_header = json.dumps(head).encode("utf-8")
    if raw_header is not None:
        entries[HEADER_KEY] = np.frombuffer(raw_header, dtype=np.uint8)
    np.savez(path, **entries)
    return path


def load_error(path) -> str:
    with pytest.raises(FileFormatError) as info:
        witness.load(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_truncated_file(tmp_path):
    arrays, head = good_parts()
    whole = write(tmp_path / "whole.npz", arrays, head).read_bytes()
    for keep in (0, 10, len(whole) // 2, len(whole) - 1):
        path = tmp_path / f"cut{keep}.npz"
        path.write_bytes(whole[:keep])
        message = load_error(path)
        assert "not a readable .npz weights file" in message or "not an .npz weights file" in message


def test_not_a_zip(tmp_path):
    (tmp_path / "text.npz").write_text("these are not weights\n")
    message = load_error(tmp_path / "text.npz")
    assert str(tmp_path / "text.npz") in message and "not a zip archive" in message
    assert "allow_pickle" not in message  # numpy's advice to load it with pickle is not ours to give


def test_missing_header(tmp_path):
    arrays, _ = good_parts()
    assert f"no {HEADER_KEY} entry" in load_error(write(tmp_path / "f.npz", arrays))


def test_header_not_json(tmp_path):
    arrays, _ = good_parts()
    assert "header is not valid JSON" in load_error(write(tmp_path / "f.npz", arrays, raw_header=b"{not json"))
    assert "header is not valid JSON" in load_error(write(tmp_path / "g.npz", arrays, raw_header=b"\xff\xfe"))


def test_header_of_another_kind(tmp_path):
    arrays, head = good_parts()
    assert "does not describe a witness-network" in load_error(write(tmp_path / "f.npz", arrays, [1, 2]))
    assert "does not describe" in load_error(write(tmp_path / "g.npz", arrays, head | {"kind": "other"}))


def test_wrong_version(tmp_path):
    arrays, head = good_parts()
    assert "file version 2, this witness reads 1" in load_error(write(tmp_path / "f.npz", arrays, head | {"version": 2}))


def test_shape_differs_from_header(tmp_path):
    arrays, head = good_parts()
    arrays["blocks.0.attn.W_Q"] = arrays["blocks.0.attn.W_Q"][:, :-1]
    assert "blocks.0.attn.W_Q has shape" in load_error(write(tmp_path / "f.npz", arrays, head))


def test_shapes_inconsistent_with_each_other(tmp_path):
    arrays, head = good_parts()
    arrays["blocks.1.mlp.W_out"] = arrays["blocks.1.mlp.W_out"][:-1]
    head["shapes"]["blocks.1.mlp.W_out"] = list(arrays["blocks.1.mlp.W_out"].shape)
    assert "inconsistent network" in load_error(write(tmp_path / "f.npz", arrays, head))


def test_missing_array(tmp_path):
    arrays, head = good_parts()
    del arrays["blocks.1.attn.b_K"]
    assert "missing ['blocks.1.attn.b_K']" in load_error(write(tmp_path / "f.npz", arrays, head))
    for entry in ("shapes", "dtypes"):  # consistent with the header, but the network needs it
        del head[entry]["blocks.1.attn.b_K"]
    assert "missing arrays: blocks.1.attn.b_K" in load_error(write(tmp_path / "g.npz", arrays, head))


def test_extra_array(tmp_path):
    arrays, head = good_parts()
    arrays["blocks.9.attn.W_Q"] = np.zeros((1, 2, 2))
    assert "extra ['blocks.9.attn.W_Q']" in load_error(write(tmp_path / "f.npz", arrays, head))


def test_non_numeric_and_non_finite_arrays(tmp_path):
    arrays, head = good_parts()
    strings = dict(arrays, **{"unembed.b_U": np.array(["a", "b", "c", "d"])})
    assert "non-numeric dtype" in load_error(write(tmp_path / "f.npz", strings, head))
    nan = dict(arrays, **{"unembed.b_U": np.full(4, np.nan)})
    assert "non-finite" in load_error(write(tmp_path / "g.npz", nan, head))


def test_bad_task_parameters_in_header(tmp_path):
    arrays, head = good_parts()
    head["params"] = {"L": 0, "m": 2, "n": [], "layout": "paper"}
    assert "L must be >= 1" in load_error(write(tmp_path / "f.npz", arrays, head))


def test_bad_basis_and_structure(tmp_path):
    arrays, head = good_parts()
    assert "basis has" in load_error(write(tmp_path / "f.npz", arrays, head | {"basis": ["one"]}))
    assert "structure must list" in load_error(write(tmp_path / "g.npz", arrays, head | {"structure": None}))
    structure = {**head["structure"], "layers": [1] + head["structure"]["layers"][1:]}
    refusal = load_error(write(tmp_path / "h.npz", arrays, head | {"structure": structure}))
    assert "gives the layer 1, not an object" in refusal


class _Tripwire:
    """Unpickling this creates a marker file: proof that a loader executed pickled code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_pickled_object_array_is_not_unpickled(tmp_path):
    arrays, head = good_parts()
    marker = tmp_path / "unpickled"
    arrays["unembed.b_U"] = np.array([_Tripwire(marker)] * 4, dtype=object)
    path = write(tmp_path / "f.npz", arrays, head)
    assert "not a readable .npz weights file" in load_error(path)
    assert not marker.exists()


def test_missing_path_and_directory(tmp_path):
    assert "no such file" in load_error(tmp_path / "absent.npz")
    assert "is a folder" in load_error(tmp_path)


def test_a_raw_zip_member_as_header_and_a_huge_header_are_refused(tmp_path):
    import zipfile

    path = tmp_path / "raw.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(HEADER_KEY + ".npy", b"not a numpy array")
    assert "not a readable .npz weights file" in load_error(path) or "header" in load_error(path)
    arrays, head = good_parts()
    head = {**head, "shapes": {**head["shapes"], "embed.W_E": [10**12, 10**3]}}
    with pytest.raises(witness.resources.TooLarge, match="needs about .* TiB"):  # refused before reading arrays
        witness.load(write(tmp_path / "huge.npz", arrays, head))


def test_unreadable_file(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root reads files regardless of permissions")
    arrays, head = good_parts()
    path = write(tmp_path / "f.npz", arrays, head)
    path.chmod(0)
    assert "not a readable .npz" in load_error(path)
