"""Environment variable names and defaults shared by the library and the command line: a
module with no imports, so that the CLI can name its options without loading the library."""

DEFAULT_STORE = "snapshots"
STORE_ENV = "SANDBOX_STORE"
"""Environment variable naming the snapshot store (a folder, or ``s3://BUCKET/PREFIX``)."""
SPOOL_ENV = "SANDBOX_SPOOL"
"""Environment variable naming the local spool folder of an ``s3://`` store."""
SERVICES_ENV = "SANDBOX_SERVICES_JSON"
"""Environment variable naming a services JSON file (as ``--services-json``)."""
BASE_ENV = "SANDBOX_BASE_IMAGE"
"""Environment variable naming the base image (default: the locally built one)."""
PREDICATE_FORMS = (
    "exit!=0 | exit==N | exception=Type[:message] | sql:SERVICE=QUERY | result:PATH OP VALUE "
    "(OP: == != > < contains not_contains) | marked[:reason]"
)
"""The one-line failure predicate forms (:mod:`sandbox.snapshot.predicate_syntax`)."""
FAILURE_EVENT = "sandbox.failure"
"""The name of the ``state`` event a run writes when it is marked failed (its data: the
:class:`~sandbox.snapshot.manifest.Failure`)."""
REQUEST_EVENT = "sandbox.request"
"""The name of the ``state`` event holding the headers and body of the HTTP request a
captured service run answered (:mod:`sandbox.capture.inbound`)."""
TIMEOUT_FACTOR = 10.0
"""A replayed run's default wall-clock limit is this many times the recorded run's duration
(:mod:`sandbox.replay.conditions.deadline`) ..."""
TIMEOUT_FLOOR = 60.0
"""... and at least this many seconds."""
TIMEOUT_HELP = (
    "Stop a replayed run after SECONDS of wall-clock time (the agent killed, the services "
    "reset) and count it inconclusive: 'timeout after N s'. Default: "
    f"{TIMEOUT_FACTOR:g}x the recorded run's duration, at least {TIMEOUT_FLOOR:g} s (and "
    "twice what a script ran before the run's block)."
)
IMPORTED_FROM_LABEL = "imported_from"
"""Manifest label naming what a run was made from when it was not captured ..."""
TRACE_SOURCE = "opentelemetry"
"""... ``opentelemetry``: an OTLP trace (:mod:`sandbox.otel.importer`), which records model
calls, tool calls and the result, and no HTTP headers, clock reads or random draws."""
OPENED_LABEL = "sandbox.opened"
"""Manifest label of a run that a program opened itself (``capture.run`` as a decorator or a
``with`` block in a script, its entrypoint the command line) ..."""
OPENED_IN_PROGRAM = "capture.run"
"""... its value: the run began when the program entered ``capture.run``, after what the
program did first (its imports), so its replay begins its recording there too
(:mod:`sandbox.replay.command`)."""
OPENING_LABEL = "sandbox.opening"
"""Manifest label of a run a program opened itself while no other was open: which
``capture.run`` block of the process it was (``"1"`` for the first), so that the replay of a
program that opens several records that one (:mod:`sandbox.capture.openings`)."""
OPENING_AFTER_LABEL = "sandbox.opening.after_s"
"""... and how many seconds the program had run before that block: its replay runs that
part again, and its default time limit counts it (:mod:`sandbox.replay.conditions.deadline`)."""
OPENING_CALL_LABEL = "sandbox.opening.call"
"""Manifest label of a run a decorated function of a script opened: the call, as JSON
(``{"function", "args", "kwargs"}``), by which the replay of the script finds its block
among blocks opened at once (threads). At most :data:`CALL_LABEL_MAX` characters."""
CALL_LABEL_MAX = 2000
NAMING_LABEL = "sandbox.naming"
NAMING_BY_ORIGIN = "origin"
"""The label of a run whose asyncio tasks were named as the run created them and whose
work handed to thread pools was named by its submission
(:attr:`sandbox.seam.boundary.Boundary.names_by_origin`): one without it was captured
before that naming, and is replayed naming its tasks and pool work as it was."""
OVERLAPPED_LABEL = "capture.overlapped_runs"
"""Manifest label counting the other runs of the capturing process that recorded while the
run did: its services' end states, taken when it ended, may hold their writes."""
