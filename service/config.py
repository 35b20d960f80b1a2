"""Settings: typed defaults, then WORKBENCH_* environment variables, then a mapping; validated once."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SECRET = "dev-only-insecure-secret"


QUOTAS = tuple(f"quota_{k}_{m}" for k in ("learner", "session", "platform") for m in ("events", "bytes"))


class ConfigError(ValueError):
    """A setting is missing, malformed or unsafe; raised at start-up, never later."""


@dataclass(frozen=True)
class Settings:
    env: str = "development"  # development | production | testing
    database_url: str = f"sqlite:///{ROOT / 'var' / 'workbench.db'}"
    secret_key: str = DEFAULT_SECRET
    debug: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    content_dir: str = str(ROOT / "content" / "lessons")
    models_dir: str = str(ROOT / "content" / "models")  # trained models (training/train.py)
    encoders_dir: str = str(ROOT / "content" / "encoders")  # pretrained encoders' cards (the minilm extra)
    pseudo_locale: bool = False  # offer ?lang=en-XA, accented and longer, for layout checks (service/i18n.py)
    # Request limits, checked on raw input before any allocation.
    max_content_length: int = 4 * 1024 * 1024
    max_tokens: int = 1024  # n
    max_d_model: int = 1024
    max_heads: int = 64
    max_score_cells: int = 512 * 1024  # heads * n * n: also bounds the response (about 30 MB of JSON)
    max_decode_cells: int = 1024 * 1024  # the numbers a decode's answer holds (each step's cache included)
    max_tiles: int = 4096  # the tiles of an online softmax, over every head: each is one step of its loop
    max_tiled_cells: int = 1024 * 1024  # the numbers its answer holds (each tile's rows' running values)
    max_batch_events: int = 500
    challenge_ttl_seconds: int = 3600  # how long an exercise challenge can be answered
    auth_cache_seconds: float = 5.0  # a verified key is trusted this long without a database read
    # Traces with at least this many score cells run in a background (SCHED_IDLE) process:
    # at most `concurrency` at once on the machine (0: one less than the cores); each worker
    # lets `waiting` more wait up to `wait_seconds` for a slot and refuses the rest with 503.
    heavy_compute_cells: int = 65536
    heavy_compute_concurrency: int = 0
    heavy_compute_waiting: int = 4  # half of gunicorn's default 8 threads
    heavy_compute_wait_seconds: float = 10.0
    heavy_compute_seconds: float = 60.0  # a large trace not done within this is a 503 (nothing waits forever)
    # Slow clients without a proxy in front (service/server/worker.py, service/edge/body.py): as nginx's timeouts.
    client_stall_seconds: float = 30.0  # a send or receive that makes no progress this long fails
    body_seconds: float = 30.0  # a request must arrive whole within this
    # /readyz says not ready while the SQLite database's disk has less room than what one maximal
    # request may write (its body four times over: rows, index entries, the WAL's copy) and this margin.
    ready_margin_bytes: int = 16 * 1024 * 1024
    send_seconds: float = 60.0  # an answer must be sent whole within this, however slowly the client reads
    # What one worker holds for its clients at once: bodies still arriving and answers not yet
    # read (past it: new bodies are a 503, answers go to disk); one answer holds at most
    # answer_room_bytes in memory (more goes to a temporary file the main loop sends, within send_seconds).
    client_bytes_per_worker: int = 128 * 1024 * 1024
    answer_room_bytes: int = 4 * 1024 * 1024
    # Connections one address may hold in one worker (trusted proxies, WORKBENCH_FORWARDED_ALLOW_IPS, exempt)
    connections_per_address: int = 128
    background_parse_bytes: int = 262144  # compute bodies this large are parsed in the background process
    # Compute budgets in cells (service/edge/limits.py): per client (shared store) and per worker.
    compute_free_cells: int = 4096  # the workbench's requests cost a few dozen: never charged
    compute_budget_client: str = "30000000/minute"  # about 19 maximum-size traces a minute
    compute_budget_address: str = "60000000/minute"  # every browser session of one address, together
    session_mint_limit: str = "300/hour"  # new browser sessions one address may start
    # Shared fairly by network (service/edge/limits.py FairShare): one network alone takes half, about
    # half a core of this machine's throughput; n networks n/(n+1) of it.
    compute_budget_worker: str = "40000000/10 seconds"
    # Storage quotas (service/db/quotas.py): events, and bytes of them, stored per period by one
    # learner, one browser session, the browser sessions of one network without a platform's launch
    # (a /24 or /48: sessions are free to start), and one platform, as "amount/period"; "" turns one
    # off. The web platform's own quota is an alarm (the fullest-ratio metric), never a refusal.
    quota_learner_events: str = "5000/day"
    quota_learner_bytes: str = "20000000/day"
    quota_session_events: str = "2000/hour"
    quota_session_bytes: str = "5000000/hour"
    quota_network_events: str = "20000/day"  # a classroom behind one address: thirty learners, many times over
    quota_network_bytes: str = "40000000/day"
    # A browser session without a platform's launch sends a few small events at a time (the workbench,
    # the offline queue): its batches and each event's data are held to these, far under a key's.
    session_batch_events: int = 50
    session_data_bytes: int = 4096
    quota_platform_events: str = "5000000/day"
    quota_platform_bytes: str = "5000000000/day"
    # Platforms' origins allowed by CORS (comma separated in the environment).
    cors_origins: tuple[str, ...] = ()
    # Who may frame the workbench (CSP frame-ancestors), besides the origin itself.
    frame_ancestors: tuple[str, ...] = ()
    ratelimit_storage_uri: str = "memory://"
    ratelimit_key: str = "600/minute"
    ratelimit_learner: str = "300/minute"
    ratelimit_enabled: bool = True
    sqlite_busy_timeout_ms: int = 5000
    k_anonymity: int = 5
    # An analytics read rolls up first when more events than this wait after the rollups'
    # watermark (it adds up fewer itself); 0: reads never write (a read replica, or when
    # `workbench rollups refresh --loop` runs).
    rollups_refresh_on_read_after: int = 5000
    # The analytics store past one database (docs/scaling.md): "clickhouse://user:password@host:8123/db"
    # or "chdb:///path" (ClickHouse in this process; one process at a time). Unset: the SQL rollups
    # answer. `workbench analytics sync` copies events and erasures to it.
    analytics_url: str = ""
    # Events stored more than this many whole months ago are deleted (PostgreSQL drops the
    # month's partition) by `workbench db maintain` or the rollups loop, once rolled up;
    # the rollups keep counting them. 0 keeps every event.
    events_retention_months: int = 0
    activity_base: str = "https://attention-workbench.example/xapi"  # xAPI activity IRIs start here
    export_settle_seconds: int = 10  # exports stop this far behind now: later commits cannot slip in
    metrics_token: str = ""
    # Where people and platforms reach the service ("https://workbench.example.edu"): absolute URLs
    # (a challenge's answers_url, the LTI redirect and configuration) are made from it, never from
    # the request's Host header. Unset: http://HOST:PORT (what `make run` serves); production needs it.
    public_url: str = ""
    proxy_hops: int = 0
    log_json: bool = False
    retain_freed_memory: bool = True  # glibc malloc thresholds, see service/api/attention/allocator.py
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, mapping: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "extra":
                continue
            raw = environ.get(f"WORKBENCH_{f.name.upper()}")
            if raw is not None:
                values[f.name] = _parse(f.name, f.type, raw)
        extra: dict[str, Any] = {}
        for key, value in (mapping or {}).items():
            name = key.lower()
            if name in {f.name for f in fields(cls)} and name != "extra":
                values[name] = tuple(value) if isinstance(value, list) else value
            else:
                extra[key] = value
        settings = replace(cls(), **values, extra=extra)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.env not in ("development", "production", "testing"):
            raise ConfigError(f"WORKBENCH_ENV must be development, production or testing, got {self.env!r}")
        for name in (
            "max_tokens",
            "max_d_model",
            "max_heads",
            "max_score_cells",
            "max_decode_cells",
            "max_tiles",
            "max_tiled_cells",
            "max_content_length",
            "max_batch_events",
            "k_anonymity",
            "heavy_compute_waiting",
            "challenge_ttl_seconds",
            "connections_per_address",
            "client_bytes_per_worker",
            "session_batch_events",
            "session_data_bytes",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"WORKBENCH_{name.upper()} must be at least 1")
        for name in ("rollups_refresh_on_read_after", "events_retention_months"):
            if getattr(self, name) < 0:
                raise ConfigError(f"WORKBENCH_{name.upper()} cannot be negative")
        if self.auth_cache_seconds < 0 or self.auth_cache_seconds > 300:
            raise ConfigError("WORKBENCH_AUTH_CACHE_SECONDS must be between 0 and 300")
        if min(self.client_stall_seconds, self.body_seconds, self.send_seconds) <= 0:
            raise ConfigError("WORKBENCH_CLIENT_STALL_SECONDS, _BODY_SECONDS and _SEND_SECONDS must be above 0")
        if self.answer_room_bytes < 0 or self.ready_margin_bytes < 0:
            raise ConfigError("WORKBENCH_ANSWER_ROOM_BYTES and WORKBENCH_READY_MARGIN_BYTES cannot be negative")
        if self.heavy_compute_seconds <= 0:
            raise ConfigError("WORKBENCH_HEAVY_COMPUTE_SECONDS must be above 0")
        if self.heavy_compute_concurrency < 0 or self.heavy_compute_wait_seconds < 0:
            raise ConfigError("WORKBENCH_HEAVY_COMPUTE_CONCURRENCY and _WAIT_SECONDS cannot be negative")
        self._validate_budgets()
        self._validate_quotas()
        self._validate_places()

    def _validate_places(self) -> None:
        """The database, the public address, and what production needs."""
        if not self.database_url.startswith(("sqlite", "postgresql")):
            raise ConfigError(
                f"WORKBENCH_DATABASE_URL must be sqlite:// or postgresql+psycopg://, got {self.database_url!r}"
            )
        if self.is_sqlite and _in_memory(self.database_url):
            raise ConfigError(
                f"WORKBENCH_DATABASE_URL {self.database_url!r} is an in-memory SQLite database: each connection "
                "and each worker would get its own, empty and unmigrated; name a file, as sqlite:///var/workbench.db"
            )
        if self.analytics_url and not self.analytics_url.startswith(("clickhouse://", "clickhouses://", "chdb:///")):
            raise ConfigError(
                f"WORKBENCH_ANALYTICS_URL must be clickhouse://user:password@host:8123/database or chdb:///path, "
                f"got {self.analytics_url.split('@')[-1]!r}"
            )
        if self.public_url and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[\w./~-]*)?", self.public_url):
            raise ConfigError(f"WORKBENCH_PUBLIC_URL must be http(s)://host[:port][/path], got {self.public_url!r}")
        if self.env == "production":
            if self.secret_key == DEFAULT_SECRET or len(self.secret_key) < 32:
                raise ConfigError(
                    "production needs WORKBENCH_SECRET_KEY: at least 32 random characters, not the default"
                )
            if self.debug:
                raise ConfigError("WORKBENCH_DEBUG must be off in production")
            if not self.public_url:
                raise ConfigError("production needs WORKBENCH_PUBLIC_URL: the address people reach the service at")

    def _validate_budgets(self) -> None:
        """Each budget must hold at least one request of the largest size the caps allow."""
        from limits import parse

        largest = 2 * (self.max_score_cells + self.max_tokens * self.max_d_model)  # a maximum comparison
        for name in ("compute_budget_client", "compute_budget_address", "compute_budget_worker"):
            try:
                amount = parse(getattr(self, name)).amount
            except ValueError as error:
                raise ConfigError(f"WORKBENCH_{name.upper()} must read like '30000000/minute': {error}") from None
            if amount < largest:
                raise ConfigError(
                    f"WORKBENCH_{name.upper()} must allow at least {largest:,} cells a window "
                    "(one maximum-size comparison under the caps)"
                )

    def _validate_quotas(self) -> None:
        from limits import parse

        for name in QUOTAS:
            value = getattr(self, name)
            if not value:
                continue
            try:
                item = parse(value)
            except ValueError as error:
                raise ConfigError(f"WORKBENCH_{name.upper()} must read like '5000/day', or be empty: {error}") from None
            if item.amount < 1 or item.get_expiry() < 1:
                raise ConfigError(f"WORKBENCH_{name.upper()} must allow at least 1 per period")

    @property
    def public_base(self) -> str:
        """The service's own address, for absolute URLs (no trailing slash)."""
        return self.public_url.rstrip("/") or f"http://{self.host}:{self.port}"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def _parse(name: str, kind: Any, raw: str) -> Any:
    kind = str(kind)
    try:
        if kind == "bool":
            lowered = raw.strip().lower()
            if lowered not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                raise ValueError(raw)
            return lowered in ("1", "true", "yes", "on")
        if kind == "int":
            return int(raw)
        if kind == "float":
            value = float(raw)
            if value != value or value in (float("inf"), float("-inf")):
                raise ValueError(raw)
            return value
        if kind.startswith("tuple"):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"WORKBENCH_{name.upper()}={raw!r} is not a valid {kind}") from None
    return raw


def _in_memory(url: str) -> bool:
    """`sqlite://`, `sqlite:///:memory:` or a `mode=memory` URI: no file behind it."""
    path, _, query = url.partition("///")[2].partition("?")
    return path in ("", ":memory:") or "mode=memory" in query
