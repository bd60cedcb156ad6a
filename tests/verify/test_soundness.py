"""Soundness against broken networks: seeded mutations of compiled composition networks that every checker sees.

Families small enough to enumerate (L = 1 with m = 2, 3, 4; L = 2 with m = 2, n = [2]) are compiled, and each
network is broken in one of four ways: a perturbed weight (a random entry moved by a random amount), a shrunk
attention scale (one layer's W_Q times a factor < 1), a dropped layer, and one bit too few (the unbroken network
run in every split of p* - 1 bits, p* found by the exhaustive min-precision search). For every mutation the
exhaustive check is the ground truth, and

* certify never says verified where exhaustive finds a failure;
* Hypothesis search and sampling never say verified, and every failure they report is a real one;
* every counterexample replays: its expected answer is the reference answer (tests/reference_tasks.py, a
  literal reading of docs/conventions.md §1.1) and the broken network, re-run, gives something else.

`test_kill_counts` prints how many mutations each check kills (run pytest with -s to see the table).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

import witness
from tests.oracles.reference_tasks import composition_answer_from_tokens
from verify import check, precision
from verify.certify import certify
from verify.result import Result, Status
from witness.arith.formats import parse_format
from witness.arith.semantics import arithmetic
from witness.execute import run
from witness.ir import Network

#: (L, m, n) -> the (format, semantics) runs its mutations are checked in; each unbroken family verifies in each.
#: The L = 2 family has 4,096 inputs, which strict semantics takes seconds to enumerate, so it runs under theory.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # broken networks overflow to inf/NaN on purpose

FAMILIES = {
    (1, 2, ()): [("fp16", "strict"), ("fp16", "theory")],
    (1, 3, ()): [("fp16", "strict"), ("fp16", "theory")],
    (1, 4, ()): [("fp16", "strict"), ("fp16", "theory")],
    (2, 2, (2,)): [("fp16", "theory")],
}
PERTURBATIONS_PER_FAMILY = 30
SCALES_PER_FAMILY = 8
SEED = 20261130


@dataclass(frozen=True)
class Mutation:
    kind: str
    family: tuple
    description: str
    network: Network
    fmt: str
    semantics: str


def drop_layer(network: Network, index: int) -> Network:
    layers = network.layers[:index] + network.layers[index + 1:]
    return Network(network.embedding, layers, network.readout, network.basis, network.meta)


def mutations() -> list[Mutation]:
    rng = np.random.default_rng(SEED)
    out = []
    for family, runs in FAMILIES.items():
        L, m, n = family
        network = witness.compile("composition", L=L, m=m, n=list(n))
        state = network.state_dict()
        names = sorted(state)
        for k in range(PERTURBATIONS_PER_FAMILY):
            fmt, semantics = runs[k % len(runs)]
            name = names[rng.integers(len(names))]
            array = np.array(state[name], dtype=np.float64)  # the stored dtype may be narrower
            nonzero = np.flatnonzero(array)
            # Mostly hit a weight the construction uses; moving a zero entry is often harmless, and so are small
            # moves: the construction has margin to spare. Both kinds are kept -- the verifier must see through them.
            pool = nonzero if nonzero.size and rng.random() < 0.75 else np.arange(array.size)
            flat = int(pool[rng.integers(pool.size)])
            delta = float(rng.choice([-1.0, 1.0]) * 10.0 ** rng.uniform(-2, 1.5))
            array.flat[flat] += delta
            out.append(Mutation("perturbed weight", family, f"{name}[{flat}] += {delta:.4g}",
                                network.with_arrays({name: array}), fmt, semantics))
        for k in range(SCALES_PER_FAMILY):
            fmt, semantics = runs[k % len(runs)]
            layer = int(rng.integers(L + 1))
            factor = float(rng.uniform(0.02, 0.98))
            name = f"blocks.{layer}.attn.W_Q"
            out.append(Mutation("shrunk attention scale", family, f"{name} *= {factor:.3f}",
                                network.with_arrays({name: state[name] * factor}), fmt, semantics))
        for layer in range(L + 1):
            for fmt, semantics in runs:
                out.append(Mutation("dropped layer", family, f"without blocks.{layer}", drop_layer(network, layer),
                                    fmt, semantics))
    return out


def one_bit_too_few() -> tuple[list[Mutation], list[tuple]]:
    """Every split of p* - 1 bits, per family, format family and semantics; also (family, result) for each p*."""
    out, searches = [], []
    for family, runs in FAMILIES.items():
        L, m, n = family
        network = witness.compile("composition", L=L, m=m, n=list(n))
        for format_family in ("float", "fixed"):
            for semantics in sorted({semantics for _, semantics in runs}):
                found = precision.min_precision(precision.network_checker(network, "exhaustive"), format_family,
                                                semantics, max_bits=24)
                searches.append((family, network, found))
                for trial in found.below:
                    out.append(Mutation("one bit too few", family, f"{trial.format} (p* = {found.p})", network,
                                        trial.format, semantics))
    return out, searches


def replays(mutation: Mutation, result: Result) -> bool:
    counterexample = result.counterexample
    L, m, n = mutation.family
    tokens = np.array(counterexample.tokens)
    reference = composition_answer_from_tokens(m, n, tokens)
    if counterexample.expected != reference:
        return False
    try:
        output = int(run(mutation.network, tokens, arithmetic(parse_format(mutation.fmt),
                                                               mutation.semantics)).predictions[0, 0])
    except witness.OverflowInFormat as exc:
        return counterexample.output == f"overflow: {exc}"
    return output == counterexample.output != reference


@pytest.fixture(scope="module")
def outcomes():
    bit_mutations, searches = one_bit_too_few()
    rows = []
    for index, mutation in enumerate(mutations() + bit_mutations):
        arith = arithmetic(parse_format(mutation.fmt), mutation.semantics)
        rows.append((mutation, {
            "exhaustive": check.exhaustive(mutation.network, arith),
            "certify": certify(mutation.network, arith),
            "hypothesis": check.hypothesis_search(mutation.network, arith, max_examples=25, seed=index),
            "sampled": check.sampled(mutation.network, 64, seed=index, arith=arith),
        }))
    return rows, searches


def test_the_unbroken_networks_verify_in_the_base_runs():
    for (L, m, n), runs in FAMILIES.items():
        network = witness.compile("composition", L=L, m=m, n=list(n))
        for fmt, semantics in runs:
            assert check.exhaustive(network, arithmetic(parse_format(fmt), semantics)).status is Status.VERIFIED


def test_min_precision_is_verified_at_p_star_and_not_one_bit_below(outcomes):
    _, searches = outcomes
    for family, network, found in searches:
        assert found.status is Status.VERIFIED, (family, found)
        fmt = parse_format(found.format)
        assert fmt.bits == found.p
        assert check.exhaustive(network, arithmetic(fmt, found.semantics)).status is Status.VERIFIED
        assert found.below and all(trial.p == found.p - 1 and trial.status == "falsified" for trial in found.below)


def test_certify_never_verifies_what_exhaustive_falsifies(outcomes):
    rows, _ = outcomes
    wrong = [(m.kind, m.family, m.description, m.fmt, m.semantics) for m, r in rows
             if r["certify"].status is Status.VERIFIED and r["exhaustive"].status is not Status.VERIFIED]
    assert wrong == []


def test_search_and_sampling_never_verify_and_only_report_real_failures(outcomes):
    rows, _ = outcomes
    for mutation, results in rows:
        for method in ("hypothesis", "sampled"):
            result = results[method]
            assert result.status is not Status.VERIFIED
            if result.status is Status.FALSIFIED:
                assert results["exhaustive"].status is Status.FALSIFIED
                assert replays(mutation, result), (mutation.description, method)


def test_every_exhaustive_failure_replays(outcomes):
    rows, _ = outcomes
    for mutation, results in rows:
        result = results["exhaustive"]
        assert result.status in (Status.VERIFIED, Status.FALSIFIED)
        if result.status is Status.FALSIFIED:
            assert result.failures >= 1 and replays(mutation, result), mutation.description


def test_kill_counts(outcomes):
    rows, _ = outcomes
    kinds = sorted({mutation.kind for mutation, _ in rows})
    methods = ("exhaustive", "certify", "hypothesis", "sampled")
    total = Counter(mutation.kind for mutation, _ in rows)
    killed = Counter((mutation.kind, method) for mutation, results in rows for method in methods
                     if results[method].status is not Status.VERIFIED
                     and (method == "certify" or results[method].status is Status.FALSIFIED))
    print(f"\n{'mutation':24} {'count':>5} " + " ".join(f"{method:>10}" for method in methods))
    for kind in kinds + ["all"]:
        count = sum(total.values()) if kind == "all" else total[kind]
        kills = [sum(killed[(k, method)] for k in kinds) if kind == "all" else killed[(kind, method)]
                 for method in methods]
        print(f"{kind:24} {count:>5} " + " ".join(f"{k:>10}" for k in kills))
    certified = [results for _, results in rows if results["certify"].status is Status.VERIFIED]
    survivors = [results for _, results in rows if results["exhaustive"].status is Status.VERIFIED]
    print(f"certify verified {len(certified)} mutations, exhaustive {len(survivors)} (a mutation can be harmless); "
          f"certify-verified but exhaustive-falsified: "
          f"{sum(r['exhaustive'].status is not Status.VERIFIED for r in certified)}")
    assert sum(total.values()) >= 200
    # The soundness check above is only worth something if certify does say verified on some mutations.
    assert certified
    for kind in kinds:
        assert killed[(kind, "exhaustive")] > 0, kind
        # certify kills at least what exhaustive kills (it may also refuse networks that happen to be right)
        assert killed[(kind, "certify")] >= killed[(kind, "exhaustive")], kind
    assert killed[("one bit too few", "exhaustive")] == total["one bit too few"]
