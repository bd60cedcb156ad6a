"""Slow, literal re-implementations of docs/conventions.md §1 for the tests: nothing here calls witness's task code.

Everything follows the specification text directly, position by position and pair by pair, so that a test
comparing witness against these functions compares two independent readings of docs/conventions.md.
"""

from __future__ import annotations

import itertools


def domain_sizes(m: int, n: tuple[int, ...]) -> list[int]:
    """N_0 = m, N_l = n_l * N_{l-1}."""
    sizes = [m]
    for n_l in n:
        sizes.append(n_l * sizes[-1])
    return sizes


def query_id(m: int, n: tuple[int, ...], w: tuple[int, ...]) -> int:
    """V + enc(w) with V = N_{L-1} and enc(w) = w_1 + n_1 * w_2 + n_1 * n_2 * w_3 + ... (the mixed radix)."""
    enc, weight = 0, 1
    for w_l, n_l in zip(w, n):
        enc += w_l * weight
        weight *= n_l
    return domain_sizes(m, n)[-1] + enc


def composition_chain(m: int, n: tuple[int, ...], z0: int, tables, w) -> list[int]:
    """[i_0, i_1, ..., i_L]: i_0 = z_0, i_1 = z_1(i_0), i_{l+1} = z_{l+1}(w_l * N_{l-1} + i_l)."""
    sizes = domain_sizes(m, n)
    chain = [z0, tables[0][z0]]
    for l in range(1, len(tables)):
        chain.append(tables[l][w[l - 1] * sizes[l - 1] + chain[l]])
    return chain


def composition_pair_chain(m: int, n: tuple[int, ...], z0: int, tables, w) -> list[int]:
    """[a_1, ..., a_L, i_L]: a_1 = z_0 is where z_1 is read; then, hop by hop, i = z_l(a_l) and the next address
    a_{l+1} = w_l * N_{l-1} + i (the pair (w_l, i) as §1.1 packs it); the last entry is the final i = i_L."""
    sizes = domain_sizes(m, n)
    addresses, address = [], z0
    for l, table in enumerate(tables, start=1):
        addresses.append(address)
        value = table[address]
        if l < len(tables):
            address = w[l - 1] * sizes[l - 1] + value
    return addresses + [value]


def composition_token_list(m: int, n: tuple[int, ...], z0: int, tables, w, layout: str) -> list[int]:
    """`paper`: [z_L table] ... [z_1 table] [z_0] [w]; `forward`: [w] [z_0] [z_1 table] ... [z_L table]."""
    query = query_id(m, n, w)
    if layout == "paper":
        out = []
        for table in reversed(tables):
            out.extend(table)
        return out + [z0, query]
    out = [query, z0]
    for table in tables:
        out.extend(table)
    return out


def parse_composition_tokens(m: int, n: tuple[int, ...], tokens, layout: str):
    """(z0, tables, w) read back from a token list, walking the layout of docs/conventions.md §1.1."""
    sizes = domain_sizes(m, n)
    L = len(n) + 1
    tokens = [int(t) for t in tokens]
    if layout == "forward":
        query, z0, rest = tokens[0], tokens[1], tokens[2:]
        tables, start = [], 0
        for l in range(1, L + 1):
            tables.append(tuple(rest[start:start + sizes[l - 1]]))
            start += sizes[l - 1]
    else:
        tables_rev, start = [], 0
        for l in range(L, 0, -1):
            tables_rev.append(tuple(tokens[start:start + sizes[l - 1]]))
            start += sizes[l - 1]
        tables = tables_rev[::-1]
        z0, query = tokens[start], tokens[start + 1]
    enc = query - sizes[-1]
    w = []
    for n_l in n:
        w.append(enc % n_l)
        enc //= n_l
    return z0, tuple(tables), tuple(w)


def composition_answer_from_tokens(m: int, n: tuple[int, ...], tokens, layout: str = "paper") -> int:
    z0, tables, w = parse_composition_tokens(m, n, tokens, layout)
    return composition_chain(m, n, z0, tables, w)[-1]


def composition_alphabets(m: int, n: tuple[int, ...], layout: str) -> list[range]:
    """The allowed token ids at every position, straight from docs/conventions.md §1.1."""
    sizes = domain_sizes(m, n)
    V, queries = sizes[-1], 1
    for n_l in n:
        queries *= n_l
    paper = [range(sizes[l - 1]) for l in range(len(sizes), 0, -1) for _ in range(sizes[l - 1])]
    paper += [range(m), range(V, V + queries)]
    if layout == "paper":
        return paper
    return [range(V, V + queries), range(m)] + [range(sizes[l]) for l in range(len(sizes)) for _ in range(sizes[l])]


def all_composition_inputs(m: int, n: tuple[int, ...], layout: str = "paper"):
    """Every token sequence of the family, by itertools.product over the per-position alphabets."""
    return itertools.product(*composition_alphabets(m, n, layout))


def two_sum_answer(x, M: int, t: int, causal: bool) -> list[int]:
    """y_i = 1 iff some j != i (causal: j < i) has x_i + x_j = t (mod M); brute force over all pairs."""
    out = []
    for i in range(len(x)):
        hit = 0
        for j in range(len(x)):
            allowed = j < i if causal else j != i
            if allowed and (int(x[i]) + int(x[j])) % M == t:
                hit = 1
        out.append(hit)
    return out
