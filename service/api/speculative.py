"""Speculative sampling on posted distributions: `POST /speculative/acceptance` (each token's acceptance
min(1, p/q), the acceptance rate, the residual, the emitted distribution computed exactly, the tokens per
target pass, and a slip's emitted distribution beside it: service/compute/speculative.py)."""

from __future__ import annotations

import numpy as np
from flask.views import MethodView

from ..compute import speculative as rule
from ..compute.failure_modes import recipe_of
from .schemas.speculative import AcceptanceRequestSchema, AcceptanceSchema
from .smorest import JSON_BODY_ERRORS, Blueprint

blp = Blueprint(
    "speculative",
    __name__,
    url_prefix="/api/v1/speculative",
    description="Speculative sampling: accept a draft with min(1, p/q), resample from the residual, emit p exactly.",
)


@blp.route("/acceptance")
class Acceptance(MethodView):
    @blp.arguments(
        AcceptanceRequestSchema(),
        examples={"the lesson's case": {"value": {"p": [0.6, 0.3, 0.1], "q": [0.3, 0.5, 0.2], "gamma": 4}}},
    )
    @blp.response(200, AcceptanceSchema)
    @blp.problems(*JSON_BODY_ERRORS)
    def post(self, args):
        """The acceptance rule on p and q: what each token's draft keeps, the residual, and what is emitted"""
        given_p, given_q = (np.array(args[k], dtype=np.float64) for k in ("p", "q"))
        given_p, given_q = given_p / given_p.sum(), given_q / given_q.sum()
        temperature, gamma, slip = args["temperature"], args["gamma"], args.get("failure_mode")
        p, q = rule.tempered(given_p, temperature), rule.tempered(given_q, temperature)
        emitted = rule.emitted(p, q, recipe_of(None))
        alpha = float(np.minimum(p, q).sum())
        broken = None
        if slip:
            wrong = rule.emitted(p, q, recipe_of(slip), given_q)
            broken = {"emitted": wrong.tolist(), "total_variation": rule.total_variation(wrong, p)}
        return {
            "temperature": temperature,
            "p": p.tolist(),
            "q": q.tolist(),
            "acceptance": rule.acceptance(p, q).tolist(),
            "alpha": alpha,
            "total_variation": rule.total_variation(p, q),
            "accepted": np.minimum(p, q).tolist(),
            "residual": rule.residual(p, q).tolist(),
            "emitted": emitted.tolist(),
            "emitted_error": float(np.abs(emitted - p).max()),
            "expected_tokens": expected(alpha, gamma),
            "curve": [expected(alpha, g) for g in range(1, rule.MAX_GAMMA + 1)],
            "failure_mode": slip,
            "broken": broken,
        }


def expected(alpha: float, gamma: int) -> dict:
    return {
        "gamma": gamma,
        "formula": rule.expected_tokens(alpha, gamma),
        "enumerated": rule.enumerated_tokens(alpha, gamma),
    }
