"""Decoding with a KV cache: the same steps as one pass (pipeline.py), a block of positions at a
time. A prefill block takes the first `prefill` positions at once, then each position is one step:
its query, key and value are made from its own token alone (RoPE at its own position), its key and
value are appended to the cache (under latent attention its latent and RoPE key), and its query
attends over everything cached so far. A query block shorter than its keys is masked bottom-right:
query i of the block, at position start + i, sees keys j <= start + i. Row t of every step equals
row t of the full causal pass (tests/compute/test_decode.py holds them to 1e-12).

The broken decodes of the registry are computed here exactly as that code would run:
`decode_mask_top_left` (the mask aligned top-left, so one new query sees only position 0),
`decode_position_reset` (each decoded token rotated as position 0) and `cache_not_appended` (the
new token attends over the cache before its own key and value are added).

Shapes: n positions, H heads, kv key/value heads, d_q (d_k) the width of a head's query (key):
d_head, plus d_rope under latent attention; d_v = d_head; m the rows of a block; L the cache's length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import latent
from .config import AttentionConfig
from .inputs import Projections, head_features, kv_heads_of, layout, prepare
from .pipeline import finish, keys_values, project_heads, scores_field
from .steps import attend, check_scores, dot, scores, softmax
from .trace import AttentionTrace


@dataclass(frozen=True, eq=False)
class DecodeTrace:
    """Every number of a decode, by position: row t of each array is what step t computed."""

    config: AttentionConfig
    blocks: tuple[tuple[int, int], ...]  # the query blocks in order, [start, end): the prefill, then one each
    tokens: np.ndarray  # [n, d_model]
    query: np.ndarray  # [H, n, d_q] each row as its step rotated it
    cache: tuple[np.ndarray, np.ndarray]  # after the last step: keys [kv, n, d_k] and values [kv, n, d_v],
    # or under latent attention the latent [n, d_c] and the RoPE key [n, d_rope]
    keys: np.ndarray | None  # [H, n, d_k] each query head's keys from the cache (None: absorbed latent form)
    values: np.ndarray | None  # [H, n, d_v]
    reach: np.ndarray  # [n] how many cached positions row t's query attended over (t + 1 when done right)
    seen: np.ndarray  # [n, n] True where row t's query put weight on key j (in the cache, not masked)
    scores: np.ndarray  # [H, n, n] row t: its step's scaled scores over the cache; 0 beyond `reach`
    weights: np.ndarray  # [H, n, n] row t: its step's weights; 0 where not seen
    head_outputs: np.ndarray  # [H, n, d_v]
    concat: np.ndarray  # [n, d_model]
    output: np.ndarray  # [n, d_model]
    residual: np.ndarray  # [n, d_model]
    kv_head: np.ndarray  # [H] the kv head each query head reads
    latent_query: np.ndarray | None = None  # [H, n, d_c] absorbed latent form
    latent_output: np.ndarray | None = None  # [H, n, d_c]

    @property
    def prefill(self) -> int:
        return self.blocks[0][1]

    def cache_elements(self, position: int) -> int:
        """Numbers in the cache once `position` is appended (one layer): positions x elements per token."""
        return (position + 1) * self.config.cache_elements_per_token

    def as_pass(self) -> AttentionTrace:
        """The decode's rows laid out as one pass's trace (what /attention and /attention/compare
        answer for a failure mode only decoding makes). Scores a step never computed (keys past
        its reach) are filled in as the dot products they would have been, so `scores` keeps its
        meaning (before masking); `mask` is every cell the decode did not attend to."""
        cfg = self.config
        later = np.arange(cfg.n)[None, :] >= self.reach[:, None]  # [n, n] never scored by the row's step
        full = _all_scores(self)  # [H, n, n]
        features, kv_features, ranges = layout(cfg, cfg.steps.split)
        arrays = {"scores": np.where(later, full, self.scores), "mask": ~self.seen}
        for array in arrays.values():
            array.setflags(write=False)
        return AttentionTrace(
            config=cfg, tokens=self.tokens, query=self.query, key=self.keys, value=self.values,
            weights=self.weights, head_outputs=self.head_outputs, concat=self.concat, output=self.output,
            residual=self.residual, features=features, kv_features=kv_features, kv_head=self.kv_head,
            feature_ranges=ranges,
            latent=self.cache[0] if cfg.latent is not None else None,
            rope_key=self.cache[1] if cfg.latent is not None and cfg.d_rope else None,
            latent_query=self.latent_query, latent_output=self.latent_output, **arrays,
        )  # fmt: skip


def decode_attention(x, heads: int, *, prefill: int = 1, causal: bool = True, w_q=None, w_k=None, w_v=None,
                     w_o=None, kv_heads: int | None = None, rope=None, latent=None,
                     failure_mode: str | None = None) -> DecodeTrace:  # fmt: skip
    """Generate tokens `x` [n][d_model] position by position with a KV cache (the first `prefill`
    at once), every intermediate kept; the arguments are `multi_head_attention`'s."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x, cfg, w = prepare(x, heads, causal, (w_q, w_k, w_v, w_o), (None,) * 4, kv_heads, rope, latent, failure_mode)
        return decode(x, cfg, w, prefill)


def decode(x: np.ndarray, cfg: AttentionConfig, w: Projections, prefill: int = 1) -> DecodeTrace:
    """The decode of checked tokens `x` [n, d_model] under a validated config."""
    from .errors import AttentionInputError

    if not cfg.causal:
        raise AttentionInputError(
            "decoding makes one position at a time and each sees only what is cached: causal must be true",
            field="causal",
        )
    if isinstance(prefill, bool) or not isinstance(prefill, int) or not 1 <= prefill <= cfg.n:
        raise AttentionInputError(f"prefill must be a whole number from 1 to n = {cfg.n}, got {prefill!r}",
                                  field="prefill")  # fmt: skip
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _Decoder(x, cfg, w).run(prefill)


class _Decoder:
    """One decode's buffers, filled block by block."""

    def __init__(self, x: np.ndarray, cfg: AttentionConfig, w: Projections):
        self.x, self.cfg, self.w, self.how = x, cfg, w, cfg.steps
        self.features, self.kv_features = head_features(cfg, self.how.split)
        self.absorbed = cfg.latent is not None and cfg.latent.absorbed
        n, heads = cfg.n, cfg.heads
        self.scores, self.weights = np.zeros((heads, n, n)), np.zeros((heads, n, n))  # [H, n, n] each
        self.seen, self.reach = np.zeros((n, n), dtype=bool), np.zeros(n, dtype=np.int64)
        self.rows: dict[str, np.ndarray] = {}  # per-position arrays, allocated by the first block
        self.cache: tuple[np.ndarray, np.ndarray] | None = None
        self.length = 0  # positions in the cache

    def run(self, prefill: int) -> DecodeTrace:
        blocks = ((0, prefill), *((t, t + 1) for t in range(prefill, self.cfg.n)))
        for start, end in blocks:
            self.step(start, end)
        return self.trace(blocks)

    def step(self, start: int, end: int) -> None:
        """Positions [start, end): project, append to the cache, attend over it (the broken decodes
        at the points where they go wrong)."""
        cfg, how = self.cfg, self.how
        reset = how.positions == "reset" and start > 0
        positions = np.arange(end - start) if reset else np.arange(start, end)  # 3. where RoPE turns them
        heads = project_heads(self.x[start:end], cfg, self.w, how, self.features, self.kv_features, positions)  # 1-3.
        if how.append == "after":  # the bug: attend over the cache as it was, then append
            reach = self.length
            s, a, o, extra = self.attend(heads.query, start, reach)
            self.append(heads.cache, start, end)
        else:
            self.append(heads.cache, start, end)
            reach = self.length
            s, a, o, extra = self.attend(heads.query, start, reach)
        self.keep(start, end, reach, heads.query, s, a, o, extra)

    def append(self, rows: tuple[np.ndarray, np.ndarray], start: int, end: int) -> None:
        """The cache after positions [start, end) join it: keys and values [kv, L, d] (axis 1), or
        the latent and RoPE key [L, d] (axis 0). Preallocated for n positions: appending writes rows."""
        axis = 0 if self.cfg.latent is not None else 1
        if self.cache is None:
            self.cache = tuple(_buffer(part, self.cfg.n, axis) for part in rows)  # type: ignore[assignment]
        for buffer, part in zip(self.cache, rows, strict=True):  # type: ignore[arg-type]
            (buffer[start:end] if axis == 0 else buffer[:, start:end])[...] = part
        self.length = end

    def cached(self, reach: int) -> tuple[np.ndarray, np.ndarray]:
        axis = 0 if self.cfg.latent is not None else 1
        assert self.cache is not None
        return tuple(part[:reach] if axis == 0 else part[:, :reach] for part in self.cache)  # type: ignore[return-value]

    def attend(self, q: np.ndarray, start: int, reach: int):
        """Steps 4-7 for queries q [H, m, d_q] at positions start.. over the first `reach` cached positions."""
        cfg, how = self.cfg, self.how
        heads, m, _ = q.shape
        visible = _visible(m, start, reach, how.decode_mask)  # [m, reach] True where the query may look
        if reach == 0:  # nothing cached yet (the bug that attends before appending, at position 0)
            d_v = cfg.d_head
            return np.zeros((heads, m, 0)), np.zeros((heads, m, 0)), np.zeros((heads, m, d_v)), {}
        normalise = _normaliser(visible, how.mask)
        if self.absorbed:
            assert self.w.latent is not None
            return latent.attend_absorbed(q, self.cached(reach), cfg, self.w.latent, cfg.scale_with(how), normalise)
        k, v = keys_values(self.cached(reach), cfg, self.w, how)  # [H, reach, d_k], [H, reach, d_v]
        s = scores(q, k, cfg.scale_with(how))  # 4. [H, m, d_q] @ [H, d_q, reach] -> [H, m, reach]
        check_scores(s, np.inf, scores_field(self.w))
        a = normalise(s)  # 5-6. [H, m, reach]
        return s, a, attend(a, v), {}  # 7. [H, m, reach] @ [H, reach, d_v] -> [H, m, d_v]

    def keep(self, start, end, reach, q, s, a, o, extra) -> None:
        """Store the block's rows (steps 8-10 done on them here)."""
        rows = {"query": q, "head_outputs": o, **extra}
        if not self.rows:
            n = self.cfg.n
            self.rows = {name: np.zeros((part.shape[0], n, part.shape[2])) for name, part in rows.items()}
        for name, part in rows.items():
            self.rows[name][:, start:end] = part
        self.scores[:, start:end, :reach] = s
        self.weights[:, start:end, :reach] = a
        self.seen[start:end, :reach] = _visible(end - start, start, reach, self.how.decode_mask)
        self.reach[start:end] = reach
        for name, part in finish(self.x[start:end], o, self.w, self.how).items():  # 8-10. [m, d_model] each
            if name not in self.rows:
                self.rows[name] = np.zeros((self.cfg.n, part.shape[1]))
            self.rows[name][start:end] = part

    def trace(self, blocks) -> DecodeTrace:
        cfg, rows = self.cfg, self.rows
        assert self.cache is not None
        keys, values = (None, None) if self.absorbed else keys_values(self.cache, cfg, self.w, self.how)
        arrays = [self.x, self.scores, self.weights, self.seen, self.reach, *self.cache, *rows.values()]
        for array in [*arrays, *(a for a in (keys, values) if a is not None)]:
            array.setflags(write=False)
        return DecodeTrace(
            config=cfg, blocks=tuple(blocks), tokens=self.x, query=rows["query"], cache=self.cache, keys=keys,
            values=values, reach=self.reach, seen=self.seen, scores=self.scores, weights=self.weights,
            head_outputs=rows["head_outputs"], concat=rows["concat"], output=rows["output"],
            residual=rows["residual"], kv_head=kv_heads_of(cfg, self.how),
            latent_query=rows.get("latent_query"), latent_output=rows.get("latent_output"),
        )  # fmt: skip


def _buffer(part: np.ndarray, n: int, axis: int) -> np.ndarray:
    shape = list(part.shape)
    shape[axis] = n
    return np.zeros(shape)


def _visible(m: int, start: int, reach: int, alignment: str) -> np.ndarray:
    """[m, reach] True where query i of a block starting at `start` may see cached key j: aligned
    bottom-right, j <= start + i (the newest query sees everything up to itself); the bug aligns it
    top-left, j <= i, as for a square score matrix."""
    offset = 0 if alignment == "top_left" else start
    return np.arange(reach)[None, :] <= np.arange(m)[:, None] + offset


def _normaliser(visible: np.ndarray, how: str):
    """Steps 5-6 for a block: masked scores to -inf before the softmax (a row that sees nothing is
    all zeros), or, the contract's failure mode, the softmax over every cached position, then zeros."""
    hidden = ~visible
    if how == "after_softmax":

        def after(s: np.ndarray) -> np.ndarray:
            a = softmax(s)
            a[:, hidden] = 0.0
            return a

        return after
    return lambda s: softmax(s, hidden if hidden.any() else None)


def _all_scores(trace: DecodeTrace) -> np.ndarray:
    """Every query row against every cached key [H, n, n], scaled (for the cells no step scored)."""
    cfg = trace.config
    scale = cfg.scale
    if trace.keys is not None:
        return scores(trace.query, trace.keys, scale)  # [H, n, d_q] @ [H, d_q, n]
    c, k_r = trace.cache
    d = cfg.d_head
    assert trace.latent_query is not None
    s = dot(trace.latent_query, c.T)  # [H, n, d_c] @ [d_c, n]
    if k_r.shape[-1]:
        s = s + dot(trace.query[..., d:], k_r.T)
    return s * scale


def max_difference(a: AttentionTrace, b: AttentionTrace) -> float:
    """The largest difference between two traces of the same tokens over every number both hold
    (queries, keys, values, scores, weights, head outputs, concatenation, output, residual, latent):
    a decode done right against the full causal pass is 0 up to float64 rounding."""
    found = 0.0
    for name in ("query", "key", "value", "scores", "weights", "head_outputs", "concat", "output", "residual",
                 "latent", "rope_key"):  # fmt: skip
        x, y = getattr(a, name), getattr(b, name)
        if x is not None and y is not None and x.shape == y.shape and x.size:
            found = max(found, float(np.abs(x - y).max()))
    return found
