"""Marshmallow schemas, one module per resource; `fields` holds the strict field types they share."""
