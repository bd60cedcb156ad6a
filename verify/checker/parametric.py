"""The proof for a parametric description of the composition construction, at sizes no table could be built for.

The certificate carries the network itself, compactly: the per-layer weights as sparse runs, and the embedding as
rules per class of positions and tokens. Its meaning (what `materialise` builds at small sizes, and what the test
suite compares with `constructions.composition.build`):

* `groups`: name -> [first direction, width]. A rule {group, source, width} writes the group's first `width`
  directions: `constant` the value `constant` (width 1); `value` the ±1 code of the token id; `digit` the code of
  query digit w_`digit`; `address_low` / `address_high` the code of a table entry's address a: for z_1, low = a
  (no high part); for z_l, l >= 2, low = a mod N_{l-2} and high = a div N_{l-2} -- the entry z_l(w_{l-1}, i_{l-1}).
  Entry k of the code of v is +1 when bit k of v is set, else -1.
* `positions`: a rule list per segment (z_L .. z_1, z0, w); `tokens`: for `value` tokens (ids below V) and the
  `query` token (ids V + enc(w)). W_E + W_pos is the embedding.
* `layers`: per layer one causal softmax head (W_Q, W_K, W_V [d_model, d_head], W_O [d_head, d_model], biases) and
  an MLP (W_in, b_in, W_out, b_out); a matrix is a list of runs [row, column, length, value]: entries
  (row + i, column + i) = value for i < length; a vector is a list of runs [index, length, value].
* `readout`: logit_v = <code(v), group> for every answer v < V, no bias.

The proof, under `theory` (exact inside a block; embedding, head outputs, block outputs and the residual stored):

1. Ranges, as in `ranges` but on sparse weights: every stored value, at every position, stays in range.
2. The read position's state is symbolic: each direction holds a constant or bit k of a variable (w_l, or i_l once
   layer l has written it). Per layer, the score form W_Q W_K^T must pair query bits with key code bits with one
   weight beta > 0 and meet constants otherwise, so a key of class P scores top_P - 2 beta h, h the number of its
   paired bits that differ from the query's. The best class must be the one the task reads (z0, then z_l), its
   pairing aligned with the bits of (w_{l-1}, i_{l-1}) and injective on its entries: the target is the entry the
   task reads, at h = 0, alone.
3. Off-target mass, counted exactly: at most mu_P keys of P share one pattern of paired bits (mu_P is the number of
   entries whose unpaired address bits are free, a Python int), so at most C(b_P, h) mu_P keys sit at distance h;
   filling the smallest distances first (as many keys as the class has, less the target in its own class),
   R <= sum_P e^(top_P - top) sum_h k_h e^(-2 beta h), every exponential and sum rounded up by MPFR. This is the
   bound whose earlier form, min((1 + e^(-2 beta))^b, count), counted patterns instead of keys.
4. The target's weight is at least pi = 1/(1 + R) (rounded down); each fetched coordinate is then in the hull of
   pi' v + (1 - pi') [-V, V], pi' in [pi, 1] (v the target's value for its bit set or clear, V the largest value
   another position can hold there), widened by float64's error in the executor's stand-in for that softmax, mix
   and head (`numbers.float64_softmax_error`, so that the verdict covers `witness run --semantics theory` too);
   the head output, b_O and the residual add are stored; the MLP is evaluated on
   every format value of that interval (`mlp`) and must write exactly the ±1 code of the fetched bit: the state
   now holds bits of i_l.
5. The readout's slot holds the code of i_L bit for bit, so logit_{i_L} = b and every other logit <= b - 2.
"""

from __future__ import annotations

import sys
from fractions import Fraction
from functools import cached_property

import gmpy2
import numpy as np

from verify.checker.mlp import MLP
from verify.checker.numbers import (Format, exp_rounded, float64_softmax_error, float64_sums_exactly, lower_float,
                                    number, up, valuation)
from verify.checker.ranges import Ranges, one_input_range
from verify.checker.refusal import Refused, require
from verify.checker.tasks import Composition, shown

PRECISION = 256
SOURCES = ("constant", "value", "digit", "address_low", "address_high")
TABLE_SOURCES = ("constant", "address_low", "address_high")  # z_1 .. z_L
POSITION_SOURCES = {"z0": ("constant",), "w": ("constant",)}
TOKEN_SOURCES = {"value": ("constant", "value"), "query": ("constant", "digit")}
LARGEST_FLOAT64 = sys.float_info.max


# -- the description ------------------------------------------------------------------------------------------
class Sparse:
    """A sparse matrix from runs, entries rounded to the format: rows, cols, vals (float64), and its shape."""

    def __init__(self, runs, shape: tuple[int, int], fmt: Format | None, what: str):
        require(isinstance(runs, list), f"{what} is not a list of runs")
        rows, cols, vals = [], [], []
        matrix = len(shape) == 2
        for run in runs:
            require(isinstance(run, list) and len(run) == (4 if matrix else 3), f"{what}: malformed run {shown(run)}")
            r, c, n, v = run if matrix else [0] + run
            require(all(_is_int(x) for x in (r, c, n)) and n >= 1
                    and isinstance(v, (int, float)) and not isinstance(v, bool), f"{what}: malformed run {shown(run)}")
            require(r >= 0 and c >= 0 and c + n <= shape[-1] and (not matrix or r + n <= shape[0]),
                    f"{what}: run {shown(run)} is out of bounds")
            rows.append(np.arange(r, r + n) if matrix else np.zeros(n, dtype=np.int64))
            cols.append(np.arange(c, c + n))
            vals.append(np.full(n, float(v)))
        self.shape = shape
        self.rows = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        self.cols = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
        self.vals = np.concatenate(vals) if vals else np.zeros(0)
        order = np.lexsort((self.rows, self.cols))
        rows, cols = self.rows[order], self.cols[order]
        require(not np.any((rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1])), f"{what}: runs overlap")
        if fmt is not None:
            self.vals = fmt.round_array(self.vals, f"weight {what}")
        keep = self.vals != 0
        self.rows, self.cols, self.vals = self.rows[keep], self.cols[keep], self.vals[keep]

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape if len(self.shape) == 2 else (1,) + self.shape)
        out[self.rows, self.cols] = self.vals
        return out if len(self.shape) == 2 else out[0]

    @cached_property
    def columns(self) -> dict[int, list[tuple[int, float]]]:
        """col -> [(row, value)], columns and rows in index order (built once: the proof reads a layer's columns
        several times; not to be mutated)."""
        order = np.lexsort((self.rows, self.cols))
        cols = self.cols[order]
        starts = np.flatnonzero(np.diff(cols, prepend=-1)).tolist()
        entries = list(zip(self.rows[order].tolist(), self.vals[order].tolist()))
        return {c: entries[a:b] for c, a, b in zip(cols[starts].tolist(), starts, starts[1:] + [cols.size])}

    def magnitude_product(self, B: np.ndarray) -> np.ndarray:
        """sum_r B[r] |W[r, c]| per column c, rounded up (nonnegative float64 terms, Higham's bound)."""
        out = np.bincount(self.cols, weights=B[self.rows] * np.abs(self.vals), minlength=self.shape[-1])
        count = np.bincount(self.cols, minlength=self.shape[-1]).max(initial=0)
        return up(out * (1 + (count + 2) * 2.0 ** -51))


def _is_int(value) -> bool:
    """A JSON integer, not a float, string or boolean that int() or `in range` would also accept."""
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value, what: str) -> int:
    if not _is_int(value):  # the message only on failure
        raise Refused(f"{what} must be an integer, not {shown(value)}")
    return value


def shape(description: dict) -> tuple[int, int, int]:
    """(H, d_head, d_model) of a description."""
    require(isinstance(description, dict), "the description is not an object")
    return 1, _count(description["d_head"], "d_head"), _count(description["d_model"], "d_model")


class Description:
    def __init__(self, raw: dict, task: Composition, fmt: Format | None):
        require(isinstance(raw, dict), "the description is not an object")
        self.task = task
        self.d_model, self.d_head = _count(raw["d_model"], "d_model"), _count(raw["d_head"], "d_head")
        require(self.d_model >= 1 and self.d_head >= 1, "the description's widths must be positive")
        self.groups = {}
        for name, (start, width) in raw["groups"].items():
            require(_is_int(start) and _is_int(width) and start >= 0 and width >= 0
                    and start + width <= self.d_model, f"group {name} is out of bounds")
            self.groups[name] = (start, width)
        self.used = {raw["readout"]["group"]}
        self.fmt = fmt
        # What each class can hold: a position embedding depends on the position only, so a table segment holds
        # constants and its entry's address codes, z0 and the read position w constants; a token embedding
        # depends on the token only, so a value token holds constants and its value's code, the query token
        # constants and its digits' codes. Anything else describes no network.
        self.positions = {entry["class"]: self._rules(entry["rules"],
                                                      POSITION_SOURCES.get(entry["class"], TABLE_SOURCES))
                          for entry in raw["positions"]}
        self.tokens = {entry["class"]: self._rules(entry["rules"], TOKEN_SOURCES.get(entry["class"], ()))
                       for entry in raw["tokens"]}
        require(len(self.positions) == len(raw["positions"]) and len(self.tokens) == len(raw["tokens"]),
                "a class is listed twice")
        require(set(self.positions) == {s.name for s in task.segments}, "the position classes are not the segments "
                                                                         "z_L .. z_1, z0, w")
        require(set(self.tokens) == {"value", "query"}, "the token classes are `value` and `query`")
        layers = raw["layers"]
        require(isinstance(layers, list) and len(layers) == task.L + 1, f"the task reads {task.L + 1} table entries; "
                                                                         f"the description has {len(layers)} layers")
        D, Hd = self.d_model, self.d_head
        self.layers = []
        for l, layer in enumerate(layers):
            d_mlp = _count(layer["d_mlp"], f"layer {l}'s d_mlp")
            shapes = {"W_Q": (D, Hd), "W_K": (D, Hd), "W_V": (D, Hd), "W_O": (Hd, D), "b_Q": (Hd,), "b_K": (Hd,),
                      "b_V": (Hd,), "b_O": (D,), "W_in": (D, d_mlp), "b_in": (d_mlp,), "W_out": (d_mlp, D),
                      "b_out": (D,)}
            require(set(layer) == set(shapes) | {"d_mlp"}, f"layer {l} must list {sorted(shapes)} and d_mlp")
            self.layers.append({k: Sparse(layer[k], s, fmt, f"blocks.{l}.{k}") for k, s in shapes.items()})
        require(isinstance(raw["readout"], dict) and set(raw["readout"]) == {"group"},
                "the readout holds its group only")
        require(all(isinstance(e, dict) and set(e) == {"class", "rules"} for e in raw["positions"] + raw["tokens"]),
                "a class entry holds its class and rules only")
        self.readout = raw["readout"]["group"]
        require(self.readout in self.groups, "the readout group is not a group")
        require(self.used == set(self.groups), f"groups no rule uses: {sorted(set(self.groups) - self.used)}")
        require(set(raw) == {"d_model", "d_head", "groups", "positions", "tokens", "layers", "readout"},
                "a description holds d_model, d_head, groups, positions, tokens, layers and readout")

    def _rules(self, rules, allowed: tuple[str, ...]) -> list[dict]:
        out = []
        for rule in rules:
            source = rule.get("source")
            require(source in SOURCES and rule.get("group") in self.groups, f"malformed rule {shown(rule)}")
            require(source in allowed, f"rule {shown(rule)}: this class's embedding cannot hold a {source} code")
            fields = {"constant": {"constant"}, "digit": {"width", "digit"}}.get(source, {"width"})
            require(set(rule) == {"group", "source"} | fields, f"a {source} rule has the fields group, source and "
                                                               f"{', '.join(sorted(fields))}: {shown(rule)}")
            width = 1 if source == "constant" else rule["width"]
            require(_is_int(width) and 0 <= width <= self.groups[rule["group"]][1],
                    f"rule {shown(rule)} is wider than its group")
            require(source != "digit" or (_is_int(rule["digit"]) and rule["digit"] in range(1, self.task.L)),
                    f"rule {shown(rule)} names no query digit")
            constant = rule.get("constant", 0.0)
            require(isinstance(constant, (int, float)) and not isinstance(constant, bool)
                    and abs(constant) <= LARGEST_FLOAT64 and float(constant) == constant,
                    f"rule {shown(rule)}: the constant is not a float64")
            # The network stores its embedding in the format, so the keys would see the constant rounded: a
            # constant that rounds onto another class's could tie their scores while this proof saw them apart.
            # The proof reasons about the constant itself, so it must be a value of the format.
            if self.fmt is not None:
                require(self.fmt.round(Fraction(constant)) == constant,
                        f"rule {shown(rule)}: the constant is not exact in {self.fmt.name}")
            out.append({"group": rule["group"], "source": source, "width": width,
                        "constant": float(constant), "digit": rule.get("digit", 0)})
            self.used.add(rule["group"])
        return out

    def directions(self, rules) -> dict[int, tuple]:
        """direction -> ("const", value) or ("code", source, bit) for one class's rules (no direction twice)."""
        entries = {}
        for rule in rules:
            start = self.groups[rule["group"]][0]
            if rule["source"] == "constant":
                items = {start: ("const", Fraction(rule["constant"]))}
            else:
                source = f"w{rule['digit']}" if rule["source"] == "digit" else rule["source"]
                items = {start + k: ("code", source, k) for k in range(rule["width"])}
            require(not set(items) & set(entries), "two rules write one direction")
            entries.update(items)
        return entries


def _code(values: np.ndarray, width: int) -> np.ndarray:
    bits = (np.asarray(values, dtype=np.int64)[:, None] >> np.arange(width)) & 1
    return (2 * bits - 1).astype(np.float64)


def materialise(raw: dict, task: Composition) -> dict[str, np.ndarray]:
    """The dense arrays a description means (small sizes only), unrounded, under TransformerLens names."""
    d = Description(raw, task, None)
    arrays = {"embed.W_E": np.zeros((task.vocab, d.d_model)), "pos_embed.W_pos": np.zeros((task.prompt_length,
                                                                                           d.d_model))}
    sizes = task.sizes
    for segment in task.segments:
        a = np.arange(segment.length)
        l = int(segment.name[1:]) if segment.name[0] == "z" and segment.name != "z0" else 0
        low = a % sizes[l - 2] if l >= 2 else a
        high = a // sizes[l - 2] if l >= 2 else np.zeros_like(a)
        block = arrays["pos_embed.W_pos"][segment.start:segment.stop]
        _write(d, block, d.positions[segment.name], {"address_low": low, "address_high": high})
    V = task.value_vocab
    _write(d, arrays["embed.W_E"][:V], d.tokens["value"], {"value": np.arange(V)})
    rest = np.arange(task.query_count)
    digits = {}
    for k, n_k in enumerate(task.n, start=1):
        digits[f"w{k}"], rest = rest % n_k, rest // n_k
    _write(d, arrays["embed.W_E"][V:], d.tokens["query"], digits)
    for l, layer in enumerate(d.layers):
        for name, matrix in layer.items():
            dense = matrix.dense()
            kind = "mlp" if name in ("W_in", "b_in", "W_out", "b_out") else "attn"
            arrays[f"blocks.{l}.{kind}.{name}"] = dense[None] if kind == "attn" and name != "b_O" else dense
    start, width = d.groups[d.readout]
    W_U = np.zeros((d.d_model, V))
    W_U[start:start + width] = _code(np.arange(V), width).T
    arrays["unembed.W_U"], arrays["unembed.b_U"] = W_U, np.zeros(V)
    return arrays


def _write(d: Description, block: np.ndarray, rules, sources: dict) -> None:
    for rule in rules:
        start = d.groups[rule["group"]][0]
        if rule["source"] == "constant":
            block[:, start] = rule["constant"]
        else:
            key = f"w{rule['digit']}" if rule["source"] == "digit" else rule["source"]
            block[:, start:start + rule["width"]] = _code(sources[key], rule["width"])


# -- the proof --------------------------------------------------------------------------------------------------
def _free_count(limit: int, paired: set[int]) -> int:
    """The most integers in [0, limit) that agree on the bits `paired`: clearing the paired bits maps each class
    injectively into the one whose paired bits are all 0, so that class is the largest; count its members, walking
    the bits of limit from the top (x shares limit's higher bits and has a 0 where limit has a 1, below which it is
    free wherever a bit is unpaired)."""
    mask = sum(1 << k for k in paired)
    count, prefix = 0, 0
    for k in range(limit.bit_length() - 1, -1, -1):
        if limit >> k & 1:
            if not prefix & mask:
                count += 1 << sum(1 for j in range(k) if not mask >> j & 1)
            prefix |= 1 << k
            if prefix & mask:
                break
    return count


def prove(raw: dict, task: Composition, fmt: Format) -> dict:
    require(fmt.supported, f"{fmt.name} is outside the formats the checker reasons about")
    d = Description(raw, task, fmt)
    ones = fmt.round_array(np.array([1.0, -1.0]), "a code")
    require(np.array_equal(ones, [1.0, -1.0]), f"{fmt.name} does not hold the codes ±1")
    writes = []
    for layer in d.layers:
        written = np.zeros(d.d_model, bool)
        written[layer["W_O"].cols] = True
        written[layer["b_O"].cols] = True
        written[layer["W_out"].cols] = True
        written[layer["b_out"].cols] = True
        writes.append(written)
    state = dict(d.directions(d.positions["w"]))
    for direction, entry in d.directions(d.tokens["query"]).items():
        require(direction not in state, "the query token and the read position write one direction")
        state[direction] = entry
    layers = []
    for l in range(task.L + 1):
        entry, state = _layer(d, fmt, l, state, writes)
        layers.append(entry)
    readout = _readout(d, state)
    return {"ranges": {"largest_residual_entry_after_layer": _ranges(d, fmt)}, "layers": layers,
            "readout": readout}


def _ranges(d: Description, fmt: Format) -> list[float]:
    """Magnitude bounds at every position (step 1), sparse; theory: the stores are the only roundings."""
    B = np.zeros(d.d_model)
    for classes in (d.positions, d.tokens):
        largest = np.zeros(d.d_model)
        for rules in classes.values():
            for direction, entry in d.directions(rules).items():
                largest[direction] = max(largest[direction], abs(float(entry[1])) if entry[0] == "const" else 1.0)
        B = B + largest
    B = fmt.round_array(up(B), "the embedding")
    ranges = Ranges(fmt, strict=False)
    # The mix is a convex combination in the exact model; the executor's float64 stand-in may exceed it by its
    # softmax error (no executor holds 2^50 tokens: there the bound is about the exact model, as in `_layer`).
    n = d.task.prompt_length
    mix_error = float64_softmax_error(n, 1) if n < 2 ** 50 else 0.0
    out = []
    for l, layer in enumerate(d.layers):
        # finite in float64, where the executor computes theory's exact inside of a block (`ranges`)
        q, k = (ranges.inside(up(layer[f"W_{x}"].magnitude_product(B) + np.abs(layer[f"b_{x}"].dense())),
                              f"blocks.{l} {name}") for x, name in (("Q", "queries"), ("K", "keys")))
        ranges.inside(up(up(q @ k) * (1 + 2.0 ** -40)), f"blocks.{l} scores")
        v = up(layer["W_V"].magnitude_product(B) + np.abs(layer["b_V"].dense()))
        ranges.inside(v, f"blocks.{l} values")
        mix = up(v * up(1 + mix_error))
        head = fmt.round_array(layer["W_O"].magnitude_product(mix), f"blocks.{l} head output")
        attn = fmt.round_array(up(head + np.abs(layer["b_O"].dense())), f"blocks.{l} attention output")
        B = fmt.round_array(up(B + attn), f"blocks.{l} residual stream")
        B = _mlp_ranges(ranges, layer, B, f"blocks.{l}.mlp")
        out.append(float(B.max(initial=0.0)))
    return out


def _mlp_ranges(ranges: Ranges, layer: dict, B: np.ndarray, p: str) -> np.ndarray:
    """`ranges`' MLP step on sparse weights: one-input outputs by their exact range (shared by outputs whose units,
    weights and input bounds agree), the others term by term."""
    fmt = ranges.fmt
    unit_inputs, b_in, writers, b_out = _mlp_columns(layer)
    hidden = ranges.inside(up(layer["W_in"].magnitude_product(B) + np.abs(layer["b_in"].dense())),
                           f"{p} hidden units")
    ranges.inside(up(layer["W_out"].magnitude_product(hidden) + np.abs(layer["b_out"].dense())), f"{p} outputs")
    new = B.copy()
    cache = {}
    for d, units in writers.items():
        sources = {i for h, _ in units for i, _ in unit_inputs.get(h, ())}
        if len(sources) == 1 and all(len(unit_inputs.get(h, ())) == 1 for h, _ in units):
            f = sources.pop()
            key = (tuple(unit_inputs[h][0][1] for h, _ in units), tuple(b_in.get(h, 0.0) for h, _ in units),
                   tuple(w for _, w in units), b_out.get(d, 0.0), float(B[f]), float(B[d]), d == f)
            if key not in cache:
                cache[key] = one_input_range(ranges, *key, f"{p} output")
            new[d] = cache[key]
        else:
            size = sum(abs(w) * hidden[h] for h, w in units) * (1 + (len(units) + 2) * 2.0 ** -51) + abs(b_out.get(d, 0))
            new[d] = fmt.round_array(up(B[d] + fmt.round_array(up(size), f"{p} output")), f"{p} residual stream")
    for d in set(b_out) - set(writers):
        new[d] = fmt.round_array(up(B[d] + fmt.round_array(up(abs(b_out[d])), f"{p} output")), f"{p} residual stream")
    return new


def _layer(d: Description, fmt: Format, l: int, state: dict, writes: list) -> tuple[dict, dict]:
    task, layer, p = d.task, d.layers[l], f"blocks.{l}.attn"
    for bias in ("b_Q", "b_K", "b_V", "b_O"):
        require(layer[bias].vals.size == 0, f"{p}.{bias} must be zero")
    earlier = np.zeros(d.d_model, bool)
    for previous in writes[:l]:
        earlier |= previous
    token_dirs = set()
    for rules in d.tokens.values():
        token_dirs |= set(d.directions(rules))
    position_dirs = set()
    for rules in d.positions.values():
        position_dirs |= set(d.directions(rules))
    key_rows = set(layer["W_K"].rows.tolist())
    value_rows = set(layer["W_V"].rows.tolist())
    require(not key_rows & token_dirs and not earlier[list(key_rows)].any(),
            f"{p}'s keys read directions that depend on more than the position")
    require(not value_rows & position_dirs and not earlier[list(value_rows)].any(),
            f"{p}'s values read directions that depend on more than the token")

    # the score form M = W_Q W_K^T, exactly
    q_cols, k_cols = layer["W_Q"].columns, layer["W_K"].columns
    M: dict[tuple[int, int], Fraction] = {}
    for c, q_entries in q_cols.items():
        for i, wq in q_entries:
            for k, wk in k_cols.get(c, ()):
                M[i, k] = M.get((i, k), Fraction(0)) + Fraction(wq) * Fraction(wk)
    M = {key: value for key, value in M.items() if value}
    for i, _ in M:
        require(i in state, f"{p}'s query reads {i}, which is empty at the read position")

    classes = []
    for segment in task.segments:
        entries = d.directions(d.positions[segment.name])
        const, pairs = Fraction(0), []
        for (i, k), weight in M.items():
            if k not in entries:
                continue
            q, x = state[i], entries[k]
            if q[0] == "const" and x[0] == "const":
                const += weight * q[1] * x[1]
            elif q[0] == "code" and x[0] == "code":
                pairs.append((i, k, weight))
            else:
                require(False, f"{p}: a constant meets a code in the score of a {segment.name} key")
        require(len({i for i, _, _ in pairs}) == len(pairs) and len({k for _, k, _ in pairs}) == len(pairs),
                f"{p}: a query bit meets several key bits, or a key bit several query bits")
        classes.append({"segment": segment, "entries": entries, "const": const, "pairs": pairs})
    betas = {w for c in classes for _, _, w in c["pairs"]}
    require(len(betas) <= 1 and all(b > 0 for b in betas), f"{p}: the paired bits are not all weighted by one beta > 0")
    beta = betas.pop() if betas else Fraction(0)
    for c in classes:
        c["top"] = c["const"] + beta * len(c["pairs"])
    target = max(classes, key=lambda c: c["top"])
    wanted = "z0" if l == 0 else f"z{l}"
    require(target["segment"].name == wanted and sum(c["top"] == target["top"] for c in classes) == 1,
            f"{p}'s best keys are in {target['segment'].name}, but the task reads {wanted} at this step")
    _aligned(p, l, target, state)
    if d.task.prompt_length < 2 ** 50:  # no executor holds 2^50 tokens: there the verdict is about the exact model
        _float64_scores_exact(p, layer, state, classes)

    # step 3: the off-target mass, counted
    per_class = []
    with gmpy2.context(precision=PRECISION, round=gmpy2.RoundUp):  # every conversion, product and sum rounded up
        near = exp_rounded(-2 * beta, gmpy2.RoundUp, PRECISION)  # >= e^(-2 beta)
        total = gmpy2.mpfr(0)
        for c in classes:
            count, bits = c["segment"].length, len(c["pairs"])
            multiplicity = _multiplicity(d, c)
            if c is target:
                require(multiplicity == 1, f"{p}: two entries of {wanted} share the target's address code")
            remaining = count - (1 if c is target else 0)  # the target itself carries no off-target mass
            mass, h, binomial, power = gmpy2.mpfr(0), 0, 1, gmpy2.mpfr(1)
            while remaining > 0 and h <= bits:  # at most C(bits, h) multiplicity keys at distance h; closest first
                keys = min(binomial * multiplicity - (1 if c is target and h == 0 else 0), remaining)
                mass += gmpy2.mpfr(keys) * power
                remaining -= keys
                h += 1
                binomial = binomial * (bits - h + 1) // h
                power *= near
            require(remaining == 0, f"{p}: the keys of {c['segment'].name} outnumber their address patterns")
            mass *= exp_rounded(c["top"] - target["top"], gmpy2.RoundUp, PRECISION)
            total += mass
            per_class.append({"class": c["segment"].name, "keys": _integer(count), "paired_bits": bits,
                              "multiplicity": _integer(multiplicity), "score_below_target": number(target["top"] - c["top"]),
                              "mass_at_most": _text(mass)})
    # pi >= 1 / (1 + total): divided exactly in rationals, then rounded down. (An MPFR quotient under RoundDown
    # would round 1 + total down first: below 2^(1 - PRECISION) that is 1, and pi = 1 would claim the head output is
    # the target's value exactly, which a forged MLP can place a rounding tie on.)
    pi = lower_float(1 / (1 + Fraction(*total.as_integer_ratio())))

    fetched, new_state, writes_record = _fetch_and_mlp(d, fmt, l, state, writes, Fraction(pi))
    entry = {"layer": l, "beta": number(beta), "target_class": wanted, "target_score": number(target["top"]),
             "classes": per_class, "off_target_mass_at_most": _text(total), "target_weight_at_least": number(pi),
             "fetched": fetched, "writes": writes_record}
    return entry, new_state


def _float64_scores_exact(p: str, layer: dict, state: dict, classes: list) -> None:
    """The executor's theory run computes the read position's query, every key and their dot products in float64,
    and `numbers.float64_softmax_error` assumes those scores exact (the maximum subtracted exactly). Each query and
    key coordinate is a sum of terms weight * entry (a constant, or a code of magnitude 1), exact in any order by
    `numbers.float64_sums_exactly`; each score sum_c q_c k_c is then a sum of products of such, on the grid 2^G of
    their least exponent, and it and its difference from the maximum are exact when the magnitudes S of every
    class's products pass the same test at 2 S."""
    def coordinates(weights: dict, values: dict) -> dict[int, tuple[int, Fraction]]:
        out = {}
        for c, entries in weights.items():
            grid, size = None, Fraction(0)
            for row, w in entries:
                entry = values.get(row)
                x = Fraction(0) if entry is None else (entry[1] if entry[0] == "const" else Fraction(1))
                term = Fraction(w) * x
                if term:
                    grid = valuation(term) if grid is None else min(grid, valuation(term))
                    size += abs(term)
            if grid is not None:
                require(float64_sums_exactly(grid, size), f"{p}: a query or key coordinate is not exact in float64, "
                                                          "the executor's stand-in for theory's exact arithmetic")
                out[c] = (grid, size)
        return out

    query = coordinates(layer["W_Q"].columns, state)
    products = []
    for c in classes:
        key = coordinates(layer["W_K"].columns, c["entries"])
        products.append([(query[h][0] + key[h][0], query[h][1] * key[h][1]) for h in query.keys() & key.keys()])
    terms = [t for class_terms in products for t in class_terms]
    if terms:
        grid = min(g for g, _ in terms)
        size = max(sum((s for _, s in class_terms), Fraction(0)) for class_terms in products)
        require(float64_sums_exactly(grid, 2 * size),
                f"{p}: the scores are not exact in float64 (terms down to 2^{grid}, magnitudes up to "
                f"{float(size):.6g}), the executor's stand-in for theory's exact arithmetic")


def _aligned(p: str, l: int, target: dict, state: dict) -> None:
    """The target class's address bits meet, bit for bit, the query's bits of (w_{l-1}, i_{l-1})."""
    codes = {k for k, entry in target["entries"].items() if entry[0] == "code"}
    if l == 0:
        require(not target["pairs"], "blocks.0.attn: the seed's key has address bits")
        return
    require({k for _, k, _ in target["pairs"]} == codes, f"{p}: some address bit of z{l} is not matched by the query")
    for i, k, _ in target["pairs"]:
        _, source, key_bit = target["entries"][k]
        _, holds, query_bit = state[i]
        expected = f"i{l - 1}" if source == "address_low" else f"w{l - 1}"
        require(source in ("address_low", "address_high") and holds == expected and query_bit == key_bit,
                f"{p}: an address bit of z{l} meets bit {query_bit} of {holds}, not bit {key_bit} of {expected}")


def _multiplicity(d: Description, c: dict) -> int:
    """The most keys of class c that share one pattern of paired bits (step 3)."""
    segment, task = c["segment"], d.task
    if segment.name in ("z0", "w"):
        return 1
    level = int(segment.name[1:])
    sizes = task.sizes
    low_limit = sizes[level - 2] if level >= 2 else segment.length
    high_limit = segment.length // low_limit
    paired = {"address_low": set(), "address_high": set()}
    for entry in c["entries"].values():
        require(entry[0] == "const" or entry[1] in paired, f"a table key carries a {entry[1]} code")
    for _, k, _ in c["pairs"]:
        _, source, bit = c["entries"][k]
        paired[source].add(bit)
    return _free_count(low_limit, paired["address_low"]) * _free_count(high_limit, paired["address_high"])


def _fetch_and_mlp(d: Description, fmt: Format, l: int, state: dict, writes: list, pi: Fraction):
    """Step 4: the fetched intervals, the MLP's exact outputs, the next state."""
    layer, p = d.layers[l], f"blocks.{l}"
    value_of = layer["W_V"].columns  # head coordinate -> [(direction, weight)]
    value_class = d.directions(d.tokens["value"])
    token_entries = [d.directions(rules) for rules in d.tokens.values()]
    written_here = np.flatnonzero(writes[l]).tolist()
    empty = ("const", Fraction(0))
    for direction in written_here:
        require(state.get(direction, empty) == empty,
                f"layer {l} writes a direction that is not empty before it at the read position")

    # per attention-written direction: its stored interval when the fetched bit is set (code +1) and clear (-1), as
    # float64 lows and highs (format values, so exactly), 0 where nothing is fetched
    boxes = {sign: (_Zeros(), _Zeros()) for sign in (1, -1)}
    bit_of = {}
    stored: dict[tuple, dict] = {}  # (w_value, held, w_out) -> the two stored intervals, shared by like directions
    sharing: dict[tuple, int] = {}  # (w_value, held, w_out) -> how many directions share it
    # One nonzero term per head output direction: the head's float64 sum over value coordinates is exact. No
    # executor holds a prompt of 2^50 tokens (8 PiB of token ids), so there the verdict is about the exact model.
    n = d.task.prompt_length
    eps = Fraction(float64_softmax_error(n, 1)) if n < 2 ** 50 else Fraction(0)
    for direction, entries in layer["W_O"].columns.items():
        require(len(entries) == 1, f"{p}.attn: output direction {direction} mixes several head coordinates")
        (c, w_out), = entries
        require(len(value_of.get(c, ())) == 1, f"{p}.attn: value coordinate {c} does not read one direction")
        (source, w_value), = value_of[c]
        entry = value_class.get(source)
        require(entry is not None and entry[0] == "code" and entry[1] == "value",
                f"{p}.attn: a fetched coordinate does not carry a bit of the value token")
        bit_of[direction] = entry[2]
        # what each token class puts into `source` (tokens write nothing else there): a constant, or a code (±1)
        held = tuple(e[source][1] if e[source][0] == "const" else 1 for e in token_entries if source in e)
        key = (w_value, held, w_out)
        if key not in stored:
            # the values another position's token can put here, and V, the largest; the executor forms each in
            # float64, where under a wide format (fp64) the product of two format values may round, while V is the
            # exact model's: each must be a float64
            values = [Fraction(w_value) * x for x in held]
            require(all(Fraction(float(v)) == v for v in values),
                    f"{p}.attn: a value is not exact in float64, the executor's stand-in for theory")
            V = max((abs(v) for v in values), default=Fraction(0))
            stored[key] = {}
            for sign in (1, -1):
                v = Fraction(w_value) * sign
                ends = sorted((min(v, pi * v - (1 - pi) * V) * Fraction(w_out), max(v, pi * v + (1 - pi) * V)
                               * Fraction(w_out)))
                slack = eps * V * abs(Fraction(w_out))
                ends = [ends[0] - slack, ends[1] + slack]
                # the head output is stored; b_O = 0 and the empty residual add an exact zero, stored again
                stored[key][sign] = tuple(float(fmt.round(e, f"{p} head output")) for e in ends)
        sharing[key] = sharing.get(key, 0) + 1
        for sign in (1, -1):
            boxes[sign][0][direction], boxes[sign][1][direction] = stored[key][sign]
    mlp = MLP(fmt, False, *_mlp_columns(layer), f"{p}.mlp")
    emptied = set(written_here)
    new_state = {k: v for k, v in state.items() if k not in emptied}
    written = {}  # the value written (None: the fetched bit) -> how many directions
    fetched = set(bit_of)
    for direction in written_here:
        inputs = set(mlp.inputs(direction))
        require(inputs <= fetched, f"{p}.mlp reads directions its attention does not write")
        feeding = sorted(inputs | ({direction} & fetched))
        require(len(feeding) <= 1, f"{p}.mlp: direction {direction} depends on several fetched coordinates")
        set_, clear = (mlp.output(direction, *boxes[sign]) for sign in (1, -1))
        if set_ == clear:
            new_state[direction] = ("const", set_)
        else:
            require(set_ == 1 and clear == -1 and feeding,
                    f"{p}.mlp writes {set_} and {clear} for a set and a clear bit, not the code ±1")
            new_state[direction] = ("code", f"i{l}", bit_of[feeding[0]])
            set_ = None
        written[set_] = written.get(set_, 0) + 1
    intervals = {}
    for key, count in sharing.items():
        ends = (stored[key][1], stored[key][-1])
        intervals[ends] = intervals.get(ends, 0) + count
    fetched = [{"set": [number(x) for x in set_], "clear": [number(x) for x in clear], "directions": count}
               for (set_, clear), count in sorted(intervals.items())]
    writes_record = {f"bit of i{l}" if value is None else f"constant {number(value)}": count
                     for value, count in written.items()}
    return fetched, new_state, dict(sorted(writes_record.items()))


class _Zeros(dict):
    """Values by direction, 0 where none is listed."""

    def __missing__(self, key):
        return 0.0


def _mlp_columns(layer: dict):
    """(unit_inputs, b_in, writers, b_out) of `mlp.MLP` from sparse weights, entries in index order."""
    unit_inputs, writers = layer["W_in"].columns, layer["W_out"].columns
    b_in = dict(zip(layer["b_in"].cols.tolist(), layer["b_in"].vals.tolist()))
    b_out = dict(zip(layer["b_out"].cols.tolist(), layer["b_out"].vals.tolist()))
    return unit_inputs, b_in, writers, b_out


def _readout(d: Description, state: dict) -> dict:
    start, width = d.groups[d.readout]
    L = d.task.L
    for k in range(width):
        entry = state.get(start + k)
        require(entry is not None and entry[0] == "code" and entry[1] == f"i{L}" and entry[2] == k,
                f"the readout group {d.readout} does not hold the code of the answer i_{L}")
    require(d.task.value_vocab <= 1 << width, "the readout code is too narrow for the answers")
    # logit_v = <code(v), code(i_L)> = width - 2 hamming(v, i_L): the answer's logit is the unique best, by 2
    return {"group": d.readout, "code_bits": width, "worst_margin": 2}


def _integer(x: int) -> str:
    """An exact integer as text: decimal up to 3,000 digits, hexadecimal beyond (Python's decimal conversion of
    longer integers is quadratic and refused by default)."""
    return str(x) if x.bit_length() <= 9960 else hex(x)


def _text(x) -> str:
    return format(x, ".17g")
