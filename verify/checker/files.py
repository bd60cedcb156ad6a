"""What the checker reads: certificates (JSON) and weights files (.npz / .safetensors), with its own loader.

A weights file is a set of arrays under TransformerLens names plus a JSON header (in an .npz the uint8 array
`__witness_header__`, in a .safetensors file the metadata entry of that name). The checker takes from the header
only the structure (mixer kind and options per layer, whether it has an MLP, the read positions), the task and its
parameters, and the basis labels, and checks the arrays against the header's shapes and dtypes (a header without
dtypes, from before witness recorded them, is taken as it is); every array is converted to float64, and refused
unless that widening is lossless (it is for every dtype witness stores: int8, uint8, int16, float16, float32,
float64). Files are read without pickle.

The network's identity is the sha256 of its arrays (name, then float64 little-endian bytes, in name order) and its
structure (sorted-key JSON): a certificate names the network by it.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections import Counter
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
    structure = header.get("structure")
    require(isinstance(structure, dict) and isinstance(structure.get("layers"), list),
            f"{where}: the header has no layer structure")
    shapes = header.get("shapes")
    if shapes is not None:
        require(isinstance(shapes, dict) and set(shapes) == set(arrays), f"{where}: arrays do not match the header")
    dtypes = header.get("dtypes")
    if dtypes is not None:
        require(isinstance(dtypes, dict) and set(dtypes) == set(arrays), f"{where}: the header's dtypes do not name "
                                                                         "the arrays")
    converted = {}
    for name, array in arrays.items():
        require(array.dtype.kind in "fiu", f"{where}: {name} is not numeric ({array.dtype})")
        if shapes is not None:
            require(list(array.shape) == list(shapes[name]), f"{where}: {name} has shape {list(array.shape)}, the "
                                                              f"header says {shapes[name]}")
        if dtypes is not None:
            require(array.dtype.name == dtypes[name], f"{where}: {name} is stored as {array.dtype.name}, the header "
                                                      f"says {dtypes[name]}")
        converted[name] = np.asarray(array, dtype=np.float64)
        require(np.array_equal(converted[name].astype(array.dtype), array),
                f"{where}: {name} does not convert to float64 exactly")
    params = header.get("params") or {}
    require(isinstance(params, dict), f"{where}: the header's params are not an object")
    basis = header.get("basis") or ()
    require(isinstance(basis, (list, tuple)) and all(isinstance(b, str) for b in basis),
            f"{where}: the header's basis is not a list of labels")
    return Weights(converted, structure, header.get("task"), dict(params), tuple(basis))


def load_weights(path) -> Weights:
    path = Path(path)
    require(path.is_file(), f"{path}: no such file")
    try:
        if path.suffix == ".safetensors":
            with safetensors.safe_open(path, framework="numpy") as handle:
                metadata = handle.metadata() or {}
                arrays = {name: handle.get_tensor(name) for name in handle.keys()}
            raw = metadata.get(HEADER_KEY)
        else:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {name: archive[name] for name in archive.files}
            raw = arrays.pop(HEADER_KEY, None)
            raw = None if raw is None else raw.tobytes().decode("utf-8")
        require(raw is not None, f"{path}: no {HEADER_KEY} entry")
        header = json.loads(raw, object_pairs_hook=_unique_keys)
    except Refused:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError,
            safetensors.SafetensorError) as exc:
        raise Refused(f"{path}: not a readable weights file ({exc})") from None
    return weights_from_parts(arrays, header, str(path))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are unique: with a key twice, one reader would take the first, another the last, and
    the two would read different claims."""
    repeated = sorted(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
    require(not repeated, f"a JSON object repeats the key(s) {repeated}")
    return dict(pairs)


def load_certificate(path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            certificate = json.load(handle, object_pairs_hook=_unique_keys)
    except OSError as exc:
        raise Refused(f"{path}: cannot read ({exc.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise Refused(f"{path}: not JSON ({exc})") from None
    require(isinstance(certificate, dict) and certificate.get("kind") == CERTIFICATE_KIND,
            f"{path}: not a {CERTIFICATE_KIND}")
    require(certificate.get("version") == CERTIFICATE_VERSION,
            f"{path}: certificate version {certificate.get('version')!r}; this checker reads {CERTIFICATE_VERSION}")
    return certificate
