"""gunicorn settings for production (`gunicorn -c gunicorn.conf.py "service.app:create_app()"`).

Workers and threads come from the environment; every limit a proxy would also enforce is set.
Engines are made lazily in each worker after the fork (service/db/engine.py), never shared.
"""

import os
import shutil
import tempfile

bind = os.environ.get("WORKBENCH_BIND", "127.0.0.1:8000")  # the image sets 0.0.0.0:8000 (behind its proxy)
# chDB (WORKBENCH_ANALYTICS_URL=chdb://...) opens its directory in one process: one worker, which
# also runs the sync (post_worker_init).
_in_process_analytics = os.environ.get("WORKBENCH_ANALYTICS_URL", "").startswith("chdb:")
workers = 1 if _in_process_analytics else int(os.environ.get("WORKBENCH_WORKERS", "2"))
threads = int(os.environ.get("WORKBENCH_THREADS", "8"))  # mostly waiting on the database or a slot
# gunicorn's threaded worker, except that a request reaches a thread only once it has arrived whole
# (slow clients wait in the main loop, not in a thread), and one address holds at most
# WORKBENCH_CONNECTIONS_PER_ADDRESS connections per worker: service/worker.py
worker_class = "service.worker.BufferingWorker"
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

# Prometheus counters from every worker, summed at scrape time: one directory per instance
# (named after the master's pid), so two instances on one machine neither mix nor wipe theirs.
_metrics_dir = os.environ.setdefault(
    "PROMETHEUS_MULTIPROC_DIR", os.path.join(tempfile.gettempdir(), f"workbench-metrics-{os.getpid()}")
)


def on_starting(server):
    from service.config import Settings
    from service.deployment import per_worker_limits_warning, refuse_public_bind_without_secret

    settings = Settings.load()
    refuse_public_bind_without_secret([str(b) for b in server.cfg.bind], settings)
    warning = per_worker_limits_warning(settings, server.cfg.workers)
    if warning:
        server.log.warning(warning)
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    os.makedirs(_metrics_dir, exist_ok=True)


def on_exit(server):
    shutil.rmtree(_metrics_dir, ignore_errors=True)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def post_worker_init(worker):
    from service.api.attention import offload as heavy

    heavy.warm_up(worker.wsgi)  # the low-priority process for large traces starts with the worker
    if _in_process_analytics:
        from service.db.clickhouse import sync_in_background

        sync_in_background(worker.wsgi)


def post_fork(server, worker):
    from service.edge.problems import install_in_gunicorn

    install_in_gunicorn()  # errors gunicorn answers itself (bad request line, URI too long) as problem+json
