"""Speculative sampling (Leviathan et al. 2023; Chen et al. 2023), computed exactly on distributions: a
draft token x ~ q is accepted with probability min(1, p(x) / q(x)); on a rejection a token is drawn from
the residual norm(max(0, p - q)). What is emitted is then p exactly:

    emitted(x) = q(x) min(1, p(x)/q(x)) + (1 - alpha) r(x) = min(p, q)(x) + (p - min(p, q))(x) = p(x),

with alpha = sum min(p, q) = 1 - TV(p, q) the acceptance rate. With gamma drafts a round emits the accepted
ones and one more token (the resample, or a bonus from p once all are accepted): (1 - alpha^(gamma + 1)) /
(1 - alpha) tokens per target pass when each draft is accepted with probability alpha.

The registry's slips of step `speculate` (their recipes' `resample`, `ratio_q`, `uniform`) are analysed here
the same way, exactly: each one's emitted distribution and its total variation from p. Shapes: V tokens.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .failure_modes import Recipe

MAX_GAMMA = 16


def tempered(p: np.ndarray, temperature: float) -> np.ndarray:
    """[V] -> [V]: p^(1/T) normalised (computed from log p, so no power overflows); T = 0 is greedy: all the
    mass on the likeliest token (the first of equals)."""
    if temperature == 0:
        greedy = np.zeros_like(p)
        greedy[int(np.argmax(p))] = 1.0
        return greedy
    with np.errstate(divide="ignore"):
        z = np.log(p) / temperature  # -inf where p is 0
    out = np.exp(z - z.max())
    return out / out.sum()


def acceptance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[V]: min(1, p(x) / q(x)), the chance a draft x is kept (1 where q(x) is 0: never drafted)."""
    return np.minimum(1.0, np.divide(p, q, out=np.ones_like(p), where=q > 0))


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[V]: norm(max(0, p - q)), what a rejection draws from (p itself when q = p: never drawn then)."""
    excess = np.maximum(0.0, p - q)
    total = excess.sum()
    return excess / total if total > 0 else p.copy()


def total_variation(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a - b).sum())


def inverse_cdf(r: np.ndarray, u: float) -> int:
    """The token a uniform u picks from r by inverse CDF in token order: the first x with cumsum(r)(x) > u."""
    return min(int(np.searchsorted(np.cumsum(r), u, side="right")), len(r) - 1)


def shared_uniform(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """[V] what is emitted when the uniform u that rejected x (u >= a(x), so u uniform on [a(x), 1)) picks
    the residual's token by inverse CDF: token y takes the part of [a(x), 1) inside its CDF interval."""
    a, r = acceptance(p, q), residual(p, q)
    upper = np.cumsum(r)
    lower = upper - r
    emitted = q * a
    for x in np.flatnonzero(q > 0):
        emitted += q[x] * np.clip(np.minimum(upper, 1.0) - np.maximum(lower, a[x]), 0.0, None)
    return emitted


# What a round emits at one position, by the recipe: the draft sampled from q (at the temperature), the
# ratio taken with `q_ratio` (q, or the untempered q when the recipe's `ratio_q` says so), the rejection
# drawing from the residual or from p, with a fresh uniform or the one that rejected.
def emitted(p: np.ndarray, q: np.ndarray, how: Recipe, q_ratio: np.ndarray | None = None) -> np.ndarray:
    """[V] the distribution of the token a round emits at one position, computed, not sampled."""
    if how.uniform == "shared":
        return shared_uniform(p, q)
    ratio_q = q if how.ratio_q == "sampled" or q_ratio is None else q_ratio
    a = acceptance(p, ratio_q)
    rejected = 1.0 - float((q * a).sum())
    resample = RESAMPLE[how.resample](p, ratio_q)
    return q * a + rejected * resample


RESAMPLE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "residual": residual,
    "target": lambda p, q: p,  # residual_from_target
}


def expected_tokens(alpha: float, gamma: int) -> float:
    """Tokens per target pass, (1 - alpha^(gamma + 1)) / (1 - alpha): gamma + 1 when every draft is kept."""
    return float(gamma + 1) if alpha >= 1.0 else (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def enumerated_tokens(alpha: float, gamma: int) -> float:
    """The same by the accept/reject tree: k drafts kept, then a rejection (alpha^k (1 - alpha)), k + 1 tokens;
    all gamma kept (alpha^gamma), gamma + 1 with the bonus."""
    leaves = [(alpha**k * (1.0 - alpha), k + 1) for k in range(gamma)] + [(alpha**gamma, gamma + 1)]
    return float(sum(chance * tokens for chance, tokens in leaves))
