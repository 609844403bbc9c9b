"""What a checked query (an SQL invariant) may be: **one** statement that only reads.

An invariant comes from a snapshot, which may come from someone else's bundle, or from a
``--fail-if`` run against a live database: it is data, never a script. Every kind that
answers SQL (:class:`~sandbox.services.base.SQLQuery`) passes the text through
:func:`read_statement` before it reaches the server, then runs it confined in its own way
(a read-only transaction, an unprivileged role, a time limit: see each kind).

The text is split by a real SQL tokenizer (``sqlparse``: quotes, dollar quotes and comments
are understood, so ``SELECT ';'`` is one statement), and the statement must begin with one
of :data:`READ_STATEMENTS`; a ``WITH`` must end in a ``SELECT`` (``WITH d AS (...) DELETE``
is refused). A data-modifying CTE inside a ``SELECT`` passes this check, and is refused by
the read-only transaction every kind runs the statement in.
"""

from __future__ import annotations

import sqlparse
from sqlparse.exceptions import SQLParseError
from sqlparse.sql import Statement
from sqlparse.tokens import Comment, Whitespace

from sandbox.errors import QueryRefusedError

READ_STATEMENTS = ("SELECT", "WITH", "VALUES", "SHOW", "TABLE")
"""The first words a checked statement may start with."""
TIMEOUT_S = 30.0
"""How long a checked statement may run before it is cancelled."""
MAX_CHARS = 10_000
"""The longest invariant read (a longer text is refused before it is tokenized)."""


def _words(statement: Statement) -> list[str]:
    """The statement's tokens in order, upper-cased, without whitespace and comments."""
    return [
        token.normalized.upper()
        for token in statement.flatten()  # type: ignore[no-untyped-call]
        if not token.is_whitespace and token.ttype not in Comment and token.ttype not in Whitespace
    ]


def read_statement(text: str) -> tuple[str, str]:
    """``(statement, first word)`` when ``text`` is one statement that starts with one of
    :data:`READ_STATEMENTS` (a trailing ``;`` allowed, and removed); else
    :class:`QueryRefusedError` saying why."""
    if len(text) > MAX_CHARS:
        raise QueryRefusedError(f"the query is longer than {MAX_CHARS} characters")
    try:
        parsed = sqlparse.parse(text)
    except SQLParseError as exc:
        raise QueryRefusedError(f"the query cannot be read: {exc}") from None
    statements = [s for s in parsed if _words(s) and _words(s) != [";"]]
    if not statements:
        raise QueryRefusedError("the query holds no statement")
    if len(statements) > 1:
        raise QueryRefusedError(
            f"the query holds {len(statements)} statements; an invariant is one statement"
        )
    (statement,) = statements
    words = _words(statement)
    first = words[0]
    if first not in READ_STATEMENTS:
        allowed = ", ".join(READ_STATEMENTS)
        raise QueryRefusedError(f"an invariant is one read-only statement ({allowed}), not {first}")
    ends = str(statement.get_type())  # type: ignore[no-untyped-call]
    if first == "WITH" and ends != "SELECT":
        raise QueryRefusedError(f"an invariant only reads: this WITH ends in {ends}, not SELECT")
    body = str(statement).strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    return body, first
