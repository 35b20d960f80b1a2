"""Defines the function under another name: the exercise must say what it looked for."""


def multihead_attention(tokens, heads, causal=True, output_projection=None):
    return {}
