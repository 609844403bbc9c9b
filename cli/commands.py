"""Imports every command module so that each registers itself on the app."""

from cli import schema_cmd  # noqa: F401
