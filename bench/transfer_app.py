"""The floor for bench/api.py's large trace: an answer of the same size made in advance, served
by the same gunicorn to the same client (it reads the same body first), so the figure shows
what moving the bytes costs before anything is computed or encoded."""

import io

from flask import Flask, request, send_file

app = Flask(__name__)
_DATA = bytearray(64 * 1024 * 1024)  # zeros: the content does not matter, its size does


@app.post("/blob/<int:size>")
def blob(size: int):
    request.get_data()  # the same body the service reads
    return send_file(io.BytesIO(memoryview(_DATA)[:size]), mimetype="application/octet-stream")


@app.get("/")
def ready():
    return "ok"
