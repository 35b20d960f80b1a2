"""Every known way to get multi-head attention wrong: one registry, and how each changes a step.

The engine computes the failure modes of the contract (`engine=True`) exactly as the broken code
would: seven of one forward pass, grouped-query heads tiled, and three that only decoding with a
cache can make (`decoding=True`: decode.py); the exercise checker also knows five slips of the
masking step. Each entry
is data: which pipeline step it changes and how (`Recipe`). The engine, the conventions block,
the checker, analytics, the front end (`GET /api/v1/failure-modes`) and the lesson's names all
read this table; nothing else spells a mistake's name or description.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..text import N_


@dataclass(frozen=True)
class Recipe:
    """How a computation does the ten steps where they can go wrong (the defaults are right)."""

    split: str = "contiguous"  # 2. contiguous | interleaved | first (every head reads the first slice)
    scale: str = "d_head"  # 4. d_head | none | d_model
    # 5-6. before_softmax | after_softmax | none | diagonal | zero | wrong_axis | transposed
    mask: str = "before_softmax"
    order: str = "stable"  # 8. stable | reversed
    output: str = "project"  # 9. project | skip
    kv_order: str = "repeat"  # 2. the kv head of query head h: repeat (h // group) | tile (h % kv_heads)
    # Decoding (decode.py): how a query block shorter than its keys is masked, where each new token is
    # rotated, and whether its own key and value join the cache before it attends.
    decode_mask: str = "bottom_right"  # 5. bottom_right | top_left
    positions: str = "absolute"  # 3. absolute | reset (each decoded token rotated as position 0)
    append: str = "before"  # before | after (the new token attends over the cache without itself)

    @property
    def decoding(self) -> bool:
        """Whether these are a way of going wrong that only decoding with a cache has (decode.py)."""
        return (self.decode_mask, self.positions, self.append) != ("bottom_right", "absolute", "before")


@dataclass(frozen=True)
class FailureMode:
    id: str
    name: str  # short, for people: a select option, a chart label
    description: str  # what the broken code does (the contract's table)
    advice: str  # what the checker tells a learner who made it
    step: str  # the pipeline step it breaks: split, kv, rope, scale, mask, cache, concat, output, online
    change: dict[str, str]  # the Recipe fields it changes
    engine: bool = True  # the engine's pass computes it (`failure_mode=`); else the checker or the tiles only
    decoding: bool = False  # it happens only while decoding with a cache (a full pass cannot make it)
    tiled: bool = False  # it happens only in the online softmax, tile by tile (online.py)
    exercise: bool = True  # the exercise's checker looks for it (its cases have Q = K = V = X, no cache)


def _tiled(mode_id: str, name: str, description: str, advice: str) -> FailureMode:
    """A slip only the online softmax makes, tile by tile (online.py): no pass or checker computes it."""
    return FailureMode(mode_id, name, description, advice, "online", {}, engine=False, exercise=False, tiled=True)


_MODES = (
    FailureMode(
        "reuse_first_slice",
        N_("Reuse the first slice"),
        N_("every head reads the first slice of Q, K and V (head 1's features)"),
        N_(
            "Every head read the first slice of features: each head must read its own slice, otherwise the other "
            "features never reach attention."
        ),
        "split",
        {"split": "first"},
    ),
    FailureMode(
        "interleaved_split",
        N_("Interleaved split"),
        N_("head h takes features h, h+H, h+2H, ... (counting from 1) instead of a contiguous slice"),
        N_(
            "Head h took features h, h+H, h+2H, ...: the split must give each head a contiguous slice (head 1 "
            "features 1..d_head, head 2 the next d_head, ...; numbered from 1)."
        ),
        "split",
        {"split": "interleaved"},
    ),
    FailureMode(
        "no_scaling",
        N_("No score scaling"),
        N_("scores are not divided by sqrt(d_head)"),
        N_("The scores were not divided by sqrt(d_head) before the softmax."),
        "scale",
        {"scale": "none"},
    ),
    FailureMode(
        "scale_by_d_model",
        N_("Scaled by √d_model"),
        N_("scores are divided by sqrt(d_model) instead of sqrt(d_head)"),
        N_("The scores were divided by sqrt(d_model); each head divides by sqrt(d_head)."),
        "scale",
        {"scale": "d_model"},
    ),
    FailureMode(
        "mask_after_softmax",
        N_("Mask after softmax"),
        N_("softmax over all positions, then future weights set to 0"),
        N_(
            "The mask was applied after the softmax, so rows no longer sum to 1: set future scores to -inf before "
            "normalising."
        ),
        "mask",
        {"mask": "after_softmax"},
    ),
    FailureMode(
        "swapped_head_order",
        N_("Swapped head order"),
        N_("head outputs are concatenated in reverse order"),
        N_("The head outputs were concatenated in reverse order: keep head 1 first."),
        "concat",
        {"order": "reversed"},
    ),
    FailureMode(
        "no_output_projection",
        N_("No output projection"),
        N_("stops at concatenation: W_O is ignored"),
        N_(
            "The output projection was skipped: the result stops at the concatenation (output = concatenated @ W_O "
            "mixes features across heads)."
        ),
        "output",
        {"output": "skip"},
    ),
    FailureMode(
        "gqa_tiled",
        N_("Key/value heads tiled"),
        N_(
            "grouped-query attention with kv heads tiled: query head h reads kv head h mod kv_heads instead of "
            "h // (H / kv_heads)"
        ),
        N_(
            "The key/value heads were tiled (repeat) instead of repeated in place (repeat_interleave): query head h "
            "reads kv head h // (H / kv_heads), so neighbouring query heads share one."
        ),
        "kv",
        {"kv_order": "tile"},
        exercise=False,
    ),
    FailureMode(
        "decode_mask_top_left",
        N_("Decode mask aligned top-left"),
        N_(
            "a query block shorter than its keys is masked from the top-left: a single decoded token sees only "
            "position 1"
        ),
        N_(
            "The causal mask was aligned top-left for a query block shorter than its keys: align it bottom-right, so "
            "the newest query sees every cached position up to its own."
        ),
        "mask",
        {"decode_mask": "top_left"},
        decoding=True,
        exercise=False,
    ),
    FailureMode(
        "decode_position_reset",
        N_("Decoded tokens at position 1"),
        N_("each decoded token's query and key are rotated as position 1 (the first), not at its own position"),
        N_(
            "Each decoded token was rotated as the first position: RoPE must turn it by its own position in the "
            "sequence."
        ),
        "rope",
        {"positions": "reset"},
        decoding=True,
        exercise=False,
    ),
    FailureMode(
        "cache_not_appended",
        N_("Attends before appending"),
        N_("the new token attends over the cache before its own key and value are added: it never sees itself"),
        N_(
            "The new token attended over the cache before its own key and value were appended: append first, "
            "then attend."
        ),
        "cache",
        {"append": "after"},
        decoding=True,
        exercise=False,
    ),
    _tiled(
        "online_no_rescale",
        N_("Online softmax not rescaled"),
        N_("the online softmax never rescales: alpha is fixed at 1 when the running maximum rises"),
        N_(
            "What the rows held was not rescaled when the running maximum rose: multiply l and O~ by "
            "alpha = exp(m_previous - m_new) before adding the new tile."
        ),
    ),
    _tiled(
        "online_max_not_carried",
        N_("Running maximum not carried"),
        N_("the running maximum is never written back: each tile takes its own maximum and drops what came before"),
        N_(
            "The running maximum was not carried to the next tile: after each tile set m to m_new, so the next "
            "rescale keeps what the row holds."
        ),
    ),
    _tiled(
        "online_diagonal_skipped",
        N_("Diagonal tile skipped"),
        N_("a tile on the diagonal is treated as future and skipped: each row loses the keys of its own block"),
        N_(
            "The tiles on the diagonal were skipped as if they were future: compute them and apply the causal mask "
            "inside the tile."
        ),
    ),
    FailureMode(
        "no_mask",
        N_("No causal mask"),
        N_("no causal mask: queries attend to later tokens"),
        N_("There is no causal mask: queries put weight on later tokens."),
        "mask",
        {"mask": "none"},
        engine=False,
    ),
    FailureMode(
        "diagonal_masked",
        N_("Diagonal masked too"),
        N_("the mask hides j >= i, so a token cannot attend to itself (query 1 sees nothing)"),
        N_("The diagonal was masked too: a token must be able to attend to itself (mask j > i, not j >= i)."),
        "mask",
        {"mask": "diagonal"},
        engine=False,
    ),
    FailureMode(
        "zero_mask",
        N_("Future scores set to 0"),
        N_("future scores are set to 0 instead of -inf"),
        N_("Future scores were set to 0 instead of -inf, so future tokens still get weight."),
        "mask",
        {"mask": "zero"},
        engine=False,
    ),
    FailureMode(
        "softmax_wrong_axis",
        N_("Softmax over the wrong axis"),
        N_("the softmax normalises over queries (columns) instead of keys (rows)"),
        N_("The softmax ran over queries (columns) instead of over keys (rows)."),
        "mask",
        {"mask": "wrong_axis"},
        engine=False,
    ),
    FailureMode(
        "weights_transposed",
        N_("Transposed weights"),
        N_("the weights matrix is transposed: row i is not query i's distribution"),
        N_("The weights are transposed: row i must be query i's distribution over the keys."),
        "mask",
        {"mask": "transposed"},
        engine=False,
    ),
)

REGISTRY: dict[str, FailureMode] = {m.id: m for m in _MODES}
FAILURE_MODES: dict[str, str] = {m.id: m.description for m in _MODES if m.engine}  # what the engine computes
CORRECT = Recipe()

# Mistakes that can happen together: one from each step (None: that step is right).
GROUPS: tuple[tuple[str | None, ...], ...] = tuple(
    (None, *(m.id for m in _MODES if m.step == step and m.exercise))
    for step in ("split", "scale", "mask", "concat", "output")
)


def recipe_of(*modes: str | None) -> Recipe:
    """The ten steps as the code making every one of `modes` does them."""
    result = CORRECT
    for mode in modes:
        if mode is not None:
            result = replace(result, **REGISTRY[mode].change)
    return result


def as_json() -> list[dict[str, object]]:
    """The registry for people and programs (served at `GET /api/v1/failure-modes`)."""
    return [
        {
            "id": m.id,
            "name": m.name,
            "description": m.description,
            "advice": m.advice,
            "step": m.step,
            "engine": m.engine,
            "decoding": m.decoding,
            "tiled": m.tiled,
        }
        for m in _MODES
    ]
