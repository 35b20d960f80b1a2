"""The attention engine: pure numpy, no Flask, no database.

The exercise's reference, the benchmarks and the API all call `multi_head_attention`.
"""

from .config import FAILURE_MODES, ROPE_STYLES, AttentionConfig, RopeConfig
from .engine import AttentionTrace, multi_head_attention
from .errors import AttentionInputError

__all__ = [
    "FAILURE_MODES",
    "ROPE_STYLES",
    "AttentionConfig",
    "AttentionInputError",
    "AttentionTrace",
    "RopeConfig",
    "multi_head_attention",
]
