"""certify for the composition construction named by its parameters, at sizes no table could be built for.

Under `theory` the claim carries the construction's parametric description (`constructions.composition.describe`)
in the checker's language (`verify.checker.parametric`: sparse runs for the per-layer weights, rules per class of
positions and tokens for the embedding), and the checker proves it without materialising anything of size n.
`strict` rounds every one of the n terms of a softmax sum in order, which has no closed form: the network is built
and certified as a network (`networks`) up to `STRICT_PROMPT_LIMIT` tokens, `unknown` beyond.
"""

from __future__ import annotations

from dataclasses import dataclass

from constructions.composition import Description, build, describe
from verify import checker
from verify.certify.networks import certify_network, prove, unknown
from witness.tasks import Composition

#: Strict semantics is certified on the built network up to this many prompt tokens.
STRICT_PROMPT_LIMIT = 20_000


@dataclass(frozen=True)
class Construction:
    """The composition construction for Composition(L, m, n) (paper layout), named rather than built."""

    L: int
    m: int
    n: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", tuple(self.n))
        Composition(self.L, self.m, self.n)  # validates the parameters

    @property
    def task(self) -> Composition:
        return Composition(self.L, self.m, self.n)


def certify_construction(target: Construction, arithmetic):
    task = target.task
    if arithmetic.semantics == "strict":
        if task.prompt_length > STRICT_PROMPT_LIMIT:
            return unknown(arithmetic, f"strict semantics is certified on the built network up to "
                                       f"{STRICT_PROMPT_LIMIT} tokens; this prompt has {task.prompt_length}")
        return certify_network(build(target.L, target.m, target.n), arithmetic)
    fmt = getattr(arithmetic, "format", None)
    if fmt is None:
        return unknown(arithmetic, f"certify needs a rounded arithmetic, not {arithmetic.describe()}")
    description = description_json(describe(target.L, target.m, target.n))
    claim = {"task": "composition", "params": task.params(), "format": fmt.name, "semantics": arithmetic.semantics,
             "network": {"description": description, "sha256": checker.description_fingerprint(description)}}
    return prove(claim, None, arithmetic)


def description_json(description: Description) -> dict:
    """A `Description` in the checker's language (verify/checker/parametric.py says what each field means): its
    runs and rules as they are, and only the groups a rule or the readout names."""

    def rule(r) -> dict:
        if r.source == "constant":
            return {"group": r.group, "source": r.source, "constant": r.constant}
        return {"group": r.group, "source": r.source, "width": r.width, **({"digit": r.digit} if r.source == "digit"
                                                                             else {})}

    def rules(classes):
        return [{"class": c.name, "rules": [rule(r) for r in c.rules]} for c in classes]

    layers = [{**{name: [list(run) for run in array.runs] for name, array in arrays.items()},
               "d_mlp": arrays["W_in"].shape[1]} for arrays in description.weights]
    named = {r.group for c in description.positions + description.tokens for r in c.rules} | {
        description.readout_group}
    return {"d_model": description.d_model, "d_head": description.d_head,
            "groups": {name: list(span) for name, span in description.groups.items() if name in named},
            "positions": rules(description.positions), "tokens": rules(description.tokens), "layers": layers,
            "readout": {"group": description.readout_group}}
