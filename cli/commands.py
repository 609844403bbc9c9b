"""Imports every command module so that each registers itself on the app."""

from cli import (
    capture_cmd,  # noqa: F401
    diff_cmd,  # noqa: F401
    doctor_cmd,  # noqa: F401
    env_cmds,  # noqa: F401
    explain_cmd,  # noqa: F401
    mark_cmd,  # noqa: F401
    otel_cmd,  # noqa: F401
    pytest_cmd,  # noqa: F401
    remote_cmds,  # noqa: F401
    replay_cmd,  # noqa: F401
    report_cmds,  # noqa: F401
    schema_cmd,  # noqa: F401
    store_cmds,  # noqa: F401
    sweep_cmd,  # noqa: F401
)
