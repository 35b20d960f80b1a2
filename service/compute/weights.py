"""A call's weights, checked once: W_Q, W_K, W_V, W_O and their biases, and latent attention's."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .latent import LatentWeights
from .steps import as_bias, as_weight


@dataclass(frozen=True)
class Projections:
    """W_Q, W_K, W_V, W_O as `[in][out]` float64 arrays, or None for the identity; each one's
    bias `[out]`, or None for none."""

    query: np.ndarray | None
    key: np.ndarray | None
    value: np.ndarray | None
    output: np.ndarray | None
    biases: tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None, np.ndarray | None] = (None,) * 4
    latent: LatentWeights | None = None  # latent attention's weights (keys and values come from them)

    @classmethod
    def of(cls, d: int, kv: int, w_q, w_k, w_v, w_o, biases=(None,) * 4, latent=None) -> Projections:
        """The weights checked against d_model `d` and the key/value width `kv` (an error names the one at fault)."""
        nothing = w_q is None and w_k is None and w_v is None and w_o is None and all(b is None for b in biases)
        if nothing and latent is None:
            return IDENTITY  # the workbench's case: nothing to check
        widths = (d, kv, kv, d)
        names = ("query", "key", "value", "output")
        return cls(
            as_weight(w_q, (d, d), "projections.query"),
            as_weight(w_k, (d, kv), "projections.key"),
            as_weight(w_v, (d, kv), "projections.value"),
            as_weight(w_o, (d, d), "projections.output"),
            tuple(as_bias(b, width, f"biases.{name}") for b, width, name in zip(biases, widths, names, strict=True)),  # type: ignore[arg-type]
            latent,
        )


IDENTITY = Projections(None, None, None, None)
