"""Every known way to get multi-head attention wrong: one registry, and how each changes a step.

Each entry is data: which pipeline step it changes and how (`Recipe`: every field a module applying a
step reads through its own table), and what a request must hold for it to show (`needs`). The engine
computes the entries marked `engine` exactly as the broken code would (those whose recipe `decoding`
only a decode with a cache makes, decode.py); the online softmax computes the `tiled` ones tile by tile
(online.py); the exercise's checker looks for those marked `exercise`. The engine, the conventions
block, the checker, analytics, the front end (`GET /api/v1/failure-modes`) and the lesson's names all
read this table; nothing else in the engine spells a mistake's name (reference.py, the spec, aside).
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
    # Long contexts (masks.py, decode.py): which window, sinks and sink logit step 5 applies (the pass's
    # and the decode's alike, or the decode's alone), whether the cache rolls, and under StreamingLLM's
    # renumbering whether the cached keys are turned by their place in the cache or keep the text's.
    reach: str = "exact"  # 5. exact | one_more | no_sinks | no_sink_logit | decode_unwindowed
    cache: str = "rolling"  # rolling | whole (every position kept although the window hides it)
    renumber: str = "keys"  # keys | query_only
    # The online softmax (online.py): whether what a row holds is rescaled when its maximum rises, whether
    # the running maximum is carried to the next tile, and whether a tile on the diagonal is computed.
    rescale: str = "alpha"  # alpha | none (alpha fixed at 1)
    carry: str = "max"  # max | none (each tile takes its own maximum)
    diagonal: str = "masked"  # masked | skipped (a partly hidden tile treated as future)
    # RoPE scaling (rope.py): applied, or ignored whole, or without its attention factor, with YaRN's ramp
    # turned around, or Llama 3's wavelengths taken without 2 pi.
    scaling: str = "applied"  # 3. applied | ignored | no_attention_factor | reversed | no_2pi
    # Inside a trained model (models/inside.py): the lens's final norm, where a patch lands, and whether an
    # attribution's gradient goes through the softmax.
    lens: str = "recomputed"  # recomputed | none | cached (the last stream's scale for every stream)
    patch: str = "exact"  # exact | shifted (one position later)
    gradient: str = "full"  # full | frozen (the attention weights held fixed)
    # Speculative decoding (speculative.py, models/speculate.py): what a rejection draws from, which q the
    # ratio reads, whether the uniform that rejected picks the new token, whether rejected drafts leave the cache.
    resample: str = "residual"  # residual | target (p itself)
    ratio_q: str = "sampled"  # sampled | untempered (q before the temperature)
    uniform: str = "fresh"  # fresh | shared (the rejecting u, by inverse CDF)
    rollback: str = "truncate"  # truncate | kept (the rejected drafts' keys and values stay)

    @property
    def decoding(self) -> bool:
        """Whether these are a way of going wrong that only decoding with a cache has (decode.py)."""
        decode = (self.decode_mask, self.positions, self.append, self.cache, self.renumber)
        return decode != ("bottom_right", "absolute", "before", "rolling", "keys") or self.reach == "decode_unwindowed"


# What a request may need for a mistake to show (a mode's `needs`): the engine refuses a request without
# those config.REFUSED names with a 422 that says so; without the others it computes the same numbers.
NEEDS = (
    "decode",  # a decode with a KV cache, which is causal
    "head_slices",  # keys and values split per head from projections (not made from a latent)
    "whole_cache",  # a cache that keeps every position: no window, sinks or sink logit
    "window",  # a sliding window
    "sinks",  # sinks above 0 beside the window
    "sink_logit",  # a learned sink logit per head
    "positions",  # positions "cache": StreamingLLM's renumbering (it needs RoPE on whole keys)
    "grouped_heads",  # key/value heads shared by query heads: kv_heads below heads
    "several_heads",  # more than one head
    "rope",  # RoPE on
    "whole_keys",  # RoPE turning whole keys (not a latent's decoupled RoPE key)
    "causal",  # a causal mask that hides something
    "output_projection",  # an output projection other than the identity
    "rope_scaling",  # rope.scaling given
    "attention_factor",  # a RoPE scaling whose attention factor is not 1 (YaRN's, LongRoPE's)
    "yarn",  # YaRN's scaling
    "llama3",  # Llama 3's scaling
)


@dataclass(frozen=True)
class FailureMode:
    id: str
    step: str  # the pipeline step it breaks: split, kv, rope, scale, mask, cache, concat, output, online
    change: dict[str, str]  # the Recipe fields it changes
    name: str  # short, for people: a select option, a chart label
    description: str  # what the broken code does (the contract's table)
    advice: str  # what the checker tells a learner who made it
    needs: tuple[str, ...] = ()  # what a request must hold for it to differ (NEEDS)
    engine: bool = True  # the engine's pass computes it (`failure_mode=`); else the checker or the tiles only
    exercise: bool = True  # the exercise's checker looks for it (its cases have Q = K = V = X, no cache)

    @property
    def decoding(self) -> bool:
        """It happens only while decoding with a cache (a full pass cannot make it): its recipe says so."""
        return self.engine and replace(CORRECT, **self.change).decoding

    @property
    def tiled(self) -> bool:
        """It happens only in the online softmax, tile by tile (online.py): no pass or checker computes it."""
        return self.step == "online"


def _tiled(mode_id: str, change: dict[str, str], needs: tuple[str, ...], name: str, description: str, advice: str):
    """A slip only the online softmax makes, tile by tile (online.py)."""
    return FailureMode(mode_id, "online", change, name, description, advice, needs, engine=False, exercise=False)


def _inside(mode_id: str, step: str, change: dict[str, str], *words: str, needs: tuple[str, ...] = ()) -> FailureMode:
    """A pitfall of reading or decoding a trained model (the lens, a patch, a gradient, speculative sampling):
    models/inside.py and models/speculate.py compute it."""
    name, description, advice = words
    return FailureMode(mode_id, step, change, name, description, advice, needs, engine=False, exercise=False)


def _long(mode_id: str, step: str, change: dict[str, str], needs: tuple[str, ...], *words: str) -> FailureMode:
    """A slip of long contexts (window, sinks, sink logit, rolling cache, RoPE scaling): the engine computes it
    given `needs`."""
    name, description, advice = words
    return FailureMode(mode_id, step, change, name, description, advice, needs, exercise=False)


# Each mistake: its id, the step it breaks and how (the Recipe fields it changes), then its name,
# what the broken code does and what the checker advises (each marked for translation).
_MODES = (
    FailureMode("reuse_first_slice", "split", {"split": "first"}, N_("Reuse the first slice"),
        N_("every head reads the first slice of Q, K and V (head 1's features)"),
        N_("Every head read the first slice of features: each head must read its own slice, otherwise the other "
           "features never reach attention."), ("head_slices", "several_heads")),
    FailureMode("interleaved_split", "split", {"split": "interleaved"}, N_("Interleaved split"),
        N_("head h takes features h, h+H, h+2H, ... (counting from 1) instead of a contiguous slice"),
        N_("Head h took features h, h+H, h+2H, ...: the split must give each head a contiguous slice (head 1 features "
           "1..d_head, head 2 the next d_head, ...; numbered from 1)."), ("head_slices", "several_heads")),
    FailureMode("no_scaling", "scale", {"scale": "none"}, N_("No score scaling"),
        N_("scores are not divided by sqrt(d_head)"),
        N_("The scores were not divided by sqrt(d_head) before the softmax.")),
    FailureMode("scale_by_d_model", "scale", {"scale": "d_model"}, N_("Scaled by √d_model"),
        N_("scores are divided by sqrt(d_model) instead of sqrt(d_head)"),
        N_("The scores were divided by sqrt(d_model); each head divides by sqrt(d_head)."), ("several_heads",)),
    FailureMode("mask_after_softmax", "mask", {"mask": "after_softmax"}, N_("Mask after softmax"),
        N_("softmax over all positions, then future weights set to 0"),
        N_("The mask was applied after the softmax, so rows no longer sum to 1: set future scores to -inf before "
           "normalising."), ("causal",)),
    FailureMode("swapped_head_order", "concat", {"order": "reversed"}, N_("Swapped head order"),
        N_("head outputs are concatenated in reverse order"),
        N_("The head outputs were concatenated in reverse order: keep head 1 first."), ("several_heads",)),
    FailureMode("no_output_projection", "output", {"output": "skip"}, N_("No output projection"),
        N_("stops at concatenation: W_O is ignored"),
        N_("The output projection was skipped: the result stops at the concatenation (output = concatenated @ W_O "
           "mixes features across heads)."), ("output_projection",)),
    FailureMode("gqa_tiled", "kv", {"kv_order": "tile"}, N_("Key/value heads tiled"),
        N_("grouped-query attention with kv heads tiled: query head h reads kv head h mod kv_heads instead of h // (H "
           "/ kv_heads)"),
        N_("The key/value heads were tiled (repeat) instead of repeated in place (repeat_interleave): query head h "
           "reads kv head h // (H / kv_heads), so neighbouring query heads share one."),
        ("head_slices", "grouped_heads"), exercise=False),
    FailureMode("decode_mask_top_left", "mask", {"decode_mask": "top_left"}, N_("Decode mask aligned top-left"),
        N_("a query block shorter than its keys is masked from the top-left: a single decoded token sees only position "
           "1"),
        N_("The causal mask was aligned top-left for a query block shorter than its keys: align it bottom-right, so "
           "the newest query sees every cached position up to its own."), ("decode", "whole_cache"), exercise=False),
    FailureMode("decode_position_reset", "rope", {"positions": "reset"}, N_("Decoded tokens at position 1"),
        N_("each decoded token's query and key are rotated as position 1 (the first), not at its own position"),
        N_("Each decoded token was rotated as the first position: RoPE must turn it by its own position in the "
           "sequence."), ("decode", "whole_cache", "rope"), exercise=False),
    FailureMode("cache_not_appended", "cache", {"append": "after"}, N_("Attends before appending"),
        N_("the new token attends over the cache before its own key and value are added: it never sees itself"),
        N_("The new token attended over the cache before its own key and value were appended: append first, then "
           "attend."), ("decode", "whole_cache"), exercise=False),
    _tiled("online_no_rescale", {"rescale": "none"}, (), N_("Online softmax not rescaled"),
        N_("the online softmax never rescales: alpha is fixed at 1 when the running maximum rises"),
        N_("What the rows held was not rescaled when the running maximum rose: multiply l and O~ by alpha = "
           "exp(m_previous - m_new) before adding the new tile.")),
    _tiled("online_max_not_carried", {"carry": "none"}, (), N_("Running maximum not carried"),
        N_("the running maximum is never written back: each tile takes its own maximum and drops what came before"),
        N_("The running maximum was not carried to the next tile: after each tile set m to m_new, so the next rescale "
           "keeps what the row holds.")),
    _tiled("online_diagonal_skipped", {"diagonal": "skipped"}, ("causal",), N_("Diagonal tile skipped"),
        N_("a tile on the diagonal is treated as future and skipped: each row loses the keys of its own block"),
        N_("The tiles on the diagonal were skipped as if they were future: compute them and apply the causal mask "
           "inside the tile.")),
    FailureMode("no_mask", "mask", {"mask": "none"}, N_("No causal mask"),
        N_("no causal mask: queries attend to later tokens"),
        N_("There is no causal mask: queries put weight on later tokens."), ("causal",), engine=False),
    FailureMode("diagonal_masked", "mask", {"mask": "diagonal"}, N_("Diagonal masked too"),
        N_("the mask hides j >= i, so a token cannot attend to itself (query 1 sees nothing)"),
        N_("The diagonal was masked too: a token must be able to attend to itself (mask j > i, not j >= i)."),
        engine=False),
    FailureMode("zero_mask", "mask", {"mask": "zero"}, N_("Future scores set to 0"),
        N_("future scores are set to 0 instead of -inf"),
        N_("Future scores were set to 0 instead of -inf, so future tokens still get weight."), ("causal",),
        engine=False),
    FailureMode("softmax_wrong_axis", "mask", {"mask": "wrong_axis"}, N_("Softmax over the wrong axis"),
        N_("the softmax normalises over queries (columns) instead of keys (rows)"),
        N_("The softmax ran over queries (columns) instead of over keys (rows)."), engine=False),
    FailureMode("weights_transposed", "mask", {"mask": "transposed"}, N_("Transposed weights"),
        N_("the weights matrix is transposed: row i is not query i's distribution"),
        N_("The weights are transposed: row i must be query i's distribution over the keys."), engine=False),
    _long("decode_ignores_window", "mask", {"reach": "decode_unwindowed", "cache": "whole"}, ("decode", "window"),
        N_("Decode ignores the window"),
        N_("the pass masks the sliding window, the decode attends over its whole cache"),
        N_("The decode attended over every cached position: apply the same window (and sinks) as the pass.")),
    _long("window_off_by_one", "mask", {"reach": "one_more"}, ("window",), N_("Window one too wide"),
        N_("the window keeps keys with i - j <= W: W + 1 keys with the query itself"),
        N_("The window kept one key too many: query i sees i - W < j <= i, W keys counting itself.")),
    _long("sinks_evicted", "mask", {"reach": "no_sinks"}, ("sinks", "window"), N_("Sinks evicted"),
        N_("the rolling buffer drops the first positions too: window attention without its sinks"),
        N_("The first positions left the cache with the rest: keep the sinks in their own slots, never overwritten.")),
    _long("positions_from_text", "rope", {"renumber": "query_only"}, ("decode", "positions", "window", "rope",
          "whole_keys"),
        N_("Keys keep the text's positions"),
        N_("after eviction the cached keys keep the positions of the original text while the query takes its place in "
           "the cache"),
        N_("The cached keys were rotated by their positions in the text: under StreamingLLM's renumbering cache keys "
           "before RoPE and turn them by their place in the cache at each step.")),
    _long("sink_logit_ignored", "mask", {"reach": "no_sink_logit"}, ("sink_logit",), N_("Sink logit ignored"),
        N_("the learned sink logit is left out of the softmax: every row sums to one"),
        N_("The learned sink logit was left out: it joins each row's softmax denominator, so rows sum to less than "
           "one.")),
    _long("cache_not_truncated", "cache", {"cache": "whole"}, ("decode", "window"), N_("Cache not truncated"),
        N_("the cache keeps every position although the window hides them: the same numbers, more memory"),
        N_("The cache kept positions no query can see any more: under a window it needs only sinks + W slots.")),
    _long("rope_scaling_ignored", "rope", {"scaling": "ignored"}, ("rope", "rope_scaling"), N_("RoPE scaling ignored"),
        N_("rope_scaling is parsed, then never read: every pair turns at its unscaled frequency, no attention factor"),
        N_("The scaling was read from the config and never used: compute each pair's scaled frequency (and the "
           "attention factor) from rope_scaling, or past the training length the slow pairs turn to angles the model "
           "never saw.")),
    _long("attention_factor_ignored", "rope", {"scaling": "no_attention_factor"}, ("rope", "attention_factor"),
        N_("Attention factor left out"),
        N_("the scaled frequencies are used but YaRN's or LongRoPE's attention factor never multiplies cos and sin"),
        N_("The attention factor was left out: multiply cos and sin by it (0.1 ln s + 1 for YaRN), which sharpens "
           "the softmax that interpolation flattened.")),
    _long("ramp_reversed", "rope", {"scaling": "reversed"}, ("rope", "yarn"), N_("YaRN ramp reversed"),
        N_("YaRN's ramp is turned around: the fast pairs are interpolated and the slow ones kept"),
        N_("The ramp ran the wrong way: pairs that turn many times over the training length (fast) keep their "
           "frequency, the slow ones are divided by the factor.")),
    _long("wavelength_without_2pi", "rope", {"scaling": "no_2pi"}, ("rope", "llama3"),
        N_("Wavelength without 2π"),
        N_("Llama 3's rule, blend included, is applied to 1 / frequency instead of the wavelength 2π / frequency"),
        N_("The wavelength is 2π / frequency: without 2π every pair looks about six times shorter, so too many are "
           "kept and the blend is computed on the wrong pairs.")),
    _inside("lens_without_final_norm", "lens", {"lens": "none"}, N_("Lens without the final norm"),
        N_("the logit lens decodes the raw stream with the unembedding, skipping the final LayerNorm"),
        N_("Read every stream as the model reads its last one: LayerNorm (mean and variance recomputed on that "
           "stream), then W_U; without it a stream's size, not its direction, decides what the lens says.")),
    _inside("lens_cached_norm_scale", "lens", {"lens": "cached"}, N_("Final norm's scale cached"),
        N_("the lens takes the final LayerNorm's scale from the last layer's stream for every layer"),
        N_("Recompute the norm's variance on each stream you read: the last stream's scale makes earlier layers "
           "look more or less certain than they are.")),
    _inside("patch_position_shifted", "patch", {"patch": "shifted"}, N_("Patch one position late"),
        N_("each patch lands one position after the one asked (an off-by-one in the hook's index)"),
        N_("Patch the position you measure: an index one late moves every effect one column right and loses the "
           "last position's.")),
    _inside("gradient_through_frozen_softmax", "gradient", {"gradient": "frozen"},
        N_("Gradient with the softmax frozen"),
        N_("attribution patching's gradient holds the attention weights fixed: no path through the softmax"),
        N_("Take the gradient through the softmax: with the weights frozen, queries and keys get no gradient and "
           "every effect that moves where a head looks is missed.")),
    _inside("residual_from_target", "speculate", {"resample": "target"}, N_("Resampled from the target"),
        N_("a rejected draft is replaced by a token drawn from p instead of the residual norm(max(0, p - q))"),
        N_("Draw a rejection's token from norm(max(0, p - q)): p counts again the mass the accepted drafts already "
           "emitted, so tokens q likes come out too often.")),
    _inside("draft_probabilities_mismatch", "speculate", {"ratio_q": "untempered"},
        N_("Draft probabilities mismatched"),
        N_("drafts are drawn from q at the temperature, but the ratio p/q and the residual use q before it"),
        N_("Use in min(1, p/q) and in the residual the very q the draft was sampled from, temperature included.")),
    _inside("shared_uniform", "speculate", {"uniform": "shared"}, N_("One uniform for both draws"),
        N_("the uniform that rejected a draft is reused to pick the residual's token by inverse CDF"),
        N_("Draw a fresh uniform for the resample: the one that rejected lies in [min(1, p/q), 1), so the "
           "residual's first tokens are picked too rarely.")),
    _inside("cache_not_rolled_back", "speculate", {"rollback": "kept"}, N_("Cache not rolled back"),
        N_("the rejected drafts' keys and values stay in the target's cache and later tokens attend to them"),
        N_("Truncate the cache to the accepted prefix after each round: the rejected drafts' keys must not be seen "
           "again."), needs=("decode",)),
)  # fmt: skip

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


def marked(text: str, how: Recipe, mode: str | None, field: str) -> str:
    """Words for how a step was done, naming the failure mode when `how` does `field` otherwise than right."""
    return text if getattr(how, field) == getattr(CORRECT, field) else f"{text} (failure mode {mode})"


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
            "needs": list(m.needs),
        }
        for m in _MODES
    ]
