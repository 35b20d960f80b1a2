"""The workbench's parameters: the ids its controls send in `parameter-changed` events
(frontend/js/pages/workbench.js) and the names analytics gives them. One registry: the
dashboard's names come from here, and tests/lessons/test_parameters.py checks that every id the
workbench sends has a name and every name a control."""

PARAMETERS = {
    "token": "a token coordinate",
    "causal": "the causal mask",
    "reuse_first_slice": "the broken head reuse",
    "failure_mode": "the failure-mode comparison",
    "reset": "reset of the tokens",
    "heads": "the number of heads",
    "kv_heads": "the key/value heads (grouped-query attention)",
    "rope": "RoPE on or off, and its pairing",
    "rope_base": "the RoPE base",
    "projections": "the Q, K, V projections (identity or learned-looking)",
    "output_projection": "the output projection W_O (identity or mixing)",
}
