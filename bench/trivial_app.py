"""The baseline for bench/api.py: the most trivial Flask JSON endpoint, served the same way."""

from flask import Flask, jsonify, request

app = Flask(__name__)


@app.post("/echo")
def echo():
    body = request.get_json()
    return jsonify(ok=True, fields=len(body))
