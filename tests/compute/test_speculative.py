"""Speculative sampling's rule, against a reference written here in plain Python: the issue's case, the
accept/reject tree enumerated path by path, random distributions, greedy decoding, and each slip's emitted
distribution derived independently (the shared uniform by cutting [0, 1) at every point where a decision
changes)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from service.compute import speculative as rule
from service.compute.failure_modes import recipe_of

P, Q = [0.6, 0.3, 0.1], [0.3, 0.5, 0.2]


def plain_emitted(p, q):
    """Accepted mass q(x) min(1, p/q) plus the rejected mass times norm(max(0, p - q)), with loops."""
    keep = [qx * min(1.0, px / qx) if qx > 0 else 0.0 for px, qx in zip(p, q, strict=True)]
    rejected = 1.0 - sum(keep)
    excess = [max(0.0, px - qx) for px, qx in zip(p, q, strict=True)]
    total = sum(excess)
    return [k + (rejected * e / total if total else 0.0) for k, e in zip(keep, excess, strict=True)]


def tokens_by_enumeration(alpha, gamma):
    """Every accept/reject sequence of gamma drafts, path by path: its chance, and the tokens a round emits
    (the drafts kept before the first rejection, plus the resampled or the bonus token)."""
    total = 0.0
    for path in itertools.product([True, False], repeat=gamma):
        chance = 1.0
        for kept in path:
            chance *= alpha if kept else 1.0 - alpha
        kept_before = next((i for i, kept in enumerate(path) if not kept), gamma)
        total += chance * (kept_before + 1)
    return total


def test_the_issues_case():
    p, q = np.array(P), np.array(Q)
    alpha = float(np.minimum(p, q).sum())
    assert alpha == pytest.approx(0.7, abs=1e-15)
    assert rule.residual(p, q).tolist() == pytest.approx([1.0, 0.0, 0.0], abs=1e-15)
    assert rule.emitted(p, q, recipe_of(None)).tolist() == pytest.approx(P, abs=1e-15)
    for gamma, tokens in ((1, 1.7), (2, 2.19), (4, 2.7731), (8, 3.198821)):
        assert rule.expected_tokens(alpha, gamma) == pytest.approx(tokens, abs=5e-7)  # the issue's six places
        assert rule.enumerated_tokens(alpha, gamma) == pytest.approx(tokens_by_enumeration(alpha, gamma), abs=1e-12)
        assert tokens_by_enumeration(alpha, gamma) == pytest.approx(tokens, abs=5e-7)


def test_for_random_distributions_the_emitted_distribution_is_p():
    rng = np.random.default_rng(3)
    for _ in range(200):
        v = int(rng.integers(2, 40))
        p, q = rng.dirichlet(np.ones(v) * 0.5), rng.dirichlet(np.ones(v) * 0.5)
        out = rule.emitted(p, q, recipe_of(None))
        np.testing.assert_allclose(out, p, rtol=0, atol=1e-15)
        np.testing.assert_allclose(out, plain_emitted(p.tolist(), q.tolist()), rtol=0, atol=1e-15)


def test_greedy_accepts_exactly_when_the_draft_is_ps_argmax():
    p, q = np.array([0.2, 0.5, 0.3]), np.array([0.1, 0.2, 0.7])
    gp, gq = rule.tempered(p, 0), rule.tempered(q, 0)
    assert gp.tolist() == [0.0, 1.0, 0.0] and gq.tolist() == [0.0, 0.0, 1.0]
    assert rule.acceptance(gp, gq)[2] == 0.0  # the draft (2) is not p's argmax (1): rejected
    assert rule.inverse_cdf(rule.residual(gp, gq), random.random()) == 1  # the residual is p's argmax
    assert rule.acceptance(gp, rule.tempered(p, 0))[1] == 1.0


def test_a_temperature_is_p_to_the_one_over_t_normalised():
    p = np.array([0.5, 0.3, 0.2])
    expected = [x**2 / sum(y**2 for y in p) for x in p]
    assert rule.tempered(p, 0.5).tolist() == pytest.approx(expected, abs=1e-15)


def residual_from_target(p, q):
    keep = [qx * min(1.0, px / qx) for px, qx in zip(p, q, strict=True)]
    return [k + (1.0 - sum(keep)) * px for k, px in zip(keep, p, strict=True)]


def mismatched(p, q_sampled, q_ratio):
    """Drafts from q_sampled, kept with min(1, p / q_ratio), rejections from norm(max(0, p - q_ratio))."""
    keep = [qs * min(1.0, px / qr) for px, qs, qr in zip(p, q_sampled, q_ratio, strict=True)]
    excess = [max(0.0, px - qr) for px, qr in zip(p, q_ratio, strict=True)]
    return [k + (1.0 - sum(keep)) * e / sum(excess) for k, e in zip(keep, excess, strict=True)]


def shared(p, q):
    """The uniform that rejected picks the residual's token: [0, 1) cut at every acceptance and every edge
    of the residual's CDF; on each piece each draft's decision and the picked token are fixed."""
    a = [min(1.0, px / qx) for px, qx in zip(p, q, strict=True)]
    excess = [max(0.0, px - qx) for px, qx in zip(p, q, strict=True)]
    cdf = list(itertools.accumulate(e / sum(excess) for e in excess))
    cuts = sorted({0.0, 1.0, *a, *cdf})
    out = [0.0] * len(p)
    for lo, hi in itertools.pairwise(cuts):
        if hi > 1.0 or hi <= lo:
            continue
        mid = (lo + hi) / 2
        for x, qx in enumerate(q):
            if mid < a[x]:
                out[x] += qx * (hi - lo)
            else:
                out[next((y for y, c in enumerate(cdf) if c > mid), len(p) - 1)] += qx * (hi - lo)
    return out


@pytest.mark.parametrize("mode", ["residual_from_target", "draft_probabilities_mismatch", "shared_uniform"])
def test_each_slips_emitted_distribution_is_the_references_analysis_and_parts_from_p(mode):
    rng = np.random.default_rng(11)
    for _ in range(50):
        v, temperature = int(rng.integers(3, 12)), 0.6
        given_p, given_q = rng.dirichlet(np.ones(v)), rng.dirichlet(np.ones(v))
        p, q = rule.tempered(given_p, temperature), rule.tempered(given_q, temperature)
        out = rule.emitted(p, q, recipe_of(mode), given_q)
        if mode == "residual_from_target":
            expected = residual_from_target(p.tolist(), q.tolist())
        elif mode == "draft_probabilities_mismatch":
            expected = mismatched(p.tolist(), q.tolist(), given_q.tolist())
        else:
            expected = shared(p.tolist(), q.tolist())
        np.testing.assert_allclose(out, expected, rtol=0, atol=1e-14)
        assert abs(out.sum() - 1.0) < 1e-14
        # a residual on one token is picked by any uniform: the shared one differs only with two or more
        if (np.maximum(0.0, p - q) > 0).sum() >= 2 or mode != "shared_uniform":
            assert rule.total_variation(out, p) > 1e-6
