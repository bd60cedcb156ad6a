"""What the checker reads: certificates (JSON) and weights files (.npz / .safetensors), with its own loader.

A weights file is a set of arrays under TransformerLens names plus a JSON header (in an .npz the uint8 array
`__witness_header__`, in a .safetensors file the metadata entry of that name). The checker reads a file only where
the executor would load it: the header's kind and version are witness's, its shapes name every array (a header
without dtypes, from before witness recorded them, is taken as it is; dtypes, where given, are among the ones
witness stores: int8, uint8, int16, float16, float32, float64, from each of which the widening to float64 is
lossless), the arrays' shapes agree with each other (`_require_consistent`) as the executor's network requires, and
every array is one the layer structure names (another is run by a reader that runs every block it finds, never by
the executor or the proof).
It takes from the header only the structure (mixer kind and options per layer, whether it has an MLP, the read
positions), the task and its parameters, and the basis labels. Files are read without pickle.

The network's identity is the sha256 of its arrays (name, then float64 little-endian bytes, in name order) and its
structure (sorted-key JSON): a certificate names the network by it.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

from verify.checker.refusal import Refused, require

HEADER_KEY = "__witness_header__"
CERTIFICATE_KIND = "witness-certificate"
CERTIFICATE_VERSION = 2
NETWORK_KIND = "witness-network"
NETWORK_VERSION = 1
#: The mixer kinds a proof reads, each through the projections W_Q, W_K, W_V, W_O and their biases.
PROJECTED_KINDS = ("attention", "linear", "block_sparse")
STORED_DTYPES = ("int8", "uint8", "int16", "float16", "float32", "float64")
#: A projected layer's arrays under `blocks.{l}.attn`, and an MLP's under `blocks.{l}.mlp`.
PROJECTIONS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O")
MLP_ARRAYS = ("W_in", "b_in", "W_out", "b_out")
#: How many unnamed arrays a refusal lists.
SHOWN = 4


@dataclass(frozen=True)
class Weights:
    """A network as the checker sees it."""

    arrays: dict[str, np.ndarray]
    structure: dict[str, Any]
    task: str | None
    params: dict[str, Any]
    basis: tuple[str, ...]

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for name, array in sorted(self.arrays.items()):
            digest.update(name.encode())
            digest.update(np.ascontiguousarray(array, dtype="<f8").tobytes())
        digest.update(json.dumps(self.structure, sort_keys=True).encode())
        return digest.hexdigest()

    def array(self, name: str) -> np.ndarray:
        require(name in self.arrays, f"the network has no array {name}")
        return self.arrays[name]


def weights_from_parts(arrays: dict[str, np.ndarray], header: dict[str, Any], where: str = "the network") -> Weights:
    require(isinstance(header, dict), f"{where}: the header is not a JSON object")
    require(header.get("kind") == NETWORK_KIND, f"{where}: the header's kind is {header.get('kind')!r}, not "
                                                f"{NETWORK_KIND!r}")
    require(header.get("version") == NETWORK_VERSION, f"{where}: file version {header.get('version')!r}; this "
                                                      f"checker reads {NETWORK_VERSION}")
    structure = header.get("structure")
    require(isinstance(structure, dict) and isinstance(structure.get("layers"), list),
            f"{where}: the header has no layer structure")
    shapes = header.get("shapes")
    require(isinstance(shapes, dict) and set(shapes) == set(arrays), f"{where}: the header's shapes do not name the "
                                                                     "arrays")
    dtypes = header.get("dtypes")
    if dtypes is not None:
        require(isinstance(dtypes, dict) and set(dtypes) == set(arrays), f"{where}: the header's dtypes do not name "
                                                                         "the arrays")
    converted = {}
    for name, array in arrays.items():
        require(isinstance(array, np.ndarray), f"{where}: {name} is not an array")
        shape = shapes[name]
        require(isinstance(shape, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in shape),
                f"{where}: the header gives {name} the shape {shape!r}")
        require(list(array.shape) == shape, f"{where}: {name} has shape {list(array.shape)}, the header says {shape}")
        require(array.dtype.name in STORED_DTYPES, f"{where}: {name} is stored as {array.dtype}; witness stores "
                                                   f"{', '.join(STORED_DTYPES)}")
        if dtypes is not None:
            require(array.dtype.name == dtypes[name], f"{where}: {name} is stored as {array.dtype.name}, the header "
                                                      f"says {dtypes[name]}")
        converted[name] = np.asarray(array, dtype=np.float64)
    params = header.get("params") or {}
    require(isinstance(params, dict), f"{where}: the header's params are not an object")
    basis = header.get("basis") or ()
    require(isinstance(basis, (list, tuple)) and all(isinstance(b, str) for b in basis),
            f"{where}: the header's basis is not a list of labels")
    weights = Weights(converted, structure, header.get("task"), dict(params), tuple(basis))
    _require_consistent(weights, where)
    return weights


def _require_consistent(weights: Weights, where: str) -> None:
    """The arrays' shapes agree as the executor's network requires: embedding W_E [vocab, d], W_pos [n_ctx, d];
    per layer the projections W_Q, W_K [H, d, d_k], W_V [H, d, d_v], W_O [H, d_v, d], b_Q, b_K [H, d_k],
    b_V [H, d_v], b_O [d] (d_v = d_k but in linear attention) and, where the layer has an MLP, W_in [d, f],
    b_in [f], W_out [f, d], b_out [d]; the readout W_U [d, vocab_out], b_U [vocab_out]; d unique basis labels.
    Layers of kinds outside PROJECTED_KINDS are left to the proof, which refuses them. A proof reads an array by
    its name alone, so an array of another shape would be read as something the executor refuses to run.

    Every array is one of those (the MLP's only where the structure gives the layer one): the executor and the
    proof never read another, but a reader that runs every `blocks.{l}` it finds (TransformerLens-style) would, so
    a third block in a two-layer file could answer wrong under a confirmed certificate. Under a layer of a kind
    outside PROJECTED_KINDS this checker does not know the kind's arrays, so it leaves that layer's
    `blocks.{l}.attn.*` alone: the proof refuses the kind, so no certificate of such a file is confirmed."""
    arrays = weights.arrays

    def shape_of(name: str) -> tuple[int, ...]:
        require(name in arrays, f"{where}: the network has no array {name}")
        return arrays[name].shape

    def expect(name: str, shape: tuple[int, ...]) -> None:
        require(shape_of(name) == shape, f"{where}: {name} has shape {list(shape_of(name))}, its neighbours make it "
                                         f"{list(shape)}")

    W_E = shape_of("embed.W_E")
    require(len(W_E) == 2, f"{where}: embed.W_E has shape {list(W_E)}, not [vocab, d_model]")
    d = W_E[1]
    W_pos = shape_of("pos_embed.W_pos")
    require(len(W_pos) == 2 and W_pos[1] == d, f"{where}: pos_embed.W_pos has shape {list(W_pos)}, not [n_ctx, {d}]")
    named = {"embed.W_E", "pos_embed.W_pos", "unembed.W_U", "unembed.b_U"}
    unread_kinds = []  # the attn prefixes of layers whose kind no proof reads
    for l, layer in enumerate(weights.structure["layers"]):
        if isinstance(layer, dict) and layer.get("mlp"):
            named.update(f"blocks.{l}.mlp.{name}" for name in MLP_ARRAYS)
        if not isinstance(layer, dict) or layer.get("mixer") not in PROJECTED_KINDS:
            unread_kinds.append(f"blocks.{l}.attn.")
            continue  # a kind no proof reads: the proof refuses it by name
        attn = f"blocks.{l}.attn"
        named.update(f"{attn}.{name}" for name in PROJECTIONS)
        W_Q, W_V = shape_of(f"{attn}.W_Q"), shape_of(f"{attn}.W_V")
        require(len(W_Q) == 3 and len(W_V) == 3, f"{where}: {attn}.W_Q and W_V are not [H, d_model, d_head]")
        H, d_k, d_v = W_Q[0], W_Q[2], W_V[2]
        require(layer["mixer"] == "linear" or d_v == d_k, f"{where}: {attn}.W_V has d_v {d_v}, W_Q d_k {d_k}; softmax "
                                                          "heads have one width")
        for name, shape in zip(PROJECTIONS, ((H, d, d_k), (H, d, d_k), (H, d, d_v), (H, d_v, d), (H, d_k), (H, d_k),
                                             (H, d_v), (d,))):
            expect(f"{attn}.{name}", shape)
        if layer.get("mlp"):
            mlp = f"blocks.{l}.mlp"
            W_in = shape_of(f"{mlp}.W_in")
            require(len(W_in) == 2, f"{where}: {mlp}.W_in has shape {list(W_in)}, not [d_model, d_mlp]")
            f = W_in[1]
            for name, shape in zip(MLP_ARRAYS, ((d, f), (f,), (f, d), (d,))):
                expect(f"{mlp}.{name}", shape)
    W_U = shape_of("unembed.W_U")
    require(len(W_U) == 2, f"{where}: unembed.W_U has shape {list(W_U)}, not [d_model, vocab_out]")
    expect("unembed.W_U", (d, W_U[1]))
    expect("unembed.b_U", (W_U[1],))
    require(len(weights.basis) == d, f"{where}: the basis has {len(weights.basis)} labels, d_model is {d}")
    require(len(set(weights.basis)) == d, f"{where}: the basis repeats a label")
    unnamed = sorted(name for name in arrays if name not in named and not name.startswith(tuple(unread_kinds)))
    more = f", and {len(unnamed) - SHOWN} more" if len(unnamed) > SHOWN else ""
    require(not unnamed, f"{where}: arrays the layer structure does not use: {', '.join(unnamed[:SHOWN])}{more} (a "
                         "reader that runs every block it finds would run them)")


def load_weights(path) -> Weights:
    path = Path(path)
    require(path.is_file(), f"{path}: no such file")
    try:
        if path.suffix == ".safetensors":
            with safetensors.safe_open(path, framework="numpy") as handle:
                metadata = handle.metadata() or {}
                arrays = {name: _tensor(handle, name, path) for name in handle.keys()}
            raw = metadata.get(HEADER_KEY)
        else:
            require(zipfile.is_zipfile(path), f"{path}: not a zip archive (an .npz weights file is one)")
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
            raw = arrays.pop(HEADER_KEY, None)
            if raw is not None:
                require(isinstance(raw, np.ndarray) and raw.dtype == np.uint8 and raw.ndim == 1,
                        f"{path}: the {HEADER_KEY} entry is not the uint8 array witness writes")
                raw = raw.tobytes().decode("utf-8")
        require(raw is not None, f"{path}: no {HEADER_KEY} entry")
        header = json.loads(raw, object_pairs_hook=_unique_keys)
    except Refused:
        raise
    except (OSError, ValueError, KeyError, EOFError, RecursionError, zipfile.BadZipFile, UnicodeDecodeError,
            safetensors.SafetensorError) as exc:  # RecursionError: JSON nested deeper than Python's stack
        raise Refused(f"{path}: not a readable weights file ({type(exc).__name__}: {exc})") from None
    return weights_from_parts(arrays, header, str(path))


def _tensor(handle, name: str, path) -> np.ndarray:
    try:
        return handle.get_tensor(name)
    except (TypeError, AttributeError) as exc:  # a dtype numpy lacks (BF16, F8_*): no witness file holds one
        raise Refused(f"{path}: {name} has a dtype numpy cannot read ({exc})") from None


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: with a key twice, one reader would take the first, another the last, and
    the two would read different claims."""
    repeated = sorted(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
    require(not repeated, f"a JSON object repeats the key(s) {repeated}")
    return dict(pairs)


#: The most decimal digits an integer of a certificate may have, written or read: about 3x the longest committed
#: (102,253 digits in the L = 3 separation's certificate). Python converts decimal text in quadratic time (a
#: million digits take about 7 s), so a longer number is refused rather than read.
CERTIFICATE_DIGITS = 300_000


@contextmanager
def whole_integers() -> Iterator[None]:
    """Python's limit on the digits of an int written as or read from decimal text (4,300 by default) raised to
    CERTIFICATE_DIGITS, and put back after: a certificate at the theorems' scale holds integers of tens of
    thousands of digits (at L = 2, m = 2^10312 has 3,105), and JSON writes ints in decimal."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: None)()
    if limit is not None:
        sys.set_int_max_str_digits(0 if limit == 0 else max(limit, CERTIFICATE_DIGITS))
    try:
        yield
    finally:
        if limit is not None:
            sys.set_int_max_str_digits(limit)


def write_certificate(certificate: dict[str, Any], path) -> None:
    """`certificate` as JSON at `path`, whole however long its integers (OSError where the file cannot be written)."""
    with whole_integers():
        text = json.dumps(certificate)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def load_certificate(path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle, whole_integers():
            certificate = json.load(handle, object_pairs_hook=_unique_keys)
    except OSError as exc:
        raise Refused(f"{path}: cannot read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # ValueError: bad JSON or an integer too long
        raise Refused(f"{path}: not JSON ({type(exc).__name__}: {exc})") from None
    require(isinstance(certificate, dict) and certificate.get("kind") == CERTIFICATE_KIND,
            f"{path}: not a {CERTIFICATE_KIND}")
    require(certificate.get("version") == CERTIFICATE_VERSION,
            f"{path}: certificate version {certificate.get('version')!r}; this checker reads {CERTIFICATE_VERSION}")
    return certificate
