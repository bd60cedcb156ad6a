"""Proofs over network files: layer options, MLP steps, linear states and 2-Sum layers the executor would read
differently from the proof are refused, and so is a file the executor would not load."""

from __future__ import annotations

import io
import json
import zipfile
from fractions import Fraction

import numpy as np
import pytest
import witness
import witness.io
import witness.execute
from verify import checker
from verify.checker.numbers import parse_format
from witness.arith import arithmetic

from tests.verify.checker.forgery import (
    file_parts,
    reproved,
    write_file,
)


@pytest.mark.parametrize("option, value", [("feature_map", "Relu"), ("normalize", 0), ("normalize", True)])
def test_linear_layer_options_the_executor_would_not_read_as_the_proof_does_are_refused(tmp_path, option, value):
    """A feature map spelled "Relu" was proved as the identity and `normalize: 0` as no normaliser; the executor
    refuses such files, so no wrong answer followed, but the checker must not confirm a network nobody can run."""
    path = tmp_path / "hybrid.npz"
    witness.io.save(witness.compile("composition_hybrid", L=1, m=3), path)
    claim = composition_claim(3, "strict")
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    linear = next(layer for layer in head["structure"]["layers"] if layer["mixer"] == "linear")
    linear[option] = value
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="feature_map identity or relu and no normaliser"):
        reproved(path, claim)


def test_a_2sum_layer_without_its_causal_flag_is_not_read_as_bidirectional(tmp_path):
    """The executor runs a layer whose header omits `causal` as causal (the option's default); the checker read the
    absence as false. A genuine bidirectional 2-Sum file with only that entry deleted, re-hashed and re-proved, was
    confirmed, and the executor answers it wrong."""
    path = tmp_path / "two_sum.npz"
    witness.io.save(witness.compile("two_sum", n=6, M=4, t=1, causal=False), path)
    claim = {"task": "two_sum", "params": {"n": 6, "M": 4, "t": 1, "causal": False}, "format": "fp32",
             "semantics": "strict"}
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    del head["structure"]["layers"][0]["causal"]
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="causal flag"):
        reproved(path, claim)
    task = witness.TwoSum(n=6, M=4, t=1, causal=False)
    tokens = np.concatenate(list(task.enumerate_tokens()))
    predictions = witness.execute.run(witness.io.load(path), tokens, arithmetic("fp32", "strict")).predictions
    assert (predictions != task.answers(tokens)).any(axis=1).sum() > 1000  # the file really runs causal


@pytest.mark.parametrize("option", ["block", "k"])
def test_a_block_sparse_span_the_executor_refuses_to_load_is_refused(tmp_path, option):
    """A fifth review: a genuine (2,1)-sparse file with block or k raised to 2^25 in its header (the executor loads
    spans up to 2^24 only) was confirmed. No wrong answer followed, as nothing runs it; the checker now requires
    the executor's limits."""
    path = tmp_path / "sparse.npz"
    witness.io.save(witness.compile("two_sum_sparse", n=8, M=4, t=0, block=2, k=1), path)
    claim = {"task": "two_sum", "params": {"n": 8, "M": 4, "t": 0, "causal": False}, "format": "fp32",
             "semantics": "strict"}
    assert reproved(path, claim)
    arrays, head = file_parts(path)
    head["structure"]["layers"][0][option] = 2 ** 25
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match=r"must be integers in \[1, 2\^24\]"):
        reproved(path, claim)
    with pytest.raises(witness.FileFormatError, match=option):
        witness.io.load(path)


def with_unread_direction(tmp_path, m, layer, units, head_writes=0.0, bias=0.0):
    """composition L = 1, m, stored with one more residual direction, "junk", that nothing reads, written by
    `units` added to blocks.{layer}.mlp: (reads {direction: weight}, hidden bias, output weight), by the head column
    that writes fetch[0] times `head_writes`, and by the MLP's output bias `bias`. Only the range check sees it."""
    path = tmp_path / "composition.npz"
    arrays, head, basis = with_new_directions(path, witness.compile("composition", L=1, m=m), ["junk"])
    junk, W_O = len(basis) - 1, arrays["blocks.0.attn.W_O"]
    W_O[0, np.flatnonzero(W_O[0, :, basis.index("fetch[0]")])[0], junk] = head_writes
    mlp = f"blocks.{layer}.mlp."
    arrays[mlp + "b_out"][junk] = bias
    units_in, units_out = np.zeros((len(basis), len(units))), np.zeros((len(units), len(basis)))
    for h, (reads, _, weight) in enumerate(units):
        for direction, coefficient in reads.items():
            units_in[basis.index(direction), h] = coefficient
        units_out[h, junk] = weight
    arrays[mlp + "W_in"] = np.concatenate([arrays[mlp + "W_in"], units_in], axis=1)
    arrays[mlp + "b_in"] = np.concatenate([arrays[mlp + "b_in"], [b for _, b, _ in units]])
    arrays[mlp + "W_out"] = np.concatenate([arrays[mlp + "W_out"], units_out])
    write_file(path, arrays, {**head, "basis": basis})
    return path


#: The axis of each array that runs over residual directions.
RESIDUAL_AXIS = {"W_E": 1, "W_pos": 1, "W_O": 2, "W_out": 1, "W_Q": 1, "W_K": 1, "W_V": 1, "b_O": 0, "b_out": 0,
                 "W_in": 0, "W_U": 0}


def with_new_directions(path, network, labels):
    """`network` saved at `path`, then read back as a forger edits it: float64 arrays with residual directions
    `labels` appended, zero everywhere, and the basis that names them."""
    witness.io.save(network, path)
    arrays, head = file_parts(path)
    for name, a in arrays.items():
        axis = RESIDUAL_AXIS.get(name.rsplit(".", 1)[-1])
        arrays[name] = a.astype(np.float64)
        if axis is not None:
            arrays[name] = np.pad(arrays[name], [(0, len(labels) if i == axis else 0) for i in range(a.ndim)])
    return arrays, head, head["basis"] + list(labels)


def wrong_answers(path, m, semantics, fmt="fp16"):
    task = witness.Composition(L=1, m=m)
    tokens = np.concatenate(list(task.enumerate_tokens()))
    with np.errstate(all="ignore"):  # the forged runs overflow float64 on purpose
        predictions = witness.execute.run(witness.io.load(path), tokens, arithmetic(fmt, semantics)).predictions
    return int((predictions[:, 0] != task.answers(tokens)).sum())


def composition_claim(m, semantics, fmt="fp16"):
    return {"task": "composition", "params": {"L": 1, "m": m, "n": [], "layout": "paper"}, "format": fmt,
            "semantics": semantics}


@pytest.mark.parametrize("w_in, w_out, step", [(2.0, [65504.0, -65504.0], "a product"),
                                               (1.0, [30000.0] * 3 + [-30000.0] * 3, "a partial sum")])
def test_an_mlp_output_whose_steps_overflow_is_refused_however_small_its_sum(tmp_path, w_in, w_out, step):
    """Hidden units relu(w_in fetch[0]) times w_out: their exact sum is 0, so the one-input range bound (exact
    extremes plus relative rounding errors) was a few hundred, but under strict fp16 a product (first case) or a
    partial sum (second) overflows, inf - inf is NaN, and zero query weights carry the NaN into the next layer (the
    first case was found by an adversarial review; the checker confirmed it)."""
    path = with_unread_direction(tmp_path, 3, 0, [({"fetch[0]": w_in}, 0.0, w) for w in w_out])
    with pytest.raises(checker.Refused, match=f"blocks.0.mlp output .*: {step} .* may overflow fp16"):
        reproved(path, composition_claim(3, "strict"))
    assert wrong_answers(path, 3, "strict") > 20  # the NaN reaches the answer


def test_a_twin_pair_is_not_moved_ahead_of_the_terms_between_them_under_strict(tmp_path):
    """relu(z) and relu(-z) are never both positive, so a bound on an exact sum may count the pair once; but the
    strict fold counted it at the first twin's place, where 66 small terms after it are absorbed, while the
    executor adds them first and the second twin's 32304 last: 924 + 64608 overflows (an adversarial review's
    forgery, confirmed, wrong on 5 of 1024 inputs). Under strict every unit now counts in its own place."""
    pair = {"fetch[0]": 1.0, "fetch[1]": 1.0}
    units = [(pair, 0.0, 32304.0)] + [({}, 14.0, 1.0)] * 66 + [({k: -v for k, v in pair.items()}, 0.0, 32304.0)]
    path = with_unread_direction(tmp_path, 4, 1, units)
    with pytest.raises(checker.Refused, match="overflows fp16"):
        reproved(path, composition_claim(4, "strict"))
    assert wrong_answers(path, 4, "strict") > 0


@pytest.mark.parametrize("semantics", ["strict", "theory"])
def test_an_mlp_output_that_is_its_own_input_is_bounded_before_the_residual_add(tmp_path, semantics):
    """The head writes junk = 32768 fetch[0] (-32768 at position 0), and one unit relu(-junk) times 1.03125 plus the
    bias 32000 writes it back: the residual y + out stays below 65504, but the stored MLP output 33792 + 32000 is
    inf (an adversarial review's forgery, confirmed under both semantics, wrong on 512 of 1024 inputs; every value
    is an integer, so the exact model fails too)."""
    path = with_unread_direction(tmp_path, 4, 0, [({"junk": -1.0}, 0.0, 1.03125)], head_writes=32768.0,
                                 bias=32000.0)
    with pytest.raises(checker.Refused, match="the MLP output .* may overflow fp16"):
        reproved(path, composition_claim(4, semantics))
    assert wrong_answers(path, 4, semantics) > 100


def test_an_mlp_sum_that_float64_rounds_is_refused_under_theory(tmp_path):
    """A fourth review's forgery: bias-only units write junk = 8 8 + 2^-24 2^-24 - 8 8 + 1 + 2^-11, exactly
    1 + 2^-11 + 2^-48, which fp16 stores as 1 + 2^-10; float64 loses the 2^-48 and stores the tie 1 + 2^-11 as 1. The
    readout adds 8200 - 8192 junk to answer 0: nothing in the exact model, +8 in the executor's theory run. The
    exact-model proof was confirmed; every MLP sum must now be exact in float64."""
    units = [({}, 8.0, 8.0), ({}, 2.0 ** -24, 2.0 ** -24), ({}, 8.0, -8.0), ({}, 1.0, 1.0), ({}, 2.0 ** -11, 1.0)]
    path = with_unread_direction(tmp_path, 4, 0, units)
    arrays, head = file_parts(path)
    arrays["unembed.W_U"][head["basis"].index("junk"), 0] = -8192.0
    arrays["unembed.b_U"] = arrays["unembed.b_U"] + np.eye(1, arrays["unembed.b_U"].size)[0] * 8200.0
    write_file(path, arrays, head)
    with pytest.raises(checker.Refused, match="blocks.0.mlp: a sum inside the MLP is not exact in float64"):
        reproved(path, composition_claim(4, "theory"))
    assert wrong_answers(path, 4, "theory") > 500  # of 1024


def _query_reads_value_tokens(tmp_path):
    """Value tokens hold junk = 2^600 and layer 0's query reads it with weight 2^600: finite at the read position
    (a query token), 2^1200 = inf at every other one, where NaN then reaches layer 1's keys."""
    path = with_unread_direction(tmp_path, 4, 0, [])
    arrays, head = file_parts(path)
    junk = head["basis"].index("junk")
    task = witness.Composition(L=1, m=4)
    last = np.unique(np.concatenate(list(task.enumerate_tokens()))[:, -1])
    others = np.setdiff1d(np.arange(arrays["embed.W_E"].shape[0]), last)
    arrays["embed.W_E"][others, junk] = 2.0 ** 600
    arrays["blocks.0.attn.W_Q"][0, junk, 0] = 2.0 ** 600
    write_file(path, arrays, head)
    return path


@pytest.mark.parametrize("forge, refusal", [
    (lambda tmp: with_unread_direction(tmp, 4, 0, [({"junk": 2.0 ** 600}, 0.0, 0.0)], head_writes=2.0 ** 600),
     "blocks.0.mlp hidden units may overflow float64"),
    (_query_reads_value_tokens, "blocks.0.attn queries may overflow float64")])
def test_a_value_the_exact_model_holds_but_float64_overflows_is_refused_under_theory(tmp_path, forge, refusal):
    """fp64 theory, where the exact model holds 2^1200 inside a block but the executor's float64 stand-in gets inf,
    and inf times a zero weight is NaN in every direction: an MLP unit with no output weight (a fourth review's
    forgery, confirmed, wrong on 832 of 1024 inputs) and a query at the positions the proof does not follow (wrong
    on all 1024). Both were confirmed; every bound inside a block must now stay below 2^1020. The executor's theory
    run no longer answers either: its stand-in step that leaves the finite numbers raises StandInOverflow."""
    path = forge(tmp_path)
    with pytest.raises(checker.Refused, match=refusal):
        reproved(path, composition_claim(4, "theory", "fp64"))
    with pytest.raises(witness.StandInOverflow, match="float64 stand-in"):
        wrong_answers(path, 4, "theory", "fp64")


def _flat_mix_just_below_fp32_overflow(tmp_path, N=1007):
    """composition L = 2, m = 1, n = [N] with layer 0 rewritten (a fifth review's forgery): the seed position attends
    flat over the N entries of z_2, whose value coordinate is V = 2 - 2^-24 - 3 2^-48 for every token >= 1, and
    W_O = 2^127 writes it to a direction "dstar" that nothing reads. The exact head V 2^127 lies below fp32's
    overflow midpoint (2 - 2^-24) 2^127; the executor's float64 mix of N equal values exceeds V by about 60 2^-53,
    so the stored head is inf there, and inf times the next layer's zero key weights is NaN."""
    path = tmp_path / "flat.npz"
    new = ["big1", "big2", "pstar", "dstar"]
    arrays, head, basis = with_new_directions(path, witness.compile("composition", L=2, m=1, n=[N]), new)
    big1, big2, pstar, dstar = (basis.index(label) for label in new)
    n = N + 3
    arrays["embed.W_E"][1:N, big1] = 1.0
    arrays["embed.W_E"][1:N, big2] = 2.0 ** -24
    arrays["pos_embed.W_pos"][n - 2, pstar] = 1.0
    p, m = "blocks.0.attn", "blocks.0.mlp"
    arrays[f"{p}.W_V"][:] = 0.0
    arrays[f"{p}.W_V"][0, big1, 0] = 2 - 2.0 ** -23
    arrays[f"{p}.W_V"][0, big2, 0] = 1 - 3 * 2.0 ** -24
    arrays[f"{p}.W_O"][:] = 0.0
    arrays[f"{p}.W_O"][0, 0, dstar] = 2.0 ** 127
    arrays[f"{p}.W_Q"][0, pstar, 1] = 60.0
    arrays[f"{p}.W_K"][0, basis.index("type:z2"), 1] = 1.0
    arrays[f"{m}.W_in"][:] = 0.0
    arrays[f"{m}.W_out"][:] = 0.0
    for label in basis:
        if label.startswith("R0["):
            arrays[f"{m}.b_out"][basis.index(label)] = -1.0  # the code of i_0 = 0, the only seed (m = 1)
    write_file(path, arrays, dict(head, basis=basis))
    return path


def test_a_theory_mix_is_bounded_with_float64_error_at_every_position(tmp_path):
    """The range check bounded a theory mix by its largest value, true of the exact model only: the forgery above
    was confirmed at fp32 theory, and `witness run --semantics theory` answers 16 of 20 random inputs wrongly. The
    mix bound is now widened by float64's softmax error, as the read position's head already was."""
    path = _flat_mix_just_below_fp32_overflow(tmp_path)
    claim = {"task": "composition", "params": {"L": 2, "m": 1, "n": [1007], "layout": "paper"}, "format": "fp32",
             "semantics": "theory"}
    with pytest.raises(checker.Refused, match="head output.*overflow"):
        reproved(path, claim)
    tokens = np.array([1] * 1007 + [0, 0, 1007])
    with np.errstate(all="ignore"):
        outputs = witness.execute.run(witness.io.load(path), tokens, arithmetic("fp32", "theory"), trace=True)
    assert not np.isfinite(outputs.trace["blocks.0.attn.hook_result"]).all()
    assert outputs.predictions[0, 0] != witness.Composition(L=2, m=1, n=(1007,)).answers(tokens[None])[0]


def test_a_linear_state_product_that_float64_rounds_is_refused_under_theory(tmp_path):
    """A fifth review's forgery of composition_hybrid (L = 1, m = 2): at z0 the linear layer's key is
    k = 1 + 2^-11 - 2^-43 and the value v = val (1 + 2^-43), each exact in float64, but fl64(k v) = 1 + 2^-11 is an
    fp16 tie (stored as 1) while the exact product lies above it (stored as 1 + 2^-10). An extra MLP unit
    relu(fetch[0] - 1) (-2048) writes R0[0] only in the exact model. The proof took the state entry as the float64
    product and was confirmed; a theory state product must now be exact in float64."""
    path = tmp_path / "hybrid.npz"
    arrays, head, basis = with_new_directions(path, witness.compile("composition_hybrid", L=1, m=2),
                                              ["fx_a", "fx_b", "fx_e"])
    a, b, e = len(basis) - 3, len(basis) - 2, len(basis) - 1
    z0, val0, fetch0, r0 = 2, basis.index("val[0]"), basis.index("fetch[0]"), basis.index("R0[0]")
    arrays["pos_embed.W_pos"][z0, a] = 1.0
    arrays["pos_embed.W_pos"][z0, b] = 2.0 ** -20
    arrays["blocks.0.attn.W_K"][0, a, 0] = 2.0 ** -11
    arrays["blocks.0.attn.W_K"][0, b, 0] = -(2.0 ** -23)
    arrays["embed.W_E"][:, e] = arrays["embed.W_E"][:, val0] * 2.0 ** -20
    coordinate = int(np.flatnonzero(arrays["blocks.0.attn.W_V"][0, val0])[0])
    arrays["blocks.0.attn.W_V"][0, e, coordinate] = 2.0 ** -23
    unit = np.zeros((len(basis), 1))
    unit[fetch0] = 1.0
    arrays["blocks.0.mlp.W_in"] = np.concatenate([arrays["blocks.0.mlp.W_in"], unit], axis=1)
    arrays["blocks.0.mlp.b_in"] = np.append(arrays["blocks.0.mlp.b_in"], -1.0)
    arrays["blocks.0.mlp.W_out"] = np.concatenate([arrays["blocks.0.mlp.W_out"], -2048.0 * np.eye(1, len(basis), r0)])
    write_file(path, arrays, dict(head, basis=basis))
    with pytest.raises(checker.Refused, match="state"):
        reproved(path, composition_claim(2, "theory"))
    k, v = 1 + Fraction(1, 2 ** 11) - Fraction(1, 2 ** 43), 1 + Fraction(1, 2 ** 43)
    fp16 = parse_format("fp16")
    assert fp16.round(Fraction(float(k) * float(v))) == 1 and fp16.round(k * v) == 1 + Fraction(1, 2 ** 10)


def test_the_checker_reads_the_file_format_the_executor_writes():
    """The checker restates the file format (it imports nothing of witness); the two statements must agree."""
    from verify.checker import files
    assert (files.NETWORK_KIND, files.NETWORK_VERSION) == (witness.io.FILE_KIND, witness.io.FILE_VERSION)
    assert files.STORED_DTYPES == witness.io.STORAGE_DTYPE_NAMES
    assert files.HEADER_KEY == witness.io.HEADER_KEY


def _header_edit(key, value):
    return lambda arrays, head: head.update({key: value})


def _array_edit(name, change):
    return lambda arrays, head: arrays.update({name: change(arrays[name])})


def _basis_repeated(arrays, head):
    head["basis"] = [head["basis"][0]] * len(head["basis"])


@pytest.mark.parametrize("edit, refusal", [
    (_header_edit("kind", "not-a-network"), "kind"),
    (_header_edit("version", 99), "file version 99"),
    (_array_edit("embed.W_E", lambda a: a.astype(np.int64)), "stored as int64"),
    (_array_edit("blocks.0.attn.b_Q", lambda a: a[0]), "blocks.0.attn.b_Q has shape"),
    (_array_edit("blocks.0.attn.W_O", lambda a: np.concatenate([a, a])), "blocks.0.attn.W_O has shape"),
    (_array_edit("blocks.0.attn.W_V", lambda a: np.concatenate([a, a[..., :1]], axis=2)), "d_v"),
    (_array_edit("unembed.b_U", lambda a: a[:1]), "unembed.b_U has shape"),
    (_basis_repeated, "repeats a label"),
])
def test_a_file_the_executor_would_not_load_is_refused_by_name(tmp_path, edit, refusal):
    """Each edit, re-stamped with the checker's own fingerprint, was confirmed before (its proof reads arrays by
    name alone, e.g. a 1-D b_Q as one scalar for every coordinate); the executor refuses every one of them."""
    path = tmp_path / "net.npz"
    witness.io.save(witness.compile("composition", L=1, m=3), path)
    arrays, head = file_parts(path)
    edit(arrays, head)
    write_file(path, arrays, head)
    with pytest.raises(witness.errors.FileFormatError):
        witness.io.load(path)
    with pytest.raises(checker.Refused, match=refusal):
        reproved(path, composition_claim(3, "strict"))


def _npy_named_npz(path, arrays, head):
    np.save(path.with_suffix(".npy"), arrays["embed.W_E"])
    path.with_suffix(".npy").rename(path)


def _header_as_raw_bytes(path, arrays, head):
    np.savez(path, **arrays)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(witness.io.HEADER_KEY, json.dumps(head))


def _replace_member(path, name, data):
    with zipfile.ZipFile(path) as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    members[name] = data
    with zipfile.ZipFile(path, "w") as archive:
        for member, content in members.items():
            archive.writestr(member, content)


def _array_as_raw_bytes(path, arrays, head):
    write_file(path, arrays, head)
    _replace_member(path, "unembed.b_U.npy", b"not an .npy member")


def _bfloat16_safetensors(path, arrays, head):
    raw = np.zeros(3, np.uint16).tobytes()
    meta = json.dumps({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, len(raw)]},
                       "__metadata__": {witness.io.HEADER_KEY: json.dumps(head)}}).encode()
    path.write_bytes(len(meta).to_bytes(8, "little") + meta + raw)


def _deep_header(path, arrays, head):
    write_file(path, arrays, head)
    deep = json.dumps({**head, "notes": None}).replace("null", "[" * 100_000 + "]" * 100_000).encode()
    _replace_member(path, witness.io.HEADER_KEY + ".npy", _npy_bytes(np.frombuffer(deep, np.uint8)))


def _npy_bytes(array):
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("forge, suffix, refusal", [
    (_npy_named_npz, ".npz", "not a zip archive"), (_header_as_raw_bytes, ".npz", "uint8 array"),
    (_array_as_raw_bytes, ".npz", "unembed.b_U is not an array"),
    (_bfloat16_safetensors, ".safetensors", "dtype numpy cannot read"),
    (_deep_header, ".npz", "not a readable weights file"),
])
def test_an_unreadable_weights_file_is_one_refusal_not_a_traceback(tmp_path, forge, suffix, refusal):
    """Each of these stopped the checker with an AttributeError, TypeError or RecursionError (the executor's loader
    too, but for the first two)."""
    source = tmp_path / "source.npz"
    witness.io.save(witness.compile("composition", L=1, m=3), source)
    arrays, head = file_parts(source)
    path = tmp_path / f"forged{suffix}"
    forge(path, arrays, head)
    with pytest.raises(checker.Refused, match=refusal) as refused:
        checker.load_weights(path)
    assert "\n" not in str(refused.value)
    with pytest.raises(witness.errors.FileFormatError):
        witness.io.load(path)
