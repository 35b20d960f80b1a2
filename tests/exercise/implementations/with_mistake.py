"""An implementation that makes one known mistake (MHA_MISTAKE), computed by the service's engine."""

import os

import numpy as np

from service.compute import multi_head_attention as engine
from service.exercise.diagnose import expected_outputs

MISTAKE = os.environ["MHA_MISTAKE"]


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    engine(tokens, heads)  # the engine's own error for an incompatible head count
    out = expected_outputs(tokens, heads, causal, None if MISTAKE == "no_output_projection" else MISTAKE)
    concatenated = out["concatenated"]
    if output_projection is None or MISTAKE == "no_output_projection":
        output = concatenated
    else:
        output = concatenated @ np.asarray(output_projection)
    return {**out, "output": output}
