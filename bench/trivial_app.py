"""The baselines for bench/api.py, served the same way as the service: the most trivial Flask JSON
endpoint, and a bare numpy handler (the same trace computed and encoded in a plain Flask view,
without validation, limits, metrics or the service's headers) to show what the maths costs."""

import numpy as np
from flask import Flask, Response, jsonify, request

from service.compute import multi_head_attention
from service.edge.json_codec import dumps_bytes
from service.trace_json import trace_json

app = Flask(__name__)


@app.post("/echo")
def echo():
    body = request.get_json()
    return jsonify(ok=True, fields=len(body))


@app.post("/bare")
def bare():
    body = request.get_json()
    trace = multi_head_attention(np.array(body["tokens"]), body["heads"], causal=body.get("causal", True))
    return Response(dumps_bytes(trace_json(trace)), mimetype="application/json")
