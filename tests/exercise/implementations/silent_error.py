"""Splits with a bare reshape: an incompatible head count fails with numpy's own message."""

import numpy as np


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    x = np.asarray(tokens, dtype=float)
    n, d_model = x.shape
    x.reshape(n, heads, d_model // heads)  # raises "cannot reshape array of size 12 into shape (2,4,1)"
    import reference_adapter

    return reference_adapter.multi_head_attention(tokens, heads, causal, output_projection)
