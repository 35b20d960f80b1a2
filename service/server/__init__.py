"""The server room: gunicorn's buffering worker (worker.py), what it reads and writes on the wire
before a request reaches a thread (wire.py), the refusals it repeats without one (penalties.py),
gunicorn's own errors as problem+json and its hooks (hooks.py). Below the edge, which imports it;
it imports nothing above it (an app's work after a fork is handed to it: `hooks.on_worker_start`)."""
