"""The online softmax, tile by tile (FlashAttention-2, Dao 2023, Algorithm 1): each block of query rows
walks the key blocks in order, carrying per row the running maximum m, the running sum l and the
unnormalised output O~, rescaling what it holds by alpha = exp(m_previous - m_new) whenever the
maximum rises, and never holding the n x n weights. At the end O = diag(l)^-1 O~ equals softmax(S) V
and L = m + log l is each row's log-sum-exp. A tile whose every key is hidden from every query in
its block is `skipped` (never computed); one partly hidden (on the diagonal) is `masked` inside.

It runs over the keys and values the pass computed (each query head's, after RoPE; a latent's made
naive), so `max_difference_from_plain` measures the online softmax alone. The three ways of getting
it wrong (`SLIPS`) are computed as the broken code would; `first_difference` finds where one parts.

Shapes: H heads, n positions, d_v a head's value width, a tile Bq query rows by Bk keys.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .engine import multi_head_attention
from .errors import AttentionInputError
from .failure_modes import REGISTRY, Recipe, recipe_of
from .latent import naive

SLIPS = tuple(mode.id for mode in REGISTRY.values() if mode.tiled)  # the registry's tiled failure modes
# What a first difference can be at a tile, in the order computed. alpha is shown, not compared: where a
# row held nothing (m = -inf) it rescales nothing, and code that fixes it at 1 there computes the same.
STAGES = ("status", "m", "l", "o_tilde")


@dataclass(frozen=True, eq=False)
class Tile:
    """One tile of one head, and each of its query rows' running values after it (None: skipped)."""

    query_block: int
    key_block: int
    rows: tuple[int, int]  # [start, end) query positions
    keys: tuple[int, int]  # [start, end) key positions
    status: str  # computed | masked | skipped
    m: np.ndarray | None = None  # [Bq] the running maximum; -inf where the row has seen no key yet
    alpha: np.ndarray | None = None  # [Bq] exp(m_previous - m_new): what the rows' sums were rescaled by
    l: np.ndarray | None = None  # noqa: E741 (the paper's name) [Bq] the running sum of exp(s - m)
    o_tilde: np.ndarray | None = None  # [Bq, d_v] the unnormalised output
    m_before: np.ndarray | None = None  # [Bq] the maximum the tile started from: what the loop carried to it


@dataclass(frozen=True, eq=False)
class TiledHead:
    tiles: tuple[Tile, ...]  # in the order computed: query blocks, then key blocks within each
    output: np.ndarray  # [n, d_v] diag(l)^-1 O~; a row that saw no key is 0
    lse: np.ndarray  # [n] L = m + log l over the visible scores; -inf where the row saw no key
    sink: dict[str, np.ndarray] | None  # under a sink logit: m, alpha, l once it joined, and its share of the row


@dataclass(frozen=True, eq=False)
class TiledPass:
    block_q: int
    block_k: int
    slip: str | tuple[str, ...] | None
    heads: tuple[TiledHead, ...]
    plain_outputs: np.ndarray  # [H, n, d_v] the engine's plain pass, the same request
    plain_lse: np.ndarray  # [H, n] the log-sum-exp of each row's visible scores

    @property
    def counts(self) -> dict[str, int]:
        """Tiles per head: computed (masked ones included), of which masked, and skipped."""
        statuses = [t.status for t in self.heads[0].tiles]
        skipped = statuses.count("skipped")
        return {"computed": len(statuses) - skipped, "masked": statuses.count("masked"), "skipped": skipped}

    @property
    def memory(self) -> dict[str, int]:
        """Numbers held at once per head beside Q, K, V and the output: one tile's scores and its rows'
        m and l, against the n x n weights the plain pass holds."""
        n = self.plain_outputs.shape[1]
        return {"tiled": self.block_q * self.block_k + 2 * self.block_q, "plain": n * n}

    @property
    def max_difference_from_plain(self) -> float:
        tiled = np.stack([head.output for head in self.heads])  # [H, n, d_v]
        return float(np.abs(tiled - self.plain_outputs).max(initial=0.0))


def tiled_attention(
    x, heads: int, *, block_q: int, block_k: int, slip: str | tuple[str, ...] | None = None, **engine
) -> TiledPass:
    """The pass of `multi_head_attention(x, heads, **engine)`, its softmax computed online in tiles of
    `block_q` query rows by `block_k` keys (each 1 to n), as `slip` would get it wrong (None: right;
    several at once, as the exercise's starter makes them, given as a tuple)."""
    slips = (slip,) if isinstance(slip, str) else tuple(slip or ())
    if unknown := [s for s in slips if s not in SLIPS]:
        raise AttentionInputError(
            f"unknown failure mode {unknown[0]!r}; expected one of {sorted(SLIPS)}", "failure_mode"
        )
    plain = multi_head_attention(x, heads, **naive(engine))
    n = plain.config.n
    for name, block in (("block_q", block_q), ("block_k", block_k)):
        if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= n:
            raise AttentionInputError(f"{name} must be a whole number from 1 to n = {n}, got {block!r}", name)
    sink, keys, values = plain.config.reach.sink_logit, plain.key, plain.value
    assert keys is not None and values is not None  # made whole: a latent is tiled in its naive form
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        done = tuple(
            _head(
                plain.query[h],
                keys[h],
                values[h],
                plain.mask,
                plain.config.scale,
                (block_q, block_k),
                recipe_of(*slips),
                None if sink is None else sink[h],
            )
            for h in range(heads)
        )
        lse = _plain_lse(plain.scores, plain.mask)
    return TiledPass(block_q, block_k, slip, done, plain.head_outputs, lse)


def _head(q, k, v, hidden, scale: float, blocks: tuple[int, int], how: Recipe, sink) -> TiledHead:
    """One head: q [n, d], k [n, d], v [n, d_v], hidden [n, n] True where a query does not see a key; `how`
    the loop's recipe (its `rescale`, `carry` and `diagonal`, applied through the tables below)."""
    n, (bq, bk) = q.shape[0], blocks
    tiles: list[Tile] = []
    output, lse = np.zeros((n, v.shape[1])), np.full(n, -np.inf)
    joined: dict[str, list[np.ndarray]] = {"m": [], "alpha": [], "l": [], "share": []}
    for i, r0 in enumerate(range(0, n, bq)):
        rows = slice(r0, min(r0 + bq, n))
        m = m_new = np.full(rows.stop - r0, -np.inf)  # m: what is carried; m_new: the last tile's
        total, o = np.zeros(rows.stop - r0), np.zeros((rows.stop - r0, v.shape[1]))
        for j, c0 in enumerate(range(0, n, bk)):
            keys = slice(c0, min(c0 + bk, n))
            status = STATUS[how.diagonal](hidden[rows, keys])
            if status == "skipped":
                tiles.append(Tile(i, j, (r0, rows.stop), (c0, keys.stop), status))
                continue
            s = np.where(hidden[rows, keys], -np.inf, q[rows] @ k[keys].T * scale)  # [Bq, Bk] the tile's scores
            carried = m
            m_new, alpha, total, o = _update(m, total, o, s, v[keys], RESCALE[how.rescale])
            m = CARRY[how.carry](m, m_new)
            tiles.append(Tile(i, j, (r0, rows.stop), (c0, keys.stop), status, m_new, alpha, total, o, carried))
        seen = total > 0
        lse[rows] = np.where(seen, m_new + np.log(np.where(seen, total, 1.0)), -np.inf)  # L = m + log l, visible
        if sink is not None:
            m_new, alpha, total, o = _join_sink(m_new, total, o, sink)
            share = np.exp(sink - m_new) / total  # exp(z) / (exp(z) + sum exp(s)) = sigmoid(z - L)
            for name, value in (("m", m_new), ("alpha", alpha), ("l", total), ("share", share)):
                joined[name].append(value)
        seen = total > 0
        output[rows] = np.where(seen[:, None], o / np.where(seen, total, 1.0)[:, None], 0.0)  # diag(l)^-1 O~
    sink_values = None if sink is None else {name: np.concatenate(parts) for name, parts in joined.items()}
    return TiledHead(tuple(tiles), output, lse, sink_values)


# A tile's status from which of its cells are hidden [Bq, Bk]: skipped when no query of the block sees any of
# its keys, masked when some do not, computed when every one does (`diagonal`: the slip skips masked ones too).
STATUS = {
    "masked": lambda hidden: "skipped" if hidden.all() else "masked" if hidden.any() else "computed",
    "skipped": lambda hidden: "skipped" if hidden.any() else "computed",
}
# What the rows held is scaled by when the maximum rises from m to m_new (exp(m - m_new); the slip: 1), and
# what is carried to the next tile (m_new; the slip: what was carried before, never written back).
RESCALE = {"alpha": lambda m, shift: np.exp(m - shift), "none": lambda m, shift: np.ones_like(m)}
CARRY = {"max": lambda m, m_new: m_new, "none": lambda m, m_new: m}


def _update(m, total, o, s, v, rescale):
    """One tile's step: m [Bq], l (`total`) [Bq], o [Bq, d_v], scores s [Bq, Bk] (-inf where hidden),
    v [Bk, d_v]. m_new = max(m, rowmax s); alpha = exp(m - m_new); P = exp(s - m_new); l = alpha l + rowsum P;
    O~ = alpha O~ + P v. A row that has still seen nothing keeps m = -inf, l = 0, O~ = 0."""
    m_new = np.maximum(m, s.max(axis=1))  # [Bq]
    shift = np.where(np.isfinite(m_new), m_new, 0.0)  # exp(-inf - 0) = 0 where nothing is seen yet
    alpha = rescale(m, shift)  # [Bq]
    p = np.exp(s - shift[:, None])  # [Bq, Bk]
    return m_new, alpha, alpha * total + p.sum(axis=1), alpha[:, None] * o + p @ v


def _join_sink(m, total, o, z: float):
    """The learned sink logit z joins each row's sum once, at the end, as one more score with no value:
    m' = max(m, z), alpha = exp(m - m'), l' = alpha l + exp(z - m'), O~' = alpha O~ (l is `total`)."""
    m_new = np.maximum(m, z)  # [Bq], finite: z is
    alpha = np.exp(m - m_new)
    return m_new, alpha, alpha * total + np.exp(z - m_new), alpha[:, None] * o


def _plain_lse(scores: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """[H, n] log(sum over visible keys of exp(s)), taken directly (a sink logit is not a visible score: its
    share is the sink's own, sigmoid(z - L))."""
    z = np.where(hidden, -np.inf, scores)  # [H, n, n]
    top = z.max(axis=2, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.exp(z - top).sum(axis=2, keepdims=True)))[..., 0]


def first_difference(correct: TiledPass, broken: TiledPass) -> dict | None:
    """Where `broken` first parts from `correct`: the first tile (in the order computed, over every
    head) whose status or running values differ, and what differs first there; after the tiles,
    the output or L. None when nothing differs."""
    found: list[tuple[int, int, dict[str, int | None], str]] = []
    for h, (a, b) in enumerate(zip(correct.heads, broken.heads, strict=True)):
        for index, (s, t) in enumerate(zip(a.tiles, b.tiles, strict=True)):
            stage = next((name for name in STAGES if not _same(getattr(s, name), getattr(t, name))), None)
            if stage is not None:
                found.append((index, h, {"tile": index, "query_block": s.query_block, "key_block": s.key_block}, stage))
                break
        else:
            stage = next((name for name in ("output", "lse") if not _same(getattr(a, name), getattr(b, name))), None)
            if stage is not None:
                found.append((len(a.tiles), h, {"tile": None, "query_block": None, "key_block": None}, stage))
    if not found:
        return None
    _, head, where, stage = min(found, key=lambda f: (f[0], f[1]))
    return {"head": head, **where, "stage": stage}


def _same(a, b) -> bool:
    if isinstance(a, str) or a is None or b is None:
        return a == b
    return bool(np.array_equal(np.isfinite(a), np.isfinite(b)) and np.allclose(a, b, rtol=1e-9, atol=1e-12))
