"""One line of text for a failure predicate, as ``--fail-if`` and ``--predicate`` take it.

======================================  ===============================================
text                                    predicate
======================================  ===============================================
``exit!=0``, ``exit==3``, ``exit>1``    :class:`ExitCodePredicate` (``=`` means ``==``)
``exception=KeyError``                  :class:`ExceptionPredicate` (a qualified name
``exception=shop.Declined:card``        or a bare one; after ``:``, text the message
                                        must contain)
``sql:db=SELECT id FROM t WHERE ...``   :class:`SQLInvariant` on the service ``db``:
                                        the failure is present when rows come back
``result:orders.1.sku == "A1"``         :class:`ResultPredicate`: a dot path into the
``result:answer contains 30 days``      final result (empty for all of it), an operator
                                        (``==``, ``!=``, ``>``, ``<``, ``contains``,
                                        ``not_contains``) and a JSON value (text that is
                                        not JSON is a string)
``marked``, ``marked:stale price``      :class:`MarkedPredicate`: the run marks itself
                                        failed (``capture.mark_failed``), with a reason
                                        containing the text after ``:``
======================================  ===============================================

:func:`predicate_text` writes a predicate back in this form: ``parse_predicate`` of it gives
the same predicate.
"""

from __future__ import annotations

import json
import re

from pydantic import JsonValue, TypeAdapter, ValidationError

from sandbox.errors import PredicateError
from sandbox.names import PREDICATE_FORMS
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    ExitCodePredicate,
    MarkedPredicate,
    Predicate,
    ResultPredicate,
    SQLInvariant,
)

SYNTAX = PREDICATE_FORMS
_OPS = {"==": "eq", "=": "eq", "!=": "ne", ">": "gt", "<": "lt"}
_WORD_OPS = {"contains", "not_contains"}
_SYMBOL = {"eq": "==", "ne": "!=", "gt": ">", "lt": "<"}
_EXIT = re.compile(r"exit\s*(==|!=|=|>|<)\s*(-?\d+)")
_TYPE = re.compile(r"[A-Za-z_][\w.]*")
_SERVICE = re.compile(r"[A-Za-z0-9][\w.-]*")
_RESULT = re.compile(r"result:(\S*)\s+(==|!=|>|<|contains|not_contains)\s+(.+)", re.S)
_JSON: TypeAdapter[JsonValue] = TypeAdapter(JsonValue)


def _bad(text: str, why: str) -> PredicateError:
    return PredicateError(f"predicate {text!r}: {why}; the forms are {SYNTAX}")


def _value(raw: str) -> JsonValue:
    try:
        return _JSON.validate_python(json.loads(raw))
    except (ValueError, ValidationError):
        return raw


def parse_predicate(text: str) -> Predicate:
    """The predicate ``text`` describes (see the module docs); :class:`PredicateError`
    naming the forms when it describes none."""
    line = text.strip()
    if line.startswith("exit"):
        found = _EXIT.fullmatch(line)
        if found is None:
            raise _bad(text, "an exit code predicate is exit OP NUMBER")
        return ExitCodePredicate(op=_OPS[found.group(1)], value=int(found.group(2)))
    if line.startswith("exception="):
        type_, _, message = line.removeprefix("exception=").partition(":")
        if not _TYPE.fullmatch(type_):
            raise _bad(text, f"{type_!r} is not an exception type name")
        return ExceptionPredicate(type=type_, message_contains=message or None)
    if line.startswith("sql:"):
        service, eq, query = line.removeprefix("sql:").partition("=")
        if not eq or not _SERVICE.fullmatch(service.strip()) or not query.strip():
            raise _bad(text, "an SQL invariant is sql:SERVICE=QUERY")
        return SQLInvariant(service=service.strip(), query=query.strip())
    if line.startswith("result:"):
        found = _RESULT.fullmatch(line)
        if found is None:
            raise _bad(text, "a result predicate is result:PATH OP VALUE")
        path, op, raw = found.groups()
        return ResultPredicate(
            path=path,
            op=op if op in _WORD_OPS else _OPS[op],
            value=_value(raw.strip()),
        )
    if line == "marked" or line.startswith("marked:"):
        reason = line.removeprefix("marked").removeprefix(":").strip()
        return MarkedPredicate(reason_contains=reason or None)
    raise _bad(text, "unknown form")


def predicate_text(predicate: Predicate) -> str:
    """``predicate`` in the syntax :func:`parse_predicate` reads."""
    if isinstance(predicate, ExitCodePredicate):
        return f"exit{_SYMBOL[predicate.op]}{predicate.value}"
    if isinstance(predicate, ExceptionPredicate):
        message = f":{predicate.message_contains}" if predicate.message_contains else ""
        return f"exception={predicate.type}{message}"
    if isinstance(predicate, SQLInvariant):
        return f"sql:{predicate.service}={predicate.query}"
    if isinstance(predicate, MarkedPredicate):
        return f"marked:{predicate.reason_contains}" if predicate.reason_contains else "marked"
    op = predicate.op if predicate.op in _WORD_OPS else _SYMBOL[predicate.op]
    return f"result:{predicate.path} {op} {json.dumps(predicate.value, ensure_ascii=False)}"
