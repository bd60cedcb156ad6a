"""The words a row of `witness hierarchy` carries: its architecture's name and its evidence column.

The jobs decide; this module says what they decided, so every sentence a row holds is written here (report.md's own
prose is `experiments.hierarchy.report`'s). Each function takes the facts the sentence states and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experiments.hierarchy.rows import ProbeRow

#: How each construction of stage 1 and each positive side is named in the tables ({L}, {L1} = L + 1 and
#: {Lm1} = L - 1 are its depth).
CONSTRUCTION_LABELS = {
    "composition": "{L1} full attention layers (construction)",
    "composition_hybrid": "{L} full + 1 linear (construction)",
    "composition_hybrid_small_table": "linear, then {Lm1} full (small-table construction)",
    "two_sum": "1 full attention layer (construction)",
    "two_sum_sparse": "1 (B,k)-sparse layer, rich summaries (construction)",
    "composition_cot": "decoder + chain of thought, a value token per hop (construction)",
    "composition_cot_pairs": "decoder + chain of thought, an (address, value) token per hop (construction)",
    "composition_encoder": "encoder (no causal mask), pointer doubling (construction)",
}
#: How the depth plot names each positive side (its layers and generated tokens are read from the networks).
DEPTH_LABELS = {
    "composition": "decoder, one pass (composition)",
    "composition_cot": "decoder + chain of thought (composition_cot)",
    "composition_cot_pairs": "decoder + chain of (address, value) tokens (composition_cot_pairs)",
    "composition_encoder": "encoder, one pass (composition_encoder)",
}
#: How each probed architecture is named (its depth as above, and its own options: {linear}, {mixer}, {block}, {k}).
PROBE_LABELS = {
    "hybrid": "{Lm1} full + {linear} {mixer} per gap (probe)",
    "full": "{L} full attention layers (probe)",
    "control": "{L1} full attention layers (trained control)",
    "sparse": "1 ({block},{k})-sparse layer (probe)",
}
NO_CONTROL = "no trained control at this depth: no evidence"
CANNOT_EXPRESS = "the architecture cannot express the task, whatever its weights"


def depth_names(L: int) -> dict[str, int]:
    """The depth placeholders of the labels."""
    return {"L": L, "L1": L + 1, "Lm1": L - 1}


def not_installed(construction: str) -> str:
    return f"construction {construction!r} is not installed"


def not_certified(family: str, semantics: str, reason: str) -> str:
    return f"certify verified no {family} format under {semantics}: {reason}"


def certified(inputs_log2: int, p: int, verified_below: int, splits_below: int) -> str:
    return (f"every input (2^{inputs_log2} inputs) at p* = {p}; at {p - 1} bits {verified_below} of {splits_below} "
            "splits verified")


def verified_exhaustively(inputs: int, fmt: str, semantics: str, family: str, p: int, generated: int, below: int,
                          unrunnable: int) -> str:
    """An exhaustive p* search's verdict: every input run at p*, and every split of fewer bits (`below` of them at
    p - 1, besides `unrunnable` ones the semantics cannot run) failing on some input."""
    chain = ("; the generated token of each input checked" if generated == 1 else
             f"; all {generated} generated tokens of each input checked, not only the last" if generated else "")
    skipped = f" ({unrunnable} not runnable under {semantics})" if unrunnable else ""
    return (f"verified on every input (exhaustive, {inputs} inputs, {fmt} {semantics}){chain}; every runnable {family} "
            f"format of fewer bits fails on some input ({below} tried at {p - 1} bits{skipped}); no certificate: the "
            "trusted checker does not know this construction")


def not_verified_exhaustively(family: str, semantics: str, max_bits: int, tried: int) -> str:
    return (f"no {family} format of at most {max_bits} bits answers every input under {semantics}: each of the "
            f"{tried} formats run on every input failed on some")


def ruled_out(L: int, covered: bool, n: int | str, Hdp: int, smallest_n: str, separation: str | None,
              probes: list[str]) -> str:
    """The hybrid Theorem 1.1 rules out beside the positive sides of depth L: whether the theorem covers the
    decoder's budget at its prompt length (and the separation row where it does at the theorem's own scale), and
    the probe rows (searches, not proofs) that ran the hybrid at the decoder's budget."""
    if covered:
        theorem = f"Theorem 1.1 rules out L − 1 = {L - 1} full layers plus linear layers at Hdp = {Hdp}, n = {n}"
    else:
        theorem = (f"ruled out by Theorem 1.1 only for large n: at n = {n} it does not cover Hdp = {Hdp} (it does "
                   f"from n {smallest_n})")
    if separation is not None:
        theorem += f"; at the theorem's own scale it does: row {separation}"
    return theorem + ("; searched at the decoder's budget and p* format in rows " + ", ".join(probes) + " (a "
                      "search of one network each, not a proof)" if probes else "; no probe row at this depth")


def probe_evidence(weights: str, fmt: str, failing: int, tried: int, kept: int, pairs: int,
                   accuracy: float | None, replayed_from: str | None, why: str | None) -> str:
    """What one probe found (failing inputs, kept examples, indistinguishable pairs), what its weights mean, and
    `why` its architecture cannot express the task, where that is proven."""
    if weights == "random":
        meaning = "random weights: a failure here says nothing about what the architecture can learn"
    elif weights == "trained":
        meaning = f"trained to accuracy {accuracy:.3f} (float64 executor, held-out inputs)"
        if replayed_from:
            meaning += f"; weights replayed from {replayed_from}, searched here"
    else:
        meaning = f"{weights} weights (the construction's own, under sparse attention)"
    if why:
        meaning += f"; {CANNOT_EXPRESS}: {why}"
    if not (failing or pairs):
        return f"none of {tried} inputs failed at {fmt} (a search, not a proof); {meaning}"
    counts = f"{failing} of {tried} inputs failed at {fmt} ({kept} kept as replayable examples)"
    if pairs:
        counts += f"; {pairs} indistinguishable pairs"
    return f"{counts}; {meaning}"


def control_verdict(control: ProbeRow, learned: bool) -> str:
    """How a trained probe stands beside its trained control."""
    failed = (f"the trained control ({control.architecture}) failed {control.failing} of {control.tried} inputs at "
              f"{control.format}")
    if learned:
        return (failed + ", so it learned: this row counts as evidence that training did not find a solution for "
                "this architecture at this budget (not that none exists)")
    return failed + ": the control did not learn the task at this format either, so this row is no evidence about " \
                    "the architecture"


def separation_architecture(L: int, prompt_length_log2: str) -> str:
    return f"{L + 1} full attention layers (construction, at log2 n = {prompt_length_log2})"


def separation_evidence(L: int, found: dict, folder: str, replayed_from: str | None) -> str:
    """The separation's certificate and coverage (`found`: `experiments.separation`'s summary), and, where it was
    replayed, which scan was."""
    words = (f"every input (2^{found['inputs_log2']} inputs) at p* = {found['p']}, the smallest covered size of the "
             f"family ({found['family']}, k = {found['k']}); Hdp = {found['Hdp']} <= {found['theorem']['largest_Hdp']}"
             f" = floor(n^(2^-{4 * L + 2})): Theorem 1.1 covers this budget (`{folder}/separation.md`)")
    if replayed_from is not None:
        words += (f"; certificate and coverage re-checked here, the scan that found this smallest size "
                  f"({found['sizes_scanned']} sizes, {found['certify_calls']} certify calls) replayed from "
                  f"{replayed_from}")
    return words
