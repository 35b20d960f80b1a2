"""The models' answers computed in the background process (service/api/attention/offload.py) when what a
request costs is heavy: each process loads a model once, from the files the worker read, and answers as
the worker would (service/api/models.py)."""

from __future__ import annotations

import functools
from typing import Any

from . import AnyModel
from .byte_model import load_models
from .encoder import load_encoders
from .present_inside import lens_body, patch_body
from .speculate import speculate_body

# A model's trace is not here: the head scores it measures for a set of heads switched off are the worker's
# to keep (switching them off and on is then free), and a trace of at most 128 positions is quick.
ANSWERS = {"lens": lens_body, "patch": patch_body, "speculate": speculate_body}


@functools.cache
def _byte_models(directory: str) -> dict[str, AnyModel]:
    return dict(load_models(directory))


@functools.cache
def _encoders(directory: str) -> dict[str, AnyModel]:
    return dict(load_encoders(directory))


def answer(kind: str, models_dir: str, encoders_dir: str, model_id: str, args: dict[str, Any]) -> Any:
    """What `kind` answers for the model `model_id` (one the worker found): the byte models' folder is read
    first, the encoders' (about 90 MB) only for an encoder."""
    model = _byte_models(models_dir).get(model_id) or _encoders(encoders_dir)[model_id]
    return ANSWERS[kind](model, args)
