"""The attention resource, whole: `POST /attention`, `/attention/compare`, `/attention/decode` and
`/attention/tiled` (views.py), their caps and cost (caps.py), the traces they answer as JSON or
safetensors (traces.py, safetensors_codec.py), large traces computed in a background process
(offload.py, with the allocator tuning it runs under: allocator.py), and the challenge shortcut made
visible (shortcut.py).

Nothing is imported here: the background process imports offload.py without the views and numpy.
"""
