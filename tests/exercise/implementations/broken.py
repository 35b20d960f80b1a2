"""A correct implementation (handwritten.py) that returns one kind of unusable result, chosen by
MHA_BROKEN: the slips that must get a message, never a traceback."""

import os

import numpy as np
from handwritten import multi_head_attention as correct

BROKEN = os.environ.get("MHA_BROKEN", "")


def multi_head_attention(tokens, heads, causal=True, output_projection=None):
    result = {k: np.asarray(v, dtype=float) for k, v in correct(tokens, heads, causal, output_projection).items()}
    if BROKEN == "raises":
        return {"weights": result["weights"]}["head_outputs"]  # a KeyError in the learner's code
    if BROKEN == "returns_list":
        return [result["weights"], result["concatenated"]]
    if BROKEN == "missing_part":
        del result["head_outputs"]
    if BROKEN == "missing_head_axis":
        result["weights"] = result["weights"][0]
    if BROKEN == "heads_last":
        result["head_outputs"] = result["head_outputs"].transpose(1, 0, 2)
    if BROKEN == "transposed":
        result["concatenated"] = result["concatenated"].T
    if BROKEN == "wrong_n":
        result["weights"] = result["weights"][:, :-1]
    if BROKEN == "strings":
        result["weights"] = [[["half"] * len(row) for row in head] for head in result["weights"].tolist()]
    if BROKEN == "ragged":
        result["concatenated"] = [row[: 1 + i] for i, row in enumerate(result["concatenated"].tolist())]
    if BROKEN == "nan":
        result["output"] = result["output"] * np.nan
    return result
