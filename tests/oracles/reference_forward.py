"""A plain GPT-2-style forward pass that reads only a saved .npz file; independent of witness.execute.

It knows the file format from the README alone: TransformerLens array names (stored in narrow dtypes where they
hold the values, so it widens each to float64), residual connections, no layer norm, no hidden 1/sqrt(d_head)
score scale, ReLU MLPs, and a JSON header of which it reads only the readout position (`structure.read`) and each
layer's causal flag (`structure.layers[l].causal`). Loops run over layers,
heads and query positions one at a time, so its summation order differs from the executor's batched matmuls.
"""

from __future__ import annotations

import json

import numpy as np

HEADER_KEY = "__witness_header__"


def load_npz(path) -> tuple[dict[str, np.ndarray], dict]:
    """Every array of the file by name, in float64, plus the decoded header; nothing is unpickled."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    head = json.loads(arrays.pop(HEADER_KEY).tobytes().decode("utf-8"))
    return {name: array.astype(np.float64) for name, array in arrays.items()}, head


def n_layers(arrays: dict[str, np.ndarray]) -> int:
    count = 0
    while f"blocks.{count}.attn.W_Q" in arrays:
        count += 1
    return count


def softmax(scores: np.ndarray) -> np.ndarray:
    shifted = np.exp(scores - scores.max())
    return shifted / shifted.sum()


def forward_one(arrays: dict[str, np.ndarray], head: dict, tokens) -> np.ndarray:
    """Logits [n_read, d_vocab_out] for one token sequence."""
    tokens = [int(t) for t in tokens]
    length = len(tokens)
    x = np.stack([arrays["embed.W_E"][t] + arrays["pos_embed.W_pos"][pos] for pos, t in enumerate(tokens)])
    for l in range(n_layers(arrays)):
        a = lambda name: arrays[f"blocks.{l}.attn.{name}"]  # noqa: E731
        causal = head["structure"]["layers"][l]["causal"]
        attention_out = np.tile(a("b_O"), (length, 1))
        for h in range(a("W_Q").shape[0]):
            q = x @ a("W_Q")[h] + a("b_Q")[h]
            k = x @ a("W_K")[h] + a("b_K")[h]
            v = x @ a("W_V")[h] + a("b_V")[h]
            for i in range(length):
                visible = i + 1 if causal else length
                weights = softmax(k[:visible] @ q[i])
                attention_out[i] += (weights @ v[:visible]) @ a("W_O")[h]
        x = x + attention_out
        if f"blocks.{l}.mlp.W_in" in arrays:
            p = lambda name: arrays[f"blocks.{l}.mlp.{name}"]  # noqa: E731
            x = x + np.maximum(x @ p("W_in") + p("b_in"), 0.0) @ p("W_out") + p("b_out")
    read = [length - 1] if head["structure"]["read"] == "last" else list(range(length))
    return x[read] @ arrays["unembed.W_U"] + arrays["unembed.b_U"]


def forward(path, batch) -> np.ndarray:
    """Logits [batch, n_read, d_vocab_out] of the network saved at `path` for every sequence of `batch`."""
    arrays, head = load_npz(path)
    return np.stack([forward_one(arrays, head, tokens) for tokens in np.atleast_2d(batch)])
