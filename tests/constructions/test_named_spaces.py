"""The named spaces the constructions are written in (constructions/residual.py) and the constants they derive.

A space must refuse any label it would hand out twice, weights must land exactly at the named directions, and every
construction's basis must be its space's labels; the linked constants must satisfy the inequalities their
docstrings claim, at every size (including prompts far beyond the floats).
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

import witness
from constructions import composition, composition_forward, composition_hybrid, two_sum, two_sum_sparse
from constructions.residual import CODE_GAP, Group, Head, Route, Score, Space, fill, pm1_codes, run, write


@pytest.fixture
def residual():
    return Space.of("one", ("val", 3), ("key", 3), ("out", 2), "flag")


# -- spaces ------------------------------------------------------------------------------------------------------

def test_labels_are_laid_out_in_declaration_order(residual):
    assert residual.basis().labels == ("one", "val[0]", "val[1]", "val[2]", "key[0]", "key[1]", "key[2]",
                                       "out[0]", "out[1]", "flag")
    assert residual.width == len(residual.basis()) == 10
    assert residual["val"].indices.tolist() == [1, 2, 3] and residual["flag"].index == 9
    assert residual.spans() == {"one": (0, 1), "val": (1, 3), "key": (4, 3), "out": (7, 2), "flag": (9, 1)}


def test_extending_keeps_every_index(residual):
    wider = residual.extend(("extra", 4), "last")
    assert wider.basis().labels[:residual.width] == residual.basis().labels
    assert all(wider[g.name] == g for g in residual.groups)
    assert wider["extra"].indices.tolist() == [10, 11, 12, 13] and wider.width == 15


def test_width_zero_groups_take_no_directions():
    space = Space.of(("empty", 0), "one", ("also_empty", 0))
    assert space.width == 1 and space.basis().labels == ("one",)
    assert space["also_empty"].start == 1 and space["empty"].indices.size == 0


@pytest.mark.parametrize("entries", [
    (("val", 2), ("val", 3)),          # a group twice
    ("one", "one"),                    # a scalar twice
    ("one", ("one", 1)),               # a scalar and a group of one name
    (("a", 2), "a[1]"),                # a scalar repeating a group's label
    ("a[0]", ("a", 1)),                # ... in either order
])
def test_a_label_allocated_twice_is_refused(entries):
    with pytest.raises(ValueError, match="allocated twice"):
        Space.of(*entries)


def test_a_lookalike_label_beyond_the_group_is_distinct():
    space = Space.of(("a", 2), "a[2]")  # a[0], a[1], a[2]: no label repeats
    assert len(set(space.basis().labels)) == space.width == 3


@pytest.mark.parametrize("entry", [("x", -1), ("x", 1.5), ("x", True), ("", 2), "", 5, ("x",), ("x", 1, 2), [("x", 1)]])
def test_malformed_entries_are_refused(entry):
    with pytest.raises(ValueError):
        Space.of(entry)


def test_a_space_must_be_contiguous():
    with pytest.raises(ValueError, match="does not continue the space"):
        Space((Group("a", 1, 2),))
    with pytest.raises(ValueError, match="does not continue the space"):
        Space((Group("a", 0, 2), Group("b", 3, 1)))


def test_spaces_and_groups_are_frozen(residual):
    with pytest.raises(dataclasses.FrozenInstanceError):
        residual.groups = ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        residual["val"].start = 0
    with pytest.raises(KeyError, match="no group named 'nope'"):
        residual["nope"]


def test_parts_of_a_group(residual):
    val = residual["val"]
    assert val.prefix(2).indices.tolist() == [1, 2] and val.prefix(2).labels == ("val[0]", "val[1]")
    assert val.at(2).index == 3 and val.at(2).labels == ("val[2]",)
    for bad in (lambda: val.prefix(4), lambda: val.at(3), lambda: val.at(-1), lambda: residual["one"].at(0),
                lambda: val.index, lambda: Group("s", 0, 2, scalar=True)):
        with pytest.raises(ValueError):
            bad()


def test_ownership_follows_names_and_places(residual):
    val = residual["val"]
    assert residual.owns(val) and residual.owns(val.prefix(2)) and residual.owns(val.at(1))
    assert not residual.owns(Group("val", 2, 2))  # right name, wrong place
    assert not residual.owns(Group("key", 1, 3))  # val's place under another name
    assert not residual.owns(Group("val[1]", 3, 1, scalar=True))  # a label at another direction's index
    assert not residual.owns(Group("val", 1, 4))  # wider than the group


# -- weights between named groups --------------------------------------------------------------------------------

def test_runs_write_diagonals_between_groups(residual):
    hidden = Space.of(("h", 3))
    matrix = write(np.zeros((residual.width, hidden.width)), [run(residual["val"], hidden["h"], -2)])
    assert np.array_equal(matrix[residual["val"].indices][:, hidden["h"].indices], -2 * np.eye(3))
    assert np.count_nonzero(matrix) == 3
    vector = write(np.zeros(residual.width), [fill(residual["out"], 0.5)])
    assert vector.tolist() == [0.0] * 7 + [0.5, 0.5, 0.0]
    assert run(residual["val"], hidden["h"], 1) == (1, 0, 3, 1.0)  # plain ints and a float: the JSON form
    with pytest.raises(ValueError, match="differ in width"):
        run(residual["val"], residual["out"], 1.0)


def test_a_score_is_a_bilinear_form_over_the_named_directions(residual):
    head = Head(qk=Space.of("bias", ("match", 3)), ov=Space.of(("code", 2)))
    arrays = head.dense(residual, [Score(residual["val"], residual["key"], head.qk["match"], 3),
                                   Score(residual["one"], residual["flag"], head.qk["bias"], 5)], [])
    W_Q, W_K = arrays["W_Q"][0], arrays["W_K"][0]
    form = W_Q @ W_K.T  # [d_model query, d_model key]: the score of a query direction against a key direction
    expected = np.zeros((residual.width, residual.width))
    expected[residual["val"].indices, residual["key"].indices] = 3.0
    expected[residual["one"].index, residual["flag"].index] = 5.0
    assert np.array_equal(form, expected)
    assert W_Q[residual["val"].indices, head.qk["match"].indices].tolist() == [3.0] * 3  # weight on the query side
    assert set(np.unique(W_K)) == {0.0, 1.0}


def test_a_route_is_a_linear_map_between_the_named_directions(residual):
    head = Head(qk=Space.of(("match", 3)), ov=Space.of(("pad", 1), ("code", 2)))
    arrays = head.dense(residual, [], [Route(residual["val"].prefix(2), head.ov["code"], residual["out"])])
    assert arrays["W_V"].shape == (1, residual.width, 3) and arrays["W_O"].shape == (1, 3, residual.width)
    mapping = arrays["W_V"][0] @ arrays["W_O"][0]
    expected = np.zeros((residual.width, residual.width))
    expected[residual["val"].indices[:2], residual["out"].indices] = 1.0
    assert np.array_equal(mapping, expected)


def test_head_widths():
    qk, ov = Space.of(("a", 5)), Space.of(("b", 2))
    assert (Head(qk, ov).d_k, Head(qk, ov).d_v) == (5, 5)  # a softmax head: one d_head
    assert (Head(qk, ov, shared=False).d_k, Head(qk, ov, shared=False).d_v) == (5, 2)  # linear attention


def test_heads_refuse_directions_they_do_not_own(residual):
    head = Head(qk=Space.of(("match", 3)), ov=Space.of(("code", 3)))
    stranger = Space.of(("other", 3))
    cases = [
        ([Score(residual["val"], residual["key"], head.ov["code"], 1.0)], []),     # a value direction as score
        ([Score(residual["val"], residual["key"], residual["val"], 1.0)], []),     # a residual group as head dir
        ([Score(residual["val"], stranger["other"], head.qk["match"], 1.0)], []),  # a key from another space
        ([], [Route(residual["val"], head.ov["code"], Group("out", 7, 3))]),       # a target past its group
    ]
    for scores, routes in cases:
        with pytest.raises(ValueError, match="no direction of"):
            head.runs(residual, scores, routes)
    with pytest.raises(ValueError, match="differ"):
        Score(residual["val"], residual["out"], head.qk["match"], 1.0)
    with pytest.raises(ValueError, match="differ"):
        Route(residual["val"], head.ov["code"], residual["out"])


# -- every construction's basis is its space -------------------------------------------------------------------------

@pytest.mark.parametrize("name, params", [
    ("composition", dict(L=3, m=3, n=[2, 5])), ("composition_hybrid", dict(L=2, m=3, n=[2])),
    ("composition_hybrid_small_table", dict(L=2, m=3, n=[2])),
    ("composition_forward_recurrent", dict(L=3, m=2, n=[2, 3])),
    ("two_sum", dict(n=6, M=5, t=1)), ("two_sum_sparse", dict(n=6, M=5, t=1, block=2, k=1)),
])
def test_the_basis_has_one_label_per_residual_direction(name, params):
    network = witness.compile(name, **params)
    labels = network.basis.labels
    assert len(labels) == len(set(labels)) == network.d_model


def test_the_description_groups_are_the_basis_groups():
    description = composition.describe(3, 3, (2, 5), extra=(("sel0", 3),))
    basis = description.basis()
    for name, (start, width) in description.groups.items():
        expected = [basis.index(name)] if name == "one" or name.startswith("type:") else basis.group(name)
        assert expected == list(range(start, start + width)), name
    assert description.d_model == len(basis) and description.d_head == description.head.d_k


# -- the linked constants ------------------------------------------------------------------------------------------

def test_composition_constants_follow_from_the_off_target_bound():
    epsilon = composition.OFF_TARGET_MASS_BOUND
    assert composition.FETCH_THRESHOLD == 1 - 2 * epsilon
    gain = composition.SIGN_GAIN
    assert gain * composition.FETCH_THRESHOLD == 1  # the threshold lifts to 1
    assert gain <= 2  # gain F <= 2: gain F - 1 exact by Sterbenz
    assert gain.denominator == 1 and gain.numerator & (gain.numerator - 1) == 0  # a power of two: gain F exact
    notes = witness.compile("composition", L=2, m=3, n=[2]).meta.notes
    assert (notes["fetch_threshold"], notes["off_target_mass_bound"]) == (0.5, 0.25)
    assert notes["C"] == composition.block_weight(notes["beta"]) == CODE_GAP * notes["beta"]


@pytest.mark.parametrize("prompt_length", [2, 3, 4, 10, 1000, 10**6 + 3, 2**60, 10**400])
def test_composition_scale_is_the_smallest_that_meets_the_bound(prompt_length):
    beta = composition.attention_scale(prompt_length)

    def mass(scale):  # (n - 1) e^{-CODE_GAP scale}, in logarithms so that 10**400 keys fit
        return math.log(prompt_length - 1) - CODE_GAP * scale

    bound = math.log(composition.OFF_TARGET_MASS_BOUND)
    assert mass(beta) <= bound + 1e-12
    assert beta == 1 or mass(beta - 1) > bound - 1e-12


def test_the_sign_mlp_cleans_every_fetch_above_the_threshold():
    network = witness.compile("composition", L=1, m=2)
    mlp = network.layers[0].mlp
    fetch, slot = network.basis.group("fetch"), network.basis.group("R0")
    threshold = float(composition.FETCH_THRESHOLD)
    for F in [threshold, np.nextafter(threshold, 1), 0.75, 1.0, -threshold, -0.6, -1.0]:
        x = np.zeros(network.d_model)
        x[fetch] = F
        out = x + np.maximum(x @ mlp.W_in + mlp.b_in, 0) @ mlp.W_out + mlp.b_out
        assert out[slot].tolist() == [math.copysign(1.0, F)] * len(slot) and not out[fetch].any()


@pytest.mark.parametrize("n, M", [(2, 2), (4, 5), (64, 64), (1000, 7), (2**24, 2**24)])
def test_two_sum_constants_give_the_margin_in_every_case(n, M):
    b_n, b_M = (n - 1).bit_length(), (M - 1).bit_length()
    mu = two_sum.mismatch_weight(b_n)
    eps = two_sum.off_match_mass_bound(b_n, b_M)
    offset, margin = Fraction(two_sum.VERDICT_OFFSET), Fraction(two_sum.MARGIN)
    assert eps == 1 / (8 * (b_n + 1) * (b_M + 1))  # the closed form the docstrings quote, bit for bit
    exact_eps = Fraction(eps)
    assert 2 * b_n - 2 * mu - offset <= -margin  # case (a)
    assert 2 * b_n * exact_eps - offset <= -margin  # case (b)
    assert (1 - offset) - exact_eps * (1 + 2 * mu * b_M) >= margin  # case (c)
    lam = two_sum.attention_scale(n, b_n, b_M)
    assert (n - 1) * math.exp(-CODE_GAP * lam) <= eps and (lam == 1 or (n - 1) * math.exp(-CODE_GAP * (lam - 1)) > eps)


def test_the_sparse_scale_doubles_two_sums_for_its_one_hot_gap():
    full = witness.compile("two_sum", n=16, M=8, t=3)
    sparse = two_sum_sparse.build(16, 8, 3, block=4, k=1)
    assert sparse.meta.notes["lambda"] == CODE_GAP * full.meta.notes["lambda"]
    W_Q, W_K = sparse.layers[0].mixer.W_Q[0], sparse.layers[0].mixer.W_K[0]
    one_hot = sparse.basis.group("val1h")
    form = (W_Q @ W_K.T)[np.ix_(one_hot, one_hot)]  # query value u against key value v
    u, v = np.nonzero(form)
    assert ((u + v) % 8 == 3).all() and len(u) == 8 and (form[u, v] == sparse.meta.notes["lambda"]).all()


def test_the_hybrid_selector_reads_codes_at_their_names():
    network = witness.compile("composition_hybrid_small_table", L=2, m=3, n=[2])
    mlp = network.layers[0].mlp
    slot, selector = network.basis.group("R0"), network.basis.group("sel0")
    for a in range(3):
        x = np.zeros(network.d_model)
        x[slot] = pm1_codes(np.array([a]), len(slot))[0]
        out = np.maximum(x @ mlp.W_in + mlp.b_in, 0) @ mlp.W_out
        assert out[selector].tolist() == [float(a == b) for b in range(3)]


def test_forward_state_units_are_named_after_what_they_write():
    network = composition_forward.build(2, 2, (2,))
    W_O = network.layers[1].mixer.W_O[0]  # [d_state, d_model]
    slot = network.basis.group("R1")
    assert W_O.shape[0] == 2 * len(slot)  # an and and a latch unit per captured bit
    assert all(np.flatnonzero(W_O[unit]).tolist() == [slot[unit // 2]] for unit in range(W_O.shape[0]))


def test_hybrid_memory_counts_the_small_table_directions():
    width = composition.describe(2, 5, (3,)).d_model
    assert composition_hybrid.build.memory_bytes(2, 5, (3,)) > composition.memory_bytes(2, 5, (3,))
    assert composition.describe(2, 5, (3,), extra=(("sel0", 5), ("tab1", 5))).d_model == width + 10
