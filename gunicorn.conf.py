"""gunicorn settings for production (`gunicorn -c gunicorn.conf.py "service.app:create_app()"`).

Workers and threads come from the environment; every limit a proxy would also enforce is set.
Engines are made lazily in each worker after the fork (service/db/engine.py), never shared.
"""

import os

bind = os.environ.get("WORKBENCH_BIND", "127.0.0.1:8000")  # the image sets 0.0.0.0:8000 (behind its proxy)
# chDB (WORKBENCH_ANALYTICS_URL=chdb://...) opens its directory in one process: one worker, which
# also runs the sync (post_worker_init).
_in_process_analytics = os.environ.get("WORKBENCH_ANALYTICS_URL", "").startswith("chdb:")
workers = 1 if _in_process_analytics else int(os.environ.get("WORKBENCH_WORKERS", "2"))
threads = int(os.environ.get("WORKBENCH_THREADS", "8"))  # mostly waiting on the database or a slot
# gunicorn's threaded worker, except that a request reaches a thread only once it has arrived whole
# (slow clients wait in the main loop, not in a thread), and one address holds at most
# WORKBENCH_CONNECTIONS_PER_ADDRESS connections per worker: service/server/worker.py
worker_class = "service.server.worker.BufferingWorker"
timeout = int(os.environ.get("WORKBENCH_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("WORKBENCH_GRACEFUL_TIMEOUT", "20"))
keepalive = 5
max_requests = int(os.environ.get("WORKBENCH_MAX_REQUESTS", "200000"))  # a restart re-imports numpy: rare
max_requests_jitter = 20000
limit_request_line = 8190
limit_request_fields = 64
limit_request_field_size = 8190
accesslog = None  # the app logs each request as JSON, with the route instead of the path
forwarded_allow_ips = os.environ.get("WORKBENCH_FORWARDED_ALLOW_IPS", "127.0.0.1")
# gunicorn 27's control socket (gunicornc) defaults to one path in the user's home, shared by every
# instance on the machine: off unless WORKBENCH_CONTROL_SOCKET names this instance's own path.
control_socket = os.environ.get("WORKBENCH_CONTROL_SOCKET", "")
control_socket_disable = not control_socket

# Every hook is the server room's (service/server/hooks.py): the checks before serving, one metrics
# directory per instance, gunicorn's own errors as problem+json, the app's work in each worker.
from service.server.hooks import (  # noqa: E402,F401  (gunicorn reads them from this module)
    child_exit,
    metrics_directory,
    on_exit,
    on_starting,
    post_fork,
    post_worker_init,
)

metrics_directory()  # named now, in the master, so every worker inherits it
