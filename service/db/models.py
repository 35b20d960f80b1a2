"""Typed models. The schema changes only through Alembic migrations (migrations/versions)."""

from .base import Base

__all__ = ["Base"]
