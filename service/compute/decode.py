"""Decoding with a KV cache: the same steps as one pass (pipeline.py), a block of positions at a
time. A prefill block takes the first `prefill` positions at once, then each position is one step,
the four lines of a KV cache (Llama's `cache_k[:, start:end] = xk; keys = cache_k[:, :end]`):

    heads = source.project(x[start:end], positions)   # its query, and what the cache keeps of it
    cache.append(heads.cache, start, end)              # append
    held, at = cache.read()                            # read back, with the positions held
    out = source.attend(heads.query, held, ...)        # attend: each query sees keys j <= its position

A query block shorter than its keys is masked bottom-right (masks.py), so row t of every step equals
row t of the full causal pass (tests/compute/test_decode.py holds them to 1e-12). Under a sliding
window W with S sinks the cache rolls (Mistral's rolling buffer): it holds at most S + W positions,
position p written to slot S + (p - S) mod W once p >= S, and each query reads its keys at their
original positions; a prefill longer than the window attends over its own rows before they are
written (tests/compute/test_rolling_cache.py). Under `positions="cache"` (StreamingLLM) keys are
cached before RoPE and turned at each step by their place in the cache, the query by its own: a
cache holding [0-3, 6-8] decodes token 9 at places 0 to 7. Where the keys and
values come from is the variant's (kv.py). The broken decodes of the registry are small functions
chosen by the recipe's data, as steps 5-6 are: `decode_mask_top_left` (QUERY_AT), `decode_position_reset`
(ROTATE_AT), `cache_not_appended` (APPEND), `positions_from_text` (RENUMBER), and the cache's and
the mask's reach (`reach`: `decode_ignores_window`, `cache_not_truncated`, the pass's three).

Shapes: n positions, H heads, kv key/value heads, d_q (d_k) the width of a head's query (key):
d_head, plus d_rope under latent attention; d_v = d_head; m the rows of a block; L the cache's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .config import AttentionConfig
from .engine import DecodeOnly, multi_head_attention
from .errors import AttentionInputError
from .inputs import head_features, kv_heads_of, layout, prepare
from .kv import Parts, rotated, source_of, traced
from .masks import Masking
from .pipeline import finish
from .trace import AttentionTrace
from .weights import Projections


@dataclass(frozen=True, eq=False)
class DecodeTrace:
    """Every number of a decode, by position: row t of each array is what step t computed. The
    names are `AttentionTrace`'s."""

    config: AttentionConfig
    blocks: tuple[tuple[int, int], ...]  # the query blocks in order, [start, end): the prefill, then one each
    tokens: np.ndarray  # [n, d_model]
    query: np.ndarray  # [H, n, d_q] each row as its step rotated it
    key: np.ndarray | None  # [H, n, d_k] each query head's keys from the cache (None: absorbed latent form)
    value: np.ndarray | None  # [H, n, d_v]
    cache: dict[str, np.ndarray]  # what each position put in the cache, by name, positions along axis -2:
    # keys and values [kv, n, d] per key/value head, or the latent [n, d_c] (and the RoPE key [n, d_rope]);
    # under a window the cache after step t holds only `cache_positions(t)` of them
    reach: np.ndarray  # [n] how many cached positions row t's query attended over (t + 1 when done right)
    scored: np.ndarray  # [n, n] True where row t's step scored key j (it was in what the step read)
    seen: np.ndarray  # [n, n] True where row t's query put weight on key j (in the cache, not masked)
    scores: np.ndarray  # [H, n, n] row t: its step's scaled scores over the cache; 0 beyond `reach`
    weights: np.ndarray  # [H, n, n] row t: its step's weights; 0 where not seen
    head_outputs: np.ndarray  # [H, n, d_v]
    concat: np.ndarray  # [n, d_model]
    output: np.ndarray  # [n, d_model]
    residual: np.ndarray  # [n, d_model]
    kv_head: np.ndarray  # [H] the kv head each query head reads
    rescored: np.ndarray  # [H, n, n] every query row against every key: the cells no step scored, filled in
    latent_query: np.ndarray | None = None  # [H, n, d_c] absorbed latent form
    latent_output: np.ndarray | None = None  # [H, n, d_c]

    @property
    def prefill(self) -> int:
        return self.blocks[0][1]

    def cache_positions(self, position: int) -> np.ndarray:
        """[L] the positions the cache holds once `position` is appended, in slot order."""
        reach = self.config.cache_reach
        return held_after(position, reach.window, reach.sinks)

    def rope_positions(self, position: int) -> dict[str, Any]:
        """Where RoPE turned step `position`'s query and each cached key [L] (in slot order): the text's
        positions (after rope.offset), or under `positions="cache"` after the prefill their places in the cache."""
        held, cfg = self.cache_positions(position), self.config
        if cfg.reach.positions != "cache" or position < self.prefill:
            offset = cfg.rope.offset if cfg.rope is not None else 0
            return {"query": position + offset, "keys": held + offset}
        query, keys = turned_at(held, np.array([position]), cfg.recipe.renumber)
        return {"query": int(query[0]), "keys": keys}

    def cache_elements(self, position: int) -> int:
        """Numbers in the cache once `position` is appended (one layer): positions x elements per token."""
        return len(self.cache_positions(position)) * self.config.cache_elements_per_token

    def as_pass(self) -> AttentionTrace:
        """The decode's rows laid out as one pass's trace (what /attention and /attention/compare
        answer for a failure mode only decoding makes). Scores a step never computed (keys past
        its reach) are filled in as the dot products they would have been, so `scores` keeps its
        meaning (before masking); `mask` is every cell the decode did not attend to."""
        cfg = self.config
        later = ~self.scored  # [n, n] never scored by the row's step
        features, kv_features, ranges = layout(cfg, cfg.recipe.split)
        arrays = {"scores": np.where(later, self.rescored, self.scores), "mask": ~self.seen}
        for array in arrays.values():
            array.setflags(write=False)
        return AttentionTrace(
            config=cfg,
            tokens=self.tokens,
            query=self.query,
            key=self.key,
            value=self.value,
            weights=self.weights,
            head_outputs=self.head_outputs,
            concat=self.concat,
            output=self.output,
            residual=self.residual,
            features=features,
            kv_features=kv_features,
            kv_head=self.kv_head,
            feature_ranges=ranges,
            latent_query=self.latent_query,
            latent_output=self.latent_output,
            **traced(self.cache),
            **arrays,
        )


def decode_attention(
    x,
    heads: int,
    *,
    prefill: int = 1,
    causal: bool = True,
    w_q=None,
    w_k=None,
    w_v=None,
    w_o=None,
    kv_heads: int | None = None,
    rope=None,
    latent=None,
    failure_mode: str | None = None,
    reach=None,
) -> DecodeTrace:
    """Generate tokens `x` [n][d_model] position by position with a KV cache (the first `prefill`
    at once), every intermediate kept; the arguments are `multi_head_attention`'s (a window makes
    the cache roll; `positions="cache"` renumbers its keys by their place in it)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        x, cfg, w = prepare(
            x, heads, causal, (w_q, w_k, w_v, w_o), (None,) * 4, kv_heads, rope, latent, failure_mode, reach
        )
        return decode(x, cfg, w, prefill)


def one_pass(x, heads: int, **arguments: Any) -> AttentionTrace:
    """What `multi_head_attention(x, heads, **arguments)` computes, or where only a decode with a cache
    can (a decoding failure mode, StreamingLLM's positions), that decode, one position a step, laid out
    as one pass: what POST /attention and /attention/compare answer."""
    try:
        return multi_head_attention(x, heads, **arguments)
    except DecodeOnly as only:
        return decode(only.x, only.cfg, only.w).as_pass()


def decode(x: np.ndarray, cfg: AttentionConfig, w: Projections, prefill: int = 1) -> DecodeTrace:
    """The decode of checked tokens `x` [n, d_model] under a validated config."""
    if not cfg.causal:
        raise AttentionInputError(
            "decoding makes one position at a time and each sees only what is cached: causal must be true",
            field="causal",
        )
    if isinstance(prefill, bool) or not isinstance(prefill, int) or not 1 <= prefill <= cfg.n:
        raise AttentionInputError(
            f"prefill must be a whole number from 1 to n = {cfg.n}, got {prefill!r}", field="prefill"
        )
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return _Decoder(x, cfg, w).run(prefill)


class Cache:
    """A KV cache: its two parts preallocated along axis -2, appended a block at a time. Under a sliding
    window it rolls (Mistral's rolling buffer): S + W slots, position p >= S written to slot
    S + (p - S) mod W, over the position W before it, which no later query sees."""

    def __init__(self, n: int, window: int | None = None, sinks: int = 0):
        self.window, self.sinks, self.length = window, sinks, 0
        self.n = n if window is None else min(n, sinks + window)
        self.at = np.arange(self.n)  # [slots] the position each slot holds
        self.parts: Parts | None = None

    def append(self, rows: Parts, start: int, end: int) -> None:
        first, second = self.parts or (self._buffer(rows[0]), self._buffer(rows[1]))
        window, sinks = self.window or end, self.sinks
        kept = kept_positions(range(start, end), end - 1, window, sinks)  # the rest are overwritten
        slots = [slot_of(p, window, sinks) for p in kept]
        first[..., slots, :], second[..., slots, :] = (part[..., [p - start for p in kept], :] for part in rows)
        self.at[slots] = kept
        self.parts, self.length = (first, second), min(self.n, end)

    def read(self, length: int | None = None) -> tuple[Parts, np.ndarray]:
        """The first `length` slots (all filled by default), and the positions they hold [L]."""
        assert self.parts is not None
        length = self.length if length is None else length
        first, second = (part[..., :length, :] for part in self.parts)
        return (first, second), self.at[:length].copy()

    def truncate(self, length: int) -> None:
        """Keep the first `length` slots (speculative decoding's rollback): the next append writes over the rest."""
        self.length = min(self.length, length)

    def _buffer(self, part: np.ndarray) -> np.ndarray:
        return np.zeros((*part.shape[:-2], self.n, part.shape[-1]))  # [.., slots, d]


def slot_of(position: int, window: int, sinks: int) -> int:
    """Where a rolling cache writes `position`: its own slot while a sink, then around the window's W."""
    return position if position < sinks else sinks + (position - sinks) % window


def kept_positions(positions: range, last: int, window: int, sinks: int) -> list[int]:
    """Which of `positions` a rolling cache holds once `last` is written: the sinks and the last W."""
    return [p for p in positions if p < sinks or p > last - window]


def held_after(position: int, window: int | None, sinks: int) -> np.ndarray:
    """[L] the positions a cache holds once 0..position are written, in slot order: all of them
    without a window; else the sinks and the last W, each in its slot."""
    if window is None:
        return np.arange(position + 1)
    kept = kept_positions(range(position + 1), position, window, sinks)
    return np.array(sorted(kept, key=lambda p: slot_of(p, window, sinks)), dtype=np.int64)


def append_then_read(cache: Cache, rows: Parts, start: int, end: int):
    """Done right: the new positions join the cache, then the query reads it back, itself included.
    A block of several over a rolling cache reads what it held and its own rows (its later rows
    would overwrite keys its earlier queries see), as Hugging Face's prefill does."""
    if cache.window is None or end - start == 1:
        cache.append(rows, start, end)
        return cache.read()
    held, at = cache.read() if cache.length else ((rows[0][..., :0, :], rows[1][..., :0, :]), np.arange(0))
    cache.append(rows, start, end)
    joined = tuple(np.concatenate([h, r], axis=-2) for h, r in zip(held, rows, strict=True))
    return joined, np.concatenate([at, np.arange(start, end)])


def read_then_append(cache: Cache, rows: Parts, start: int, end: int):
    """`cache_not_appended`: the query reads the cache as it was, then the new positions join it."""
    before = cache.length
    cache.append(rows, start, end)
    return cache.read(before)


def its_own(start: int, end: int) -> np.ndarray:
    return np.arange(start, end)  # [m] a block's positions in the text


def from_the_first(start: int, end: int) -> np.ndarray:
    return np.arange(end - start)  # [m] as if the block began the text


def places(at: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """[m] each of `positions`' place among the cache's positions `at` [L] (StreamingLLM's renumbering)."""
    return np.searchsorted(np.sort(at), positions)


# The recipe's decoding fields, as data: what the new query attends over, where its mask is aligned
# (a query block at positions start..end), where RoPE turns its rows, and under StreamingLLM's renumbering
# where the cached keys are turned [L]: by their place in the cache (the query by its own), or
# (`positions_from_text`) at the positions of the text they were cut from.
APPEND = {"before": append_then_read, "after": read_then_append}
QUERY_AT = {"bottom_right": its_own, "top_left": from_the_first}
ROTATE_AT = {"absolute": its_own, "reset": from_the_first}
RENUMBER = {"keys": lambda at: places(at, at), "query_only": lambda at: at}


def turned_at(at: np.ndarray, queries: np.ndarray, renumber: str) -> tuple[np.ndarray, np.ndarray]:
    """Under StreamingLLM's renumbering, where RoPE turns the queries at `queries` [m] and the cache's keys
    at `at` [L]: their places in the cache (the keys as the recipe's `renumber` says)."""
    return places(at, queries), RENUMBER[renumber](at)


class _Decoder:
    """One decode's buffers, filled block by block."""

    def __init__(self, x: np.ndarray, cfg: AttentionConfig, w: Projections):
        self.x, self.cfg, self.recipe = x, cfg, cfg.recipe
        self.source = source_of(cfg, w, self.recipe, *head_features(cfg, self.recipe.split))
        self.w, self.ledger = w, Cache(cfg.n)  # every position's cached rows, for the trace
        kept = cfg.cache_reach
        self.cache = self.ledger if kept.window is None else Cache(cfg.n, kept.window, kept.sinks)
        # the reach step 5 applies: the prefill's as the pass's, then the decode's
        self.reaches = tuple(cfg.reach.applied(self.recipe.reach, decoding) for decoding in (False, True))
        # under StreamingLLM's renumbering keys are cached before RoPE and turned at each step by their place
        self.renumber = cfg.reach.positions == "cache"
        n, heads = cfg.n, cfg.heads
        self.scores, self.weights = np.zeros((heads, n, n)), np.zeros((heads, n, n))  # [H, n, n] each
        self.seen, self.reach = np.zeros((n, n), dtype=bool), np.zeros(n, dtype=np.int64)
        self.scored = np.zeros((n, n), dtype=bool)
        self.rows: dict[str, np.ndarray] = {}  # per-position arrays, allocated by the first block

    def run(self, prefill: int) -> DecodeTrace:
        blocks = ((0, prefill), *((t, t + 1) for t in range(prefill, self.cfg.n)))
        for start, end in blocks:
            self.step(start, end)
        return self.trace(blocks)

    def step(self, start: int, end: int) -> None:
        """Positions [start, end): project, append, read back, attend."""
        how = self.recipe
        heads = self.source.project(self.x[start:end], ROTATE_AT[how.positions](start, end))  # 1-3.
        rows: Parts = heads.cache  # what is cached: under renumbering, the keys before RoPE
        if self.renumber and heads.key_before_rope is not None:
            rows = (heads.key_before_rope, heads.cache[1])
        held, at = APPEND[how.append](self.cache, rows, start, end)  # the cache and its positions [L]
        if self.cache is not self.ledger:
            self.ledger.append(rows, start, end)
        query = heads.query
        if self.renumber and heads.query_before_rope is not None:  # 3. turned by their places now
            query_at, keys_at = turned_at(at, its_own(start, end), how.renumber)
            query = rotated(heads.query_before_rope, self.cfg, query_at, "query")  # [H, m, d]
            held = (rotated(held[0], self.cfg, keys_at, "key"), held[1])
        masking = Masking.of_block(QUERY_AT[how.decode_mask](start, end), at, how.mask, self.reaches[start > 0])  # 5.
        done = self.source.attend(query, held, self.cfg.scale_with(how), masking)  # 4-7.
        self.keep(start, end, at, query, masking, done)

    def keep(self, start: int, end: int, at: np.ndarray, q: np.ndarray, masking: Masking, done) -> None:
        """Store the block's rows (steps 8-10 done on them here)."""
        rows = {"query": q, "head_outputs": done.outputs, **done.extra}
        if not self.rows:
            n = self.cfg.n
            self.rows = {name: np.zeros((part.shape[0], n, part.shape[2])) for name, part in rows.items()}
        for name, part in rows.items():
            self.rows[name][:, start:end] = part
        self.scores[:, start:end, at] = done.scores
        self.weights[:, start:end, at] = done.weights
        self.seen[start:end, at] = ~masking.hidden
        self.reach[start:end] = len(at)
        self.scored[start:end, at] = True
        for name, part in finish(self.x[start:end], done.outputs, self.w, self.recipe).items():  # 8-10. [m, d_model]
            if name not in self.rows:
                self.rows[name] = np.zeros((self.cfg.n, part.shape[1]))
            self.rows[name][start:end] = part

    def trace(self, blocks) -> DecodeTrace:
        cfg, rows, source = self.cfg, self.rows, self.source
        cached, _ = self.ledger.read()
        held = cached  # every key turned as the text's
        if self.renumber:
            held = (rotated(cached[0], cfg, None, "key"), cached[1])
        keys, values = source.keys_values(held)
        rescored = source.scores(rows["query"], held, cfg.scale)  # [H, n, n]
        cache = source.named(cached)
        arrays = [
            self.x,
            self.scores,
            self.weights,
            self.seen,
            self.reach,
            self.scored,
            rescored,
            *cache.values(),
            *rows.values(),
        ]
        for array in [*arrays, *(a for a in (keys, values) if a is not None)]:
            array.setflags(write=False)
        return DecodeTrace(
            config=cfg,
            blocks=tuple(blocks),
            tokens=self.x,
            query=rows["query"],
            key=keys,
            value=values,
            cache=cache,
            reach=self.reach,
            scored=self.scored,
            seen=self.seen,
            scores=self.scores,
            weights=self.weights,
            head_outputs=rows["head_outputs"],
            concat=rows["concat"],
            output=rows["output"],
            residual=rows["residual"],
            kv_head=kv_heads_of(cfg, self.recipe),
            rescored=rescored,
            latent_query=rows.get("latent_query"),
            latent_output=rows.get("latent_output"),
        )
