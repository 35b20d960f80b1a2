"""Inside the trained byte model, exactly (float64): the logit lens, activation patching and attribution
patching, and the pitfalls that mislead each (the registry's failure modes of steps `lens`, `patch` and
`gradient`, whose recipes this module reads through its tables).

The streams: x_0 the embedding, x_(l+1) = x_l + layer_l(LN(x_l)); the logits LN(x_L) W_U. The lens reads
any stream x_l (or one head's write into it) as the model reads its last: LN, its mean and variance
recomputed on that stream, then W_U; on x_L it is the model's logits, bit for bit. A patch runs the
corrupted text with one activation taken from the clean run (the stream at (layer, position), or a
head's output at (layer, head, position), before W_O) and measures the metric. Attribution patching
estimates each patch's effect to first order, (a_clean - a_corrupted) . dm/da at the corrupted run, the
gradient taken by hand through the final norm, each layer's norm, projections, RoPE, softmax and values.

Shapes: n positions, L layers, H heads, d the model's width, d_h = d / H, V = 256 bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..compute.engine import AttentionTrace, multi_head_attention
from ..compute.failure_modes import recipe_of
from ..compute.rope import RopeConfig, rotate
from ..compute.steps import merge_heads, project, split_heads
from .byte_model import Model, layer_norm

EPS = 1e-5  # the model's LayerNorm epsilon (byte_model.layer_norm)


@dataclass(frozen=True)
class Run:
    """One text through the model, every activation kept: the streams x_0..x_L and each layer's trace."""

    tokens: np.ndarray  # [n] bytes
    streams: list[np.ndarray]  # L + 1 of [n, d]
    layers: list[AttentionTrace]  # L


def run(
    model: Model, tokens: np.ndarray, start: int = 0, stream: np.ndarray | None = None, patch: tuple | None = None
) -> Run:
    """The model from the stream before layer `start` (the embedding by default); `patch`: (layer, head,
    position, value [d_h]), one head's output replaced before W_O."""
    x = model.weights["embed"][tokens] if stream is None else stream  # [n, d]
    streams, traces = [x], []
    for index in range(start, model.layers):
        w = [model.weights[f"layers.{index}.{name}"] for name in ("w_q", "w_k", "w_v", "w_o")]
        trace = multi_head_attention(
            layer_norm(x), model.heads, causal=True, w_q=w[0], w_k=w[1], w_v=w[2], w_o=w[3], rope=model.rope
        )
        if patch is not None and patch[0] == index:
            trace = with_head_output(trace, patch[1], patch[2], patch[3], w[3])
        x = x + trace.output  # the stream after this layer
        streams.append(x)
        traces.append(trace)
    return Run(np.asarray(tokens), streams, traces)


def with_head_output(trace: AttentionTrace, head: int, position: int, value: np.ndarray, w_o) -> AttentionTrace:
    """The trace with head `head`'s output at `position` replaced, W_O redone on the whole concatenation as the
    engine does it (each row alike, so the rows before `position` keep every bit)."""
    outputs = trace.head_outputs.copy()  # [H, n, d_h]
    outputs[head, position] = value
    concat = merge_heads(outputs)  # [n, d]
    return replace(trace, head_outputs=outputs, concat=concat, output=project(concat, w_o))


# -- the lens --------------------------------------------------------------------------------------------

# The lens's final norm, by the recipe's `lens`: recomputed on each stream, left out, or the last stream's
# scale used for every stream (each stream's mean still taken away).
NORMS = {
    "recomputed": lambda x, last: layer_norm(x),
    "none": lambda x, last: x,
    "cached": lambda x, last: (x - x.mean(axis=1, keepdims=True)) / scale_of(last),
}


def scale_of(x: np.ndarray) -> np.ndarray:
    """[n, d] -> [n, 1]: LayerNorm's denominator, sqrt(variance + eps), row by row."""
    centred = x - x.mean(axis=1, keepdims=True)
    return np.sqrt((centred**2).mean(axis=1, keepdims=True) + EPS)


def probabilities(logits: np.ndarray) -> np.ndarray:
    """[n, V] -> [n, V]: the model's own softmax (byte_model.Model.forward's operations)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def lens(model: Model, tokens: np.ndarray, slip: str | None = None) -> tuple[Run, list[np.ndarray], list[np.ndarray]]:
    """The run, each stream's next-byte distribution [L+1] of [n, V] and each head's [L] of [H, n, V]: the
    stream (or the head's write O_h W_O,h) through the final norm and W_U, as the recipe's `lens` says."""
    norm, r = NORMS[recipe_of(slip).lens], run(model, tokens)
    w_u, last = model.weights["unembed"], r.streams[-1]
    streams = [probabilities(norm(x, last) @ w_u) for x in r.streams]
    d_h = model.d_model // model.heads
    heads = []
    for index, trace in enumerate(r.layers):
        w_o = model.weights[f"layers.{index}.w_o"]
        writes = [trace.head_outputs[h] @ w_o[h * d_h : (h + 1) * d_h] for h in range(model.heads)]  # [n, d] each
        heads.append(np.stack([probabilities(norm(write, last) @ w_u) for write in writes]))
    return r, streams, heads


# -- activation patching ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """What a patch is measured by, at the last position: a logit difference z_a - z_b, or the probability of a."""

    kind: str  # logit_difference | probability
    a: int
    b: int | None = None

    def of(self, r: Run, model: Model) -> float:
        z = layer_norm(r.streams[-1][-1:]) @ model.weights["unembed"]  # [1, V]
        if self.kind == "logit_difference":
            return float(z[0, self.a] - z[0, self.b])
        return float(probabilities(z)[0, self.a])

    def gradient(self, r: Run, model: Model) -> np.ndarray:
        """dm/dlogits [n, V]: nonzero on the last row only."""
        z = layer_norm(r.streams[-1]) @ model.weights["unembed"]
        d = np.zeros_like(z)
        if self.kind == "logit_difference":
            d[-1, self.a], d[-1, self.b] = 1.0, -1.0
        else:
            p = probabilities(z[-1:])[0]
            d[-1] = -p[self.a] * p
            d[-1, self.a] += p[self.a]
        return d


# Where a patch lands, by the recipe's `patch`: the position asked, or the one after it.
LANDS = {"exact": lambda p: p, "shifted": lambda p: p + 1}


def patched_residual(model: Model, corrupted: Run, clean: Run, at: tuple[int, int], lands) -> Run:
    """The corrupted run with the stream x_l at position p taken from the clean run."""
    layer_, p = at
    stream = corrupted.streams[layer_].copy()
    if lands(p) < len(stream):
        stream[lands(p)] = clean.streams[layer_][lands(p)]
    return run(model, corrupted.tokens, start=layer_, stream=stream)


def patched_head(model: Model, corrupted: Run, clean: Run, at: tuple[int, int, int], lands) -> Run:
    """The corrupted run with head h's output at (layer, position) taken from the clean run."""
    layer_, h, p = at
    q = lands(p)
    if q >= len(corrupted.tokens):
        return run(model, corrupted.tokens, start=layer_, stream=corrupted.streams[layer_])
    value = clean.layers[layer_].head_outputs[h, q]
    return run(model, corrupted.tokens, start=layer_, stream=corrupted.streams[layer_], patch=(layer_, h, q, value))


def weights_moved(corrupted: Run, patched: Run) -> dict:
    """The attention weight that moves most between the corrupted and the patched run (the patched run's
    layers are the last ones): where, and from what to what."""
    first = len(corrupted.layers) - len(patched.layers)
    best: dict = {"change": 0.0}
    for offset, trace in enumerate(patched.layers):
        before = corrupted.layers[first + offset].weights
        change = np.abs(trace.weights - before)
        h, i, j = np.unravel_index(int(change.argmax()), change.shape)
        if change[h, i, j] > best["change"]:
            where = {"layer": first + offset, "head": int(h), "query": int(i), "key": int(j)}
            moved = {"before": float(before[h, i, j]), "after": float(trace.weights[h, i, j])}
            best = {"change": float(change[h, i, j]), **where, **moved}
    return best


def activation(r: Run, cell: tuple[int, ...]) -> np.ndarray:
    """What a cell names in run `r`: the stream at (layer, position) [d], or a head's output at (layer, head,
    position) [d_h]."""
    if len(cell) == 2:
        return r.streams[cell[0]][cell[1]]
    return r.layers[cell[0]].head_outputs[cell[1], cell[2]]


def grid(model: Model, component: str, n: int) -> tuple[int, ...]:
    return (model.layers + 1, n) if component == "residual" else (model.layers, model.heads, n)


def patching(model: Model, clean: Run, corrupted: Run, metric: Metric, component: str, estimate: bool, slip=None):
    """Every cell of the component's grid ([L+1, n] for the stream, [L, H, n] for the heads' outputs): the
    patched metric, its effect (patched - corrupted) and, with `estimate`, attribution patching's first-order
    estimate; a cell recovering less than half its effect names the weight that moved most."""
    how = recipe_of(slip)
    lands, corrupted_value = LANDS[how.patch], metric.of(corrupted, model)
    slopes = backward(model, corrupted, metric.gradient(corrupted, model), slip) if estimate else None
    shape = grid(model, component, len(corrupted.tokens))
    patched, estimates, flagged = np.zeros(shape), np.zeros(shape), []
    for cell in np.ndindex(*shape):
        r = PATCHES[component](model, corrupted, clean, cell, lands)
        patched[cell] = metric.of(r, model)
        if slopes is None:
            continue
        slope = slopes[0][cell[0]][cell[1]] if len(cell) == 2 else slopes[1][cell[0]][cell[1], cell[2]]
        estimates[cell] = float((activation(clean, cell) - activation(corrupted, cell)) @ slope)
        moved = weights_moved(corrupted, r)
        why = flag(float(patched[cell] - corrupted_value), float(estimates[cell]), moved["change"])
        if why:
            flagged.append({"cell": list(cell), "why": why, "weight": moved})
    return patched, patched - corrupted_value, estimates if estimate else None, flagged


def flag(effect: float, estimate: float, weight_change: float) -> str | None:
    """Why a cell's first-order estimate is not to be trusted, or None: a softmax that saturates between the
    runs (a weight moving by more than half: the metric's slope at the corrupted run does not carry that
    far), or an estimate recovering less than half of its effect for another reason (the norms, layers
    compounding)."""
    if abs(effect) <= 1e-9:
        return None
    if weight_change > 0.5:
        return "saturated_softmax"
    return "nonlinear" if estimate / effect < 0.5 else None


# -- attribution patching: the gradient by hand ----------------------------------------------------------


def norm_backward(x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """d/dx of LayerNorm (no affine) given dy = dm/dLN(x), row by row: (dy - mean dy - y mean(dy y)) / sigma."""
    y, sigma = layer_norm(x), scale_of(x)
    return (dy - dy.mean(axis=1, keepdims=True) - y * (dy * y).mean(axis=1, keepdims=True)) / sigma


def attention_backward(q, k, v, weights, scale: float, d_out, frozen: bool = False):
    """Steps 4-7 backwards for each head: q, k [H, n, d_h] (rotated), v [H, n, d_h], weights [H, n, n],
    d_out = dm/dO [H, n, d_h] -> dm/dq, dm/dk, dm/dv. `frozen`: the weights held fixed (no path through
    the softmax), as the recipe's `gradient` says of the pitfall."""
    d_weights = d_out @ v.transpose(0, 2, 1)  # [H, n, n]
    d_v = weights.transpose(0, 2, 1) @ d_out  # [H, n, d_h]
    if frozen:
        return np.zeros_like(q), np.zeros_like(k), d_v
    d_scores = weights * (d_weights - (d_weights * weights).sum(axis=-1, keepdims=True))  # the softmax's Jacobian
    return scale * d_scores @ k, scale * d_scores.transpose(0, 2, 1) @ q, d_v


def backward(model: Model, r: Run, d_logits: np.ndarray, slip: str | None = None):
    """dm/dx_l for every stream [L+1] of [n, d] and dm/dO for every head's output [L] of [H, n, d_h], from
    dm/dlogits [n, V], through every layer of `r` (a run from the embedding)."""
    frozen = GRADIENTS[recipe_of(slip).gradient]
    g = norm_backward(r.streams[-1], d_logits @ model.weights["unembed"].T)  # dm/dx_L
    d_streams, d_heads = [g], list[np.ndarray]()
    unturn = -np.arange(len(r.tokens), dtype=np.float64)  # RoPE's transpose: each position turned back
    for index in reversed(range(model.layers)):
        trace, w = r.layers[index], {n: model.weights[f"layers.{index}.{n}"] for n in ("w_q", "w_k", "w_v", "w_o")}
        d_o = split_heads(g @ w["w_o"].T, model.heads)  # [H, n, d_h]: dm/dO (x_(l+1) = x_l + concat W_O)
        d_q, d_k, d_v = attention_backward(
            trace.query, trace.key, trace.value, trace.weights, trace.config.scale, d_o, frozen
        )
        back = RopeConfig(**{k: model.rope[k] for k in ("style", "base")})
        d_q, d_k = rotate(d_q, back, unturn), rotate(d_k, back, unturn)  # through RoPE: [H, n, d_h] each
        d_h = merge_heads(d_q) @ w["w_q"].T + merge_heads(d_k) @ w["w_k"].T + merge_heads(d_v) @ w["w_v"].T
        g = g + norm_backward(r.streams[index], d_h)  # the residual's path and the layer's
        d_streams.insert(0, g)
        d_heads.insert(0, d_o)
    return d_streams, d_heads


# The estimate's gradient, by the recipe's `gradient`: through the softmax, or with the weights frozen.
GRADIENTS = {"full": False, "frozen": True}
# How a component's cell is patched.
PATCHES: dict[str, Callable[..., Run]] = {"residual": patched_residual, "head_output": patched_head}
