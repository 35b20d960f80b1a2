"""A two-layer, attention-only, byte-level transformer, in torch.

Written to match the service's numpy inference (service/models/byte_model.py) term for term:
- the residual stream starts as the byte embedding: x = W_E[bytes]          [n, d_model]
- positions enter through rotary position embedding (RoPE, "half" pairing, base 10000) on
  each head's queries and keys, exactly as the engine's `rope` option computes it;
- each layer normalises the residual stream (LayerNorm without affine) and runs the workbench's
  multi-head attention on it with learned weights, [in][out] as the engine takes them
  (Q = X @ W_Q), contiguous head slices, scale 1/sqrt(d_head), causal mask, output
  concat @ W_O; the output is added to the stream: x + attention(LN(x)). No biases, no MLP,
  so a layer is exactly one call of the engine;
- a final LayerNorm (no learned affine) and the unembedding W_U give next-byte logits.
"""

from __future__ import annotations

import math

import torch
from torch import nn

VOCAB = 256


def rope(x: torch.Tensor, base: float) -> torch.Tensor:
    """[.., n, d_head]: the engine's "half" RoPE (service/compute/steps.py): feature i pairs with
    i + d_head/2, rotated by position * base^(-2i/d_head)."""
    n, d_head = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)
    theta = (torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]).to(x.dtype)  # [n, d_head/2]
    cos, sin = theta.cos(), theta.sin()
    x1, x2 = x[..., : d_head // 2], x[..., d_head // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class AttentionOnly(nn.Module):
    def __init__(
        self, d_model: int = 64, heads: int = 4, layers: int = 2, context: int = 128, rope_base: float = 10000.0
    ):
        super().__init__()
        self.d_model, self.heads, self.layers, self.context = d_model, heads, layers, context
        self.rope_base = rope_base
        std = 1.0 / math.sqrt(d_model)
        self.embed = nn.Parameter(torch.randn(VOCAB, d_model) * 0.5)
        self.w_q = nn.ParameterList(nn.Parameter(torch.randn(d_model, d_model) * std) for _ in range(layers))
        self.w_k = nn.ParameterList(nn.Parameter(torch.randn(d_model, d_model) * std) for _ in range(layers))
        self.w_v = nn.ParameterList(nn.Parameter(torch.randn(d_model, d_model) * std) for _ in range(layers))
        self.w_o = nn.ParameterList(nn.Parameter(torch.randn(d_model, d_model) * std * 0.5) for _ in range(layers))
        self.unembed = nn.Parameter(torch.randn(d_model, VOCAB) * std)

    def forward(self, tokens: torch.Tensor, keep: list | None = None) -> torch.Tensor:
        """tokens [B, n] (bytes) -> logits [B, n, 256]; `keep` collects each layer's weights."""
        batch, n = tokens.shape
        x = self.embed[tokens]  # [B, n, d]: positions enter only through RoPE
        mask = torch.ones(n, n, dtype=torch.bool, device=tokens.device).triu(1)  # True above the diagonal
        d_head = self.d_model // self.heads
        for layer in range(self.layers):
            split = lambda m: m.view(batch, n, self.heads, d_head).transpose(1, 2)  # noqa: E731 [B, H, n, dh]
            h = nn.functional.layer_norm(x, (self.d_model,), eps=1e-5)  # what the layer's attention reads
            q, k, v = split(h @ self.w_q[layer]), split(h @ self.w_k[layer]), split(h @ self.w_v[layer])
            q, k = rope(q, self.rope_base), rope(k, self.rope_base)
            scores = q @ k.transpose(-1, -2) / math.sqrt(d_head)  # [B, H, n, n]
            weights = scores.masked_fill(mask, float("-inf")).softmax(-1)
            if keep is not None:
                keep.append(weights.detach())
            concat = (weights @ v).transpose(1, 2).reshape(batch, n, self.d_model)  # [B, n, d]
            x = x + concat @ self.w_o[layer]
        x = nn.functional.layer_norm(x, (self.d_model,), eps=1e-5)
        return x @ self.unembed

    def tensors(self) -> dict[str, torch.Tensor]:
        """The weights under the names the service reads."""
        out = {"embed": self.embed, "unembed": self.unembed}
        for layer in range(self.layers):
            for name in ("w_q", "w_k", "w_v", "w_o"):
                out[f"layers.{layer}.{name}"] = getattr(self, name)[layer]
        return {k: v.detach().to(torch.float32).contiguous() for k, v in out.items()}
