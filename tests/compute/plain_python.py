"""An independent reference: multi-head attention written as plain per-head Python loops.

No numpy, no shared code with the engine: lists, `math` and `cmath` only. RoPE is written as
a complex rotation of each feature pair, a different formulation from the engine's. Decoding
with a cache is written as the generation loop it is (a list per cache, appended position by
position); latent attention as DeepSeek-V2 writes it, every head's key and value from the latent.
"""

from __future__ import annotations

import cmath
import math

DECODING = ("decode_mask_top_left", "decode_position_reset", "cache_not_appended")
# RoPE scaling's slips, each with a scaling it shows on (trained on 16 positions, so a short text reaches it).
_LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 16}
_YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16}
ROPE_SLIPS = {
    "rope_scaling_ignored": _LLAMA3,
    "attention_factor_ignored": _YARN,
    "ramp_reversed": _YARN,
    "wavelength_without_2pi": _LLAMA3,
}


def matmul(a, b):
    return [[sum(a[i][t] * b[t][j] for t in range(len(b))) for j in range(len(b[0]))] for i in range(len(a))]


def vecmat(v, m):
    return [sum(v[t] * m[t][j] for t in range(len(m))) for j in range(len(m[0]))]


def identity(rows, cols):
    return [[1.0 if i == j else 0.0 for j in range(cols)] for i in range(rows)]


def rope_pairs(d_head, style):
    if style == "half":
        return [(i, i + d_head // 2) for i in range(d_head // 2)]
    return [(2 * i, 2 * i + 1) for i in range(d_head // 2)]


def inverse_frequencies(d, base, scaling=None, length=0, failure_mode=None):
    """Each pair's frequency and the factor on cos and sin, as Hugging Face's modeling_rope_utils defines
    each scaling (written again from those definitions, in floats; `length` is the last position + 1)."""
    plain = [base ** (-(2 * i) / d) for i in range(d // 2)]
    if scaling is None or failure_mode == "rope_scaling_ignored":
        return plain, 1.0
    kind = scaling.get("rope_type") or scaling.get("type")
    s, big = scaling.get("factor", 1.0), scaling.get("original_max_position_embeddings")
    factor = 1.0
    if kind == "linear":
        freqs = [f / s for f in plain]
    elif kind in ("ntk", "dynamic"):
        n = max(length, big) if kind == "dynamic" else None
        raised = base * (s if kind == "ntk" else s * n / big - (s - 1)) ** (d / (d - 2))
        freqs = [raised ** (-(2 * i) / d) for i in range(d // 2)]
    elif kind == "yarn":
        freqs, factor = _yarn(plain, d, base, s, big, scaling, failure_mode)
    elif kind == "llama3":
        turn = 1.0 if failure_mode == "wavelength_without_2pi" else 2 * math.pi
        lo, hi = scaling.get("low_freq_factor", 1.0), scaling.get("high_freq_factor", 4.0)
        freqs = []
        for f in plain:
            wavelength = turn / f
            if wavelength < big / hi:
                freqs.append(f)
            elif wavelength > big / lo:
                freqs.append(f / s)
            else:
                smooth = (big / wavelength - lo) / (hi - lo)
                freqs.append((1 - smooth) * f / s + smooth * f)
    else:  # longrope
        table = scaling["long_factor"] if length > big else scaling["short_factor"]
        freqs = [f / table[i] for i, f in enumerate(plain)]
        given = scaling.get("attention_factor")
        factor = given if given is not None else (math.sqrt(1 + math.log(s) / math.log(big)) if s > 1 else 1.0)
    return freqs, (1.0 if failure_mode == "attention_factor_ignored" else factor)


def _yarn(plain, d, base, s, big, scaling, failure_mode):
    fast, slow = scaling.get("beta_fast") or 32, scaling.get("beta_slow") or 1
    if scaling.get("ramp") == "paper":  # the paper's gamma, linear in L / wavelength
        keep = [min(max((big * f / (2 * math.pi) - slow) / (fast - slow), 0.0), 1.0) for f in plain]
    else:
        low = d * math.log(big / (fast * 2 * math.pi)) / (2 * math.log(base))
        high = d * math.log(big / (slow * 2 * math.pi)) / (2 * math.log(base))
        if scaling.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        span = high - low if high != low else 0.001
        keep = [1 - min(max((i - low) / span, 0.0), 1.0) for i in range(d // 2)]
    if failure_mode == "ramp_reversed":
        keep = [1 - k for k in keep]
    freqs = [f * k + f / s * (1 - k) for f, k in zip(plain, keep, strict=True)]
    given, m, m_all = scaling.get("attention_factor"), scaling.get("mscale"), scaling.get("mscale_all_dim")

    def mscale(scale, weight=1.0):
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    if given is not None:
        return freqs, given
    return freqs, (mscale(s, m) / mscale(s, m_all) if m and m_all else mscale(s))


def rotate_row(row, pos, style, base, scaling=None, length=0, failure_mode=None):
    d_head = len(row)
    new = list(row)
    freqs, factor = inverse_frequencies(d_head, base, scaling, length, failure_mode)
    for i, (a, b) in enumerate(rope_pairs(d_head, style)):
        z = complex(row[a], row[b]) * cmath.exp(1j * pos * freqs[i]) * factor
        new[a], new[b] = z.real, z.imag
    return new


def rotate(rows, style, base):
    return [rotate_row(row, pos, style, base) for pos, row in enumerate(rows)]


def turn(row, position, rope, length, failure_mode):
    """A row turned by RoPE (`rope`: style, base, scaling, offset) at `position` of a text `length` long."""
    offset = rope.get("offset", 0)
    scaling = rope.get("scaling")
    args = (rope["style"], rope.get("base", 10000.0), scaling, offset + length, failure_mode)
    return rotate_row(row, offset + position, *args)


def head_columns(h, heads, d_head, failure_mode):
    """Which projected features head h reads, as the (possibly broken) code would."""
    if failure_mode == "reuse_first_slice":
        return list(range(d_head))
    if failure_mode == "interleaved_split":
        return [h + heads * t for t in range(d_head)]
    return list(range(h * d_head, (h + 1) * d_head))


def kv_of(h, heads, kv, failure_mode):
    """The kv head query head h reads: repeat-interleave (h // group), or tiled (the bug)."""
    return h % kv if failure_mode == "gqa_tiled" else h // (heads // kv)


def softmax_visible(row, visible, sink=None):
    """Softmax over the visible cells; a row that sees nothing is all zeros. `sink`: a logit that
    joins the denominator as one more cell, whose weight is then dropped (gpt-oss)."""
    seen = [s for s, v in zip(row, visible, strict=True) if v]
    if not seen:
        return [0.0] * len(row)
    top = max(seen) if sink is None else max(*seen, sink)
    exps = [math.exp(s - top) if v else 0.0 for s, v in zip(row, visible, strict=True)]
    total = sum(exps) + (0.0 if sink is None else math.exp(sink - top))
    return [e / total for e in exps]


def sees(i, j, causal=True, window=None, sinks=0):
    """Whether query i sees key j: not in its future, and within its window (i - j < window) or a sink."""
    if causal and j > i:
        return False
    return window is None or i - j < window or j < sinks


class Token:
    """One position's projections, as written for the lesson (per head lists)."""

    def __init__(self, x_row, heads, d_head, kv, w, rope, latent, failure_mode, position, length=None):
        d_model = len(x_row)
        q_all = vecmat(x_row, w["q"] or identity(d_model, d_model))
        self.q = [[q_all[c] for c in head_columns(h, heads, d_head, failure_mode)] for h in range(heads)]
        if latent is not None:
            self.latent = vecmat(x_row, latent["down"])
            k_all = vecmat(self.latent, latent["up_key"])
            v_all = vecmat(self.latent, latent["up_value"])
            self.k = [k_all[h * d_head : (h + 1) * d_head] for h in range(heads)]
            self.v = [v_all[h * d_head : (h + 1) * d_head] for h in range(heads)]
            if latent.get("rope_key") is not None:
                dr = len(latent["rope_key"][0])
                qr = vecmat(x_row, latent["rope_query"])
                kr = turn(vecmat(x_row, latent["rope_key"]), position, rope, length, failure_mode)
                for h in range(heads):
                    part = turn(qr[h * dr : (h + 1) * dr], position, rope, length, failure_mode)
                    self.q[h] = self.q[h] + part
                    self.k[h] = self.k[h] + kr
            return
        k_all = vecmat(x_row, w["k"] or identity(d_model, kv * d_head))
        v_all = vecmat(x_row, w["v"] or identity(d_model, kv * d_head))
        self.k = [[k_all[c] for c in head_columns(g, kv, d_head, failure_mode)] for g in range(kv)]
        self.v = [[v_all[c] for c in head_columns(g, kv, d_head, failure_mode)] for g in range(kv)]
        if rope is not None:
            self.q = [turn(row, position, rope, length, failure_mode) for row in self.q]
            self.k = [turn(row, position, rope, length, failure_mode) for row in self.k]


def reference_decode(
    x,
    heads,
    w_q=None,
    w_k=None,
    w_v=None,
    w_o=None,
    kv_heads=None,
    rope=None,
    latent=None,
    failure_mode=None,
    prefill=1,
):
    """Generate position by position with a cache (the first `prefill` positions at once); every
    row laid out as one pass's arrays: scores [H][n][n] (a cell no step scored is the dot product it
    would have been), weights [H][n][n] (0 where unseen), per-head query, key and value rows."""
    n, d_model = len(x), len(x[0])
    d_head = d_model // heads
    kv = heads if latent is not None else (kv_heads or heads)
    w = {"q": w_q, "k": w_k, "v": w_v}
    width = d_head + (len(latent["rope_key"][0]) if latent and latent.get("rope_key") else 0)
    divisor = {"no_scaling": 1.0, "scale_by_d_model": math.sqrt(d_model)}.get(failure_mode, math.sqrt(width))
    cache = []  # the tokens whose keys and values are cached, in order
    tokens = [None] * n
    steps = {}
    blocks = [(0, prefill)] + [(t, t + 1) for t in range(prefill, n)]
    for start, end in blocks:
        reset = failure_mode == "decode_position_reset" and start > 0
        for t in range(start, end):  # each block turned at its positions, by the frequencies at its length
            pos, length = (t - start, end - start) if reset else (t, end)
            tokens[t] = Token(x[t], heads, d_head, kv, w, rope, latent, failure_mode, pos, length)
        block = tokens[start:end]
        if failure_mode != "cache_not_appended":
            cache.extend(block)
        reach = len(cache)
        for i, t in enumerate(range(start, end)):
            seen_to = i if failure_mode == "decode_mask_top_left" else t  # the last key the query may see
            steps[t] = (reach, [j <= seen_to for j in range(reach)])
        if failure_mode == "cache_not_appended":
            cache.extend(block)
    result = {"query": [], "key": [], "value": [], "scores": [], "weights": [], "head_outputs": [], "seen": []}
    for h in range(heads):
        g = h if latent is not None else kv_of(h, heads, kv, failure_mode)
        q = [tokens[t].q[h] for t in range(n)]
        k = [tokens[j].k[g] for j in range(n)]
        v = [tokens[j].v[g] for j in range(n)]
        scores, weights, out = [], [], []
        for t in range(n):
            reach, visible = steps[t]
            row = [sum(a * b for a, b in zip(q[t], k[j], strict=True)) / divisor for j in range(n)]
            visible = visible + [False] * (n - reach)
            a = softmax_visible(row, visible)
            scores.append(row)
            weights.append(a)
            out.append([sum(a[j] * v[j][c] for j in range(n)) for c in range(d_head)])
        for name, value in (
            ("query", q),
            ("key", k),
            ("value", v),
            ("scores", scores),
            ("weights", weights),
            ("head_outputs", out),
        ):
            result[name].append(value)
    result["seen"] = [steps[t][1] + [False] * (n - steps[t][0]) for t in range(n)]
    return _finish(result, x, heads, w_o, failure_mode)


def _finish(result, x, heads, w_o, failure_mode):
    n, d_model = len(x), len(x[0])
    order = list(range(heads))[::-1] if failure_mode == "swapped_head_order" else list(range(heads))
    concat = [sum((result["head_outputs"][h][i] for h in order), []) for i in range(n)]
    if failure_mode == "no_output_projection":
        output = [list(row) for row in concat]
    else:
        output = matmul(concat, w_o if w_o is not None else identity(d_model, d_model))
    result["concat"] = concat
    result["output"] = output
    result["residual"] = [[x[i][j] + output[i][j] for j in range(d_model)] for i in range(n)]
    return result


def reference_mha(
    x,
    heads,
    causal=True,
    w_q=None,
    w_k=None,
    w_v=None,
    w_o=None,
    kv_heads=None,
    rope=None,
    failure_mode=None,
    latent=None,
    window=None,
    sinks=0,
    sink_logit=None,
):
    if failure_mode in DECODING:  # only decoding goes wrong this way: generate, and lay the rows out
        return reference_decode(x, heads, w_q, w_k, w_v, w_o, kv_heads, rope, latent, failure_mode)
    n, d_model = len(x), len(x[0])
    d_head = d_model // heads
    kv = heads if latent is not None else (kv_heads or heads)
    w = {"q": w_q, "k": w_k, "v": w_v}
    tokens = [Token(x[t], heads, d_head, kv, w, rope, latent, failure_mode, t, n) for t in range(n)]
    width = len(tokens[0].q[0])
    divisor = {"no_scaling": 1.0, "scale_by_d_model": math.sqrt(d_model)}.get(failure_mode, math.sqrt(width))
    result = {"query": [], "key": [], "value": [], "scores": [], "weights": [], "head_outputs": []}
    for h in range(heads):
        g = (
            h
            if latent is not None
            else (0 if failure_mode == "reuse_first_slice" else kv_of(h, heads, kv, failure_mode))
        )
        q = [tok.q[h] for tok in tokens]
        k = [tok.k[g] for tok in tokens]
        v = [tok.v[g] for tok in tokens]
        scores, weights = [], []
        for i in range(n):
            row = [sum(q[i][t] * k[j][t] for t in range(width)) / divisor for j in range(n)]
            future = [not sees(i, j, causal, window, sinks) for j in range(n)]
            if sink_logit is not None:
                weights.append(softmax_visible(row, [not f for f in future], sink_logit[h]))
            elif failure_mode == "mask_after_softmax":  # normalise over everything, then zero the future
                top = max(row)
                exps = [math.exp(s - top) for s in row]
                total = sum(exps)
                weights.append([0.0 if future[j] else exps[j] / total for j in range(n)])
            else:
                weights.append(softmax_visible(row, [not f for f in future]))
            scores.append(row)
        out = [[sum(weights[i][j] * v[j][t] for j in range(n)) for t in range(d_head)] for i in range(n)]
        for key, value in (
            ("query", q),
            ("key", k),
            ("value", v),
            ("scores", scores),
            ("weights", weights),
            ("head_outputs", out),
        ):
            result[key].append(value)
    return _finish(result, x, heads, w_o, failure_mode)


def reference_tiles(scores, values, visible, block_q, block_k, slip=None, sink=None):
    """The online softmax of one head as FlashAttention-2's Algorithm 1 writes it, a row at a time:
    `scores` [n][n], `values` [n][d_v], `visible` [n][n] booleans. Returns the tiles (status, and
    each row's m, alpha, l, O~ after it), each row's output and L. `slip`: one of the three broken
    loops (online_no_rescale, online_max_not_carried, online_diagonal_skipped)."""
    n, d_v = len(scores), len(values[0])
    tiles, output, lse = [], [], []
    for r0 in range(0, n, block_q):
        rows = range(r0, min(r0 + block_q, n))
        m = {i: -math.inf for i in rows}  # what the loop carries
        last = dict(m)  # the maximum the last tile computed
        l = {i: 0.0 for i in rows}  # noqa: E741
        o = {i: [0.0] * d_v for i in rows}
        for c0 in range(0, n, block_k):
            keys = range(c0, min(c0 + block_k, n))
            cells = [visible[i][j] for i in rows for j in keys]
            status = "skipped" if not any(cells) else "computed" if all(cells) else "masked"
            if slip == "online_diagonal_skipped" and status == "masked":
                status = "skipped"
            tile = {"rows": (rows[0], rows[-1] + 1), "keys": (keys[0], keys[-1] + 1), "status": status}
            if status != "skipped":
                tile.update(m=[], alpha=[], l=[], o_tilde=[])
                for i in rows:
                    seen = [scores[i][j] for j in keys if visible[i][j]]
                    new = max(m[i], *seen) if seen else m[i]
                    if slip == "online_no_rescale":
                        alpha = 1.0
                    else:
                        alpha = math.exp(m[i] - new) if m[i] > -math.inf else 0.0
                    p = {j: math.exp(scores[i][j] - new) for j in keys if visible[i][j]}
                    l[i] = alpha * l[i] + sum(p.values())
                    o[i] = [alpha * o[i][t] + sum(p[j] * values[j][t] for j in p) for t in range(d_v)]
                    last[i] = new
                    if slip != "online_max_not_carried":
                        m[i] = new
                    for name, value in (("m", new), ("alpha", alpha), ("l", l[i]), ("o_tilde", list(o[i]))):
                        tile[name].append(value)
            tiles.append(tile)
        for i in rows:
            if sink is not None:  # one more score, with no value, at the end
                top = max(last[i], sink)
                alpha = math.exp(last[i] - top) if last[i] > -math.inf else 0.0
                l[i] = alpha * l[i] + math.exp(sink - top)
                o[i] = [alpha * e for e in o[i]]
                last[i] = top
            output.append([e / l[i] for e in o[i]] if l[i] > 0 else [0.0] * d_v)
            lse.append(last[i] + math.log(l[i]) if l[i] > 0 else -math.inf)
    return {"tiles": tiles, "output": output, "lse": lse}


# What each long-context slip does, as the broken code would: which window, sinks and sink logit it
# applies, whether its cache keeps every position, whether its decode forgets the window.
LONG_CONTEXT_SLIPS = (
    "decode_ignores_window",
    "window_off_by_one",
    "sinks_evicted",
    "positions_from_text",
    "sink_logit_ignored",
    "cache_not_truncated",
)


def reference_streaming(
    x,
    heads,
    window,
    sinks=0,
    sink_logit=None,
    positions="original",
    failure_mode=None,
    prefill=1,
    w_q=None,
    w_k=None,
    w_v=None,
    w_o=None,
    kv_heads=None,
    rope=None,
):
    """Generate with a cache that is a list of entries (position, keys before RoPE, values), evicting
    the oldest non-sink entry once more than `window` non-sinks are held (`prefill` first positions
    at once: each of its rows sees the prompt's keys at their positions). Under positions "cache" a
    step turns each held key by its rank among the held positions and the query by its own
    (StreamingLLM). Returns each row's weights over the text [H][n][n], outputs and the cache's
    positions after each step, and the largest cache held."""
    n, d_model = len(x), len(x[0])
    d_head = d_model // heads
    kv = kv_heads or heads
    slip = failure_mode
    win = window + 1 if slip == "window_off_by_one" else window
    sink_count = 0 if slip == "sinks_evicted" else sinks
    logit = None if slip == "sink_logit_ignored" else sink_logit
    keeps_all = slip in ("cache_not_truncated", "decode_ignores_window")
    w = {"q": w_q, "k": w_k, "v": w_v}
    plain = [Token(x[t], heads, d_head, kv, w, None, None, None, t) for t in range(n)]  # nothing turned yet
    style, base = (rope["style"], rope.get("base", 10000.0)) if rope else (None, None)

    def turn(row, at):
        return row if rope is None else rotate_row(row, at, style, base)

    def evicted(held):  # the oldest non-sink leaves while more than the window's are held
        while not keeps_all and len([j for j in held if j >= sink_count]) > win:
            held.remove(min(j for j in held if j >= sink_count))
        return held

    cache, held_after, largest = [], [], 0
    weights = [[[0.0] * n for _ in range(n)] for _ in range(heads)]
    outputs = [[None] * n for _ in range(heads)]
    for t in range(n):
        if t < prefill:
            keys, places, query_at = list(range(prefill)), {j: j for j in range(prefill)}, t  # the prompt, as written
        else:
            keys = evicted([*cache, t])
            ranks = {j: r for r, j in enumerate(sorted(keys))}
            renumber = positions == "cache"
            places = {j: (ranks[j] if renumber and slip != "positions_from_text" else j) for j in keys}
            query_at = ranks[t] if renumber else t
        unwindowed = slip == "decode_ignores_window" and t >= prefill
        visible = [j for j in keys if sees(t, j, True, None if unwindowed else win, 0 if unwindowed else sink_count)]
        for h in range(heads):
            g = h // (heads // kv)
            q = turn(plain[t].q[h], query_at)
            row = [
                sum(a * b for a, b in zip(q, turn(plain[j].k[g], places[j]), strict=True)) / math.sqrt(d_head)
                for j in visible
            ]
            a = softmax_visible(row, [True] * len(row), None if logit is None else logit[h])
            for j, share in zip(visible, a, strict=True):
                weights[h][t][j] = share
            outputs[h][t] = [
                sum(share * plain[j].v[g][c] for j, share in zip(visible, a, strict=True)) for c in range(d_head)
            ]
        cache = keys if t >= prefill else evicted(list(range(t + 1)))
        held_after.append(sorted(cache))
        largest = max(largest, len(cache))
    result = {"weights": weights, "head_outputs": outputs, "held": held_after, "largest": largest}
    return _finish(result, x, heads, w_o, None)


LONG = ("window", "sinks", "sink_logit", "positions")
# The needs of failure modes only a decode or a long context has (the workbench's menu shows none of them).
LONG_NEEDS = {"decode", "whole_cache", "window", "sinks", "sink_logit", "positions"}
# The needs the workbench's controls can meet: a mode needing anything else (a decode, a window, a
# RoPE scaling) is in no menu of that page.
WORKBENCH_MEETS = {"head_slices", "several_heads", "grouped_heads", "rope", "causal", "output_projection"}


def as_engine(options):
    """Request-shaped `options` as the engine takes them: the window, sinks, sink logit and positions as one reach."""
    reach = {name: value for name, value in options.items() if name in LONG}
    return {**{name: value for name, value in options.items() if name not in LONG}, "reach": reach}


def slip_context(mode, heads, d_head=2):
    """What a request must hold for a long-context slip to show (none for the others): a window of two,
    one sink, a sink logit per head, and for the renumbering slip RoPE and positions "cache" (d_head even);
    for a slip of RoPE scaling, RoPE with the scaling it slips on."""
    if mode in ROPE_SLIPS:
        return {"rope": {"style": "half", "base": 10000.0, "scaling": ROPE_SLIPS[mode]}} if d_head % 2 == 0 else {}
    if mode not in LONG_CONTEXT_SLIPS:
        return {}
    context = {"window": 2, "sinks": 1, "sink_logit": [0.5 - h for h in range(heads)], "causal": True}
    if mode == "positions_from_text" and d_head % 2 == 0:
        context.update(positions="cache", rope={"style": "half", "base": 10000.0})
    return context
