"""The trace of one computation: every intermediate, float64, read-only."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import AttentionConfig


@dataclass(frozen=True, eq=False)
class AttentionTrace:
    """Everything one call computed, float64, read-only arrays.

    query/key/value are what each query head used: after RoPE, and under grouped-query
    attention the key/value head shared by that query head. Under latent attention (latent.py)
    each head's query and key are [content | decoupled RoPE part]; in the absorbed form K and V are
    never made (None) and the head's query in latent space and its mix of the latent are kept.
    """

    config: AttentionConfig
    tokens: np.ndarray  # [n, d_model]
    query: np.ndarray  # [H, n, d_head (+ d_rope)]
    key: np.ndarray | None  # [H, n, d_head (+ d_rope)]; None in the absorbed latent form
    value: np.ndarray | None  # [H, n, d_head]; None in the absorbed latent form
    scores: np.ndarray  # [H, n, n] scaled, before masking
    mask: np.ndarray  # [n, n] True where masked
    weights: np.ndarray  # [H, n, n]
    head_outputs: np.ndarray  # [H, n, d_head]
    concat: np.ndarray  # [n, d_model]
    output: np.ndarray  # [n, d_model] after W_O
    residual: np.ndarray  # [n, d_model] tokens + output
    features: np.ndarray  # [H, d_head] which projected query features each head read
    kv_features: np.ndarray  # [kv_heads, d_head] which projected key/value features each kv head read
    kv_head: np.ndarray  # [H] the kv head each query head used
    feature_ranges: tuple[tuple[int, int] | None, ...]  # each head's features as [start, end) if contiguous, else None
    query_before_rope: np.ndarray | None = None  # [H, n, d_head] with RoPE on: Q_h before its rotation
    key_before_rope: np.ndarray | None = None  # [H, n, d_head] with RoPE on: K_h before its rotation
    latent: np.ndarray | None = None  # [n, d_c] latent attention: C = X W_DKV, what a cache keeps
    rope_key: np.ndarray | None = None  # [n, d_rope] latent attention's decoupled RoPE key, shared by every head
    latent_query: np.ndarray | None = None  # [H, n, d_c] absorbed: each head's content query times W_UK,h^T
    latent_output: np.ndarray | None = None  # [H, n, d_c] absorbed: each head's weights times C, before W_UV,h

    @property
    def d_head(self) -> int:
        return self.config.d_head
