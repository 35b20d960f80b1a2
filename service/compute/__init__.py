"""The attention engine: pure numpy, no Flask, no database.

The exercise's reference, the benchmarks and the API all call `multi_head_attention`.
"""

from .config import FAILURE_MODES, AttentionConfig
from .engine import AttentionTrace, multi_head_attention
from .errors import AttentionInputError
from .rope import ROPE_STYLES, RopeConfig

__all__ = [
    "FAILURE_MODES",
    "ROPE_STYLES",
    "AttentionConfig",
    "AttentionInputError",
    "AttentionTrace",
    "RopeConfig",
    "multi_head_attention",
]
