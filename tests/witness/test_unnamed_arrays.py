"""Arrays a weights file holds but its layer structure does not name are refused (issue 27), by the executor's
loader and by the checker: neither ever runs them, but a reader that runs every `blocks.{l}` it finds does, so
one accepted file would answer two ways (docs/certificates.md, "Files and layer options")."""

from __future__ import annotations

import json

import numpy as np
import pytest
import safetensors.numpy

import witness.io
from cli.main import main
from constructions import composition
from tests.oracles import reference_forward
from tests.verify.checker.forgery import file_parts, write_file
from verify import checker
from witness.errors import FileFormatError

REFUSAL = "arrays the layer structure does not use: blocks.2.attn.W_K, blocks.2.attn.W_O, blocks.2.attn.W_Q, "


def forged_parts(tmp_path):
    """The review's forgery: the genuine two-layer composition network (L = 1, m = 4), plus a third block that
    copies block 1 but whose MLP writes −2 times block 1's output, turning the answer's ±1 code into its
    complement; the header gives the third block's shapes and dtypes, its structure still lists two layers."""
    genuine = tmp_path / "genuine.npz"
    witness.io.save(composition.build(1, 4), genuine)
    arrays, head = file_parts(genuine)
    third = {name.replace("blocks.1.", "blocks.2."): np.array(array, dtype=np.float64)
             for name, array in arrays.items() if name.startswith("blocks.1.")}
    for name in ("blocks.2.mlp.W_out", "blocks.2.mlp.b_out"):
        third[name] *= -2.0
    return {**arrays, **third}, head


def write_forgery(tmp_path, suffix):
    arrays, head = forged_parts(tmp_path)
    path = tmp_path / f"forged{suffix}"
    if suffix == ".npz":
        write_file(path, arrays, head)
    else:
        head = {**head, "shapes": {name: list(a.shape) for name, a in arrays.items()},
                "dtypes": {name: a.dtype.name for name, a in arrays.items()}}
        path.write_bytes(safetensors.numpy.save(arrays, metadata={witness.io.HEADER_KEY: json.dumps(head)}))
    return path


def every_block_answers(arrays, tokens):
    """What a TransformerLens-style reader answers: it runs every `blocks.{l}` the arrays hold, each with the one
    attention direction of its config (causal here), and reads the last position."""
    found = reference_forward.n_layers(arrays)
    config = {"structure": {"layers": [{"causal": True}] * found, "read": "last"}}
    return np.array([reference_forward.forward_one(arrays, config, t)[0].argmax() for t in tokens])


def test_a_reader_that_runs_every_block_answers_the_forgery_wrong(tmp_path):
    """Why the refusal matters: before it, the forged file was `verified` (the executor and the proof ignore
    blocks.2) while a reader running every block answered all 1,024 inputs of the family wrong."""
    arrays, _ = forged_parts(tmp_path)
    arrays = {name: np.asarray(array, dtype=np.float64) for name, array in arrays.items()}
    genuine = {name: array for name, array in arrays.items() if not name.startswith("blocks.2.")}
    task = composition.build(1, 4).task
    tokens = np.concatenate(list(task.enumerate_tokens()))
    assert np.array_equal(every_block_answers(genuine, tokens), task.answers(tokens))
    assert (every_block_answers(arrays, tokens) != task.answers(tokens)).sum() == len(tokens) == 1024


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_the_executor_and_the_checker_refuse_the_forgery(tmp_path, suffix):
    path = write_forgery(tmp_path, suffix)
    with pytest.raises(FileFormatError, match=REFUSAL) as refused:
        witness.io.load(path)
    assert str(refused.value).startswith(f"{path}: ") and "and 8 more" in str(refused.value)
    with pytest.raises(checker.Refused, match=REFUSAL) as refused:
        checker.load_weights(path)
    assert "\n" not in str(refused.value)


def test_certify_refuses_the_forgery_in_one_line(tmp_path, capsys):
    path = write_forgery(tmp_path, ".npz")
    assert main(["certify", str(path), "--format", "fp16", "--semantics", "strict"]) == 2
    captured = capsys.readouterr()
    assert "verified" not in captured.out
    assert REFUSAL in captured.err and len(captured.err.strip().splitlines()) == 1


def test_an_mlp_on_a_layer_the_structure_gives_none_is_refused(tmp_path):
    """Layer 0's MLP arrays stay in the file while the structure says it has no MLP: the executor would run
    layer 0 without it, a reader that runs every MLP it finds with it."""
    path = tmp_path / "net.npz"
    witness.io.save(composition.build(1, 4), path)
    arrays, head = file_parts(path)
    head["structure"]["layers"][0]["mlp"] = False
    write_file(path, arrays, head)
    refusal = "does not use: blocks.0.mlp.W_in, blocks.0.mlp.W_out, blocks.0.mlp.b_in, blocks.0.mlp.b_out \\("
    with pytest.raises(FileFormatError, match=refusal):
        witness.io.load(path)
    with pytest.raises(checker.Refused, match=refusal):
        checker.load_weights(path)


def test_the_checker_leaves_the_attention_arrays_of_a_kind_it_does_not_prove_to_the_proof(tmp_path):
    """The checker knows the arrays of the kinds it proves (PROJECTED_KINDS) only; under a layer of another kind
    (here a RetNet layer: the hybrid's linear layer with a decay of 1) it takes any `blocks.{l}.attn.*`, since the
    proof refuses that kind by name. Arrays outside the layer's block are refused as for any other layer; the
    executor, which knows every kind's arrays, refuses both."""
    path = tmp_path / "net.npz"
    witness.io.save(witness.compile("composition_hybrid", L=1, m=4), path)
    arrays, head = file_parts(path)
    H, d_model, _ = arrays["blocks.0.attn.W_Q"].shape
    arrays.update({"blocks.0.attn.W_alpha": np.zeros((H, d_model, 1)), "blocks.0.attn.b_alpha": np.ones((H, 1))})
    head["structure"]["layers"][0] = {"mixer": "retnet", "mlp": True}
    write_file(path, arrays, head)
    witness.io.load(path)
    checker.load_weights(path)
    write_file(path, dict(arrays, **{"blocks.0.attn.W_gate": np.zeros(3)}), head)
    checker.load_weights(path)
    with pytest.raises(FileFormatError, match="does not use: blocks.0.attn.W_gate"):
        witness.io.load(path)
    write_file(path, dict(arrays, **{"blocks.5.attn.W_Q": np.zeros(3)}), head)
    with pytest.raises(FileFormatError, match="does not use: blocks.5.attn.W_Q"):
        witness.io.load(path)
    with pytest.raises(checker.Refused, match="does not use: blocks.5.attn.W_Q"):
        checker.load_weights(path)
