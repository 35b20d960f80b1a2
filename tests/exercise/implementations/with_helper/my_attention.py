"""A learner's file that imports a helper module from its own folder."""

from my_helper import attention_heads


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    return attention_heads(tokens, heads, causal, output_projection)
