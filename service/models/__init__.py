"""The trained models: a byte-level model trained here (byte_model.py: its weights and card in
content/models/) and, with the minilm extra, the pretrained encoder all-MiniLM-L6-v2 (encoder.py).
Each layer's attention is the engine's `multi_head_attention`; what each head does is measured,
not asserted. present.py builds what the API answers about them."""

from __future__ import annotations

from typing import Any

from .byte_model import Model, load_models
from .encoder import Encoder, load_encoders

AnyModel = Model | Encoder

__all__ = ["AnyModel", "Encoder", "Model", "load"]


def load(settings: Any) -> dict[str, AnyModel]:
    """Every model the settings point at: the byte models, then the encoders whose weights are installed."""
    return {**load_models(settings.models_dir), **load_encoders(settings.encoders_dir)}
