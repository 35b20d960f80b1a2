"""Returns weights as [n][H][n] (token first) instead of [H][n][n]."""

from reference_adapter import multi_head_attention as correct


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    result = correct(tokens, heads, causal, output_projection)
    return {**result, "weights": result["weights"].transpose(1, 0, 2)}
