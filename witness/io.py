"""Weights files: `.npz` or `.safetensors` whose array keys are TransformerLens state-dict names, plus a JSON header.

The header (in .npz the array `__witness_header__` of UTF-8 JSON bytes, in .safetensors the metadata entry of that
name) carries the task, its parameters, the construction, the claimed format, the basis labels, the layer structure,
and every array's shape and dtype (docs/conventions.md §2). The dtypes are `witness.storage.STORAGE_DTYPES`: each
array is written in the dtype the network holds it in (a construction builds each in its narrowest), and a header
without dtypes (a file written before they were recorded) means float64 throughout. Files are read with
`allow_pickle=False`; anything truncated, malformed or inconsistent with its own header, or holding an array its
layer structure does not name (`witness.mixers.network_from_state`), is a FileFormatError.
"""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import safetensors
import safetensors.numpy

from witness.errors import FileFormatError, WitnessError
from witness.ir import Basis, Meta, Network
from witness.mixers import network_from_state
from witness.resources import require_memory
from witness.storage import STORAGE_DTYPES, seal

HEADER_KEY = "__witness_header__"
FILE_KIND = "witness-network"
FILE_VERSION = 1
SAFETENSORS_SUFFIX = ".safetensors"
STORAGE_DTYPE_NAMES = tuple(dtype.name for dtype in STORAGE_DTYPES)


def header(network: Network) -> dict[str, Any]:
    arrays = network.state_dict()
    meta = network.meta
    return {
        "kind": FILE_KIND,
        "version": FILE_VERSION,
        "task": meta.task,
        "params": meta.params,
        "construction": meta.construction,
        "claimed_format": meta.claimed_format,
        "notes": meta.notes,
        "basis": list(network.basis.labels),
        "structure": network.structure(),
        "shapes": {name: list(array.shape) for name, array in arrays.items()},
        "dtypes": {name: array.dtype.name for name, array in arrays.items()},
    }


def save(network: Network, path: str | Path) -> None:
    """Write `network` to `path`: safetensors when the name ends in `.safetensors` (the header JSON is then the
    metadata entry HEADER_KEY), .npz otherwise; the file name is used as given."""
    arrays = network.state_dict()
    encoded = json.dumps(header(network))
    try:
        with open(path, "wb") as handle:
            if Path(path).suffix == SAFETENSORS_SUFFIX:
                handle.write(safetensors.numpy.save(arrays, metadata={HEADER_KEY: encoded}))
            else:
                header_bytes = np.frombuffer(encoded.encode("utf-8"), dtype=np.uint8)
                np.savez(handle, **arrays, **{HEADER_KEY: header_bytes})
    except OSError as exc:  # a missing folder, no permission, a full disk: the user's to fix, so one line
        raise FileFormatError(f"{path}: cannot write ({exc.strerror or exc})") from None


def load(path: str | Path) -> Network:
    """Read a network written by `save` (.npz or, by its suffix, .safetensors); every problem with the file is
    one FileFormatError naming it. The header is read first, and a file whose arrays would not fit in memory is
    refused (`TooLarge`) before any of them is read; the arrays read become the network's own, without a copy."""
    path = Path(path)
    if path.is_dir():
        raise FileFormatError(f"{path}: is a folder, not a weights file")
    if not path.is_file():
        raise FileFormatError(f"{path}: no such file")
    if path.suffix == SAFETENSORS_SUFFIX:
        return _load_safetensors(path)
    if not zipfile.is_zipfile(path):
        raise FileFormatError(f"{path}: not an .npz weights file (not a zip archive)")
    try:
        with np.load(path, allow_pickle=False) as archive:
            if HEADER_KEY not in archive.files:
                raise FileFormatError(f"{path}: no {HEADER_KEY} entry; not written by witness")
            head = _decode_header(archive[HEADER_KEY], path)
            _require_room(head, path)
            arrays = {name: archive[name] for name in archive.files if name != HEADER_KEY}
            not_arrays = sorted(name for name, array in arrays.items() if not isinstance(array, np.ndarray))
            if not_arrays:
                raise FileFormatError(f"{path}: {not_arrays[:3]} are not .npy members (not arrays)")
            arrays = {name: seal(array) for name, array in arrays.items()}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError, RecursionError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise FileFormatError(f"{path}: not a readable .npz weights file ({type(exc).__name__})") from None
    return network_from_file_parts(head, arrays, str(path))


def _decode_header(raw: Any, path: Path) -> Any:
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8:
        raise FileFormatError(f"{path}: the {HEADER_KEY} entry is not the JSON header witness writes")
    try:
        return json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FileFormatError(f"{path}: header is not valid JSON ({type(exc).__name__}: {exc})") from None


def _require_room(head: Any, path: Path) -> None:
    """Refuse, before reading, arrays whose header shapes and dtypes would not fit (each is read once and kept)."""
    if not isinstance(head, dict) or head.get("kind") != FILE_KIND:
        raise FileFormatError(f"{path}: header does not describe a {FILE_KIND}")
    shapes = head.get("shapes")
    if not isinstance(shapes, dict):
        raise FileFormatError(f"{path}: header has no array shapes")
    dtypes = head.get("dtypes", dict.fromkeys(shapes, "float64"))
    if not isinstance(dtypes, dict) or set(dtypes) != set(shapes):
        raise FileFormatError(f"{path}: header's dtypes do not name the arrays its shapes do")
    total = 0
    for name, shape in shapes.items():
        if not isinstance(shape, list) or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                                                  for v in shape):
            raise FileFormatError(f"{path}: header gives {name} the shape {shape!r}")
        if dtypes[name] not in STORAGE_DTYPE_NAMES:
            raise FileFormatError(f"{path}: header gives {name} the dtype {dtypes[name]!r}; arrays are stored as "
                                  f"{', '.join(STORAGE_DTYPE_NAMES)}")
        total += np.dtype(dtypes[name]).itemsize * math.prod(shape)
    require_memory(total, f"loading {path}")


def _load_safetensors(path: Path) -> Network:
    try:
        with safetensors.safe_open(path, framework="numpy") as handle:
            metadata = handle.metadata() or {}
            if HEADER_KEY not in metadata:
                raise FileFormatError(f"{path}: no {HEADER_KEY} metadata entry; not written by witness")
            try:
                head = json.loads(metadata[HEADER_KEY])
            except (json.JSONDecodeError, RecursionError) as exc:
                raise FileFormatError(f"{path}: header is not valid JSON ({exc})") from None
            _require_room(head, path)
            arrays = {name: _read_only(_tensor(handle, name, path)) for name in handle.keys()}
    except (safetensors.SafetensorError, OSError, ValueError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise FileFormatError(f"{path}: not a readable .safetensors weights file ({exc})") from None
    return network_from_file_parts(head, arrays, str(path))


def _tensor(handle, name: str, path: Path) -> np.ndarray:
    try:
        return handle.get_tensor(name)
    except (TypeError, AttributeError) as exc:  # a dtype numpy lacks (BF16, F8_*): no witness file holds one
        raise FileFormatError(f"{path}: {name} has a dtype numpy cannot read ({exc})") from None


def _read_only(tensor: np.ndarray) -> np.ndarray:
    """`tensor` through a read-only view of its memory: safetensors hands out arrays over a writable buffer that
    nothing else holds, which the IR would copy (`witness.storage.is_sealed`); seen this way it keeps them."""
    return np.frombuffer(memoryview(tensor).toreadonly(), dtype=tensor.dtype).reshape(tensor.shape)


def network_from_file_parts(head: Any, arrays: dict[str, np.ndarray], where: str) -> Network:
    """Check a decoded header against the arrays and build the network (shared by every file format)."""
    if not isinstance(head, dict) or head.get("kind") != FILE_KIND:
        raise FileFormatError(f"{where}: header does not describe a {FILE_KIND}")
    if head.get("version") != FILE_VERSION:
        raise FileFormatError(f"{where}: file version {head.get('version')!r}, this witness reads {FILE_VERSION}")
    shapes = head.get("shapes")
    if not isinstance(shapes, dict):
        raise FileFormatError(f"{where}: header has no array shapes")
    if set(shapes) != set(arrays):
        missing, extra = sorted(set(shapes) - set(arrays)), sorted(set(arrays) - set(shapes))
        raise FileFormatError(f"{where}: arrays do not match the header (missing {missing[:5]}, extra {extra[:5]})")
    for name, array in arrays.items():
        if list(array.shape) != shapes[name]:
            raise FileFormatError(f"{where}: {name} has shape {list(array.shape)}, header says {shapes[name]}")
        if array.dtype.kind not in "fiu":
            raise FileFormatError(f"{where}: {name} has non-numeric dtype {array.dtype}")
    try:
        meta = Meta(task=head.get("task"), params=dict(head.get("params") or {}),
                    construction=head.get("construction"), claimed_format=head.get("claimed_format"),
                    notes=dict(head.get("notes") or {}))
        network = network_from_state(arrays, head.get("structure"), Basis(tuple(head.get("basis") or ())), meta)
        network.task  # validates the task parameters named in the header
    except FileFormatError as exc:
        raise FileFormatError(f"{where}: {exc}") from None
    except (WitnessError, TypeError, ValueError) as exc:
        raise FileFormatError(f"{where}: inconsistent network ({exc})") from None
    dtypes = head.get("dtypes")
    for name, array in arrays.items():
        if dtypes is not None and array.dtype.name != dtypes[name]:
            raise FileFormatError(f"{where}: {name} is stored as {array.dtype.name}, the header says {dtypes[name]}")
    return network
