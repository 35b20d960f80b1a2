"""Database: typed SQLAlchemy tables (tables.py), one engine per process, sessions for reads and writes."""

from .engine import Database, DatabaseUnavailable, init_app

__all__ = ["Database", "DatabaseUnavailable", "init_app"]
