"""A recorded exception comes back as its own class with its attributes: built-in errors,
SDK errors (httpx, openai, mcp's ``MCPError`` with its ``ErrorData``), looked up only among
the modules already imported; a stand-in only when the class cannot be found or built."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import httpx
import mcp_types
import openai
import pytest
from mcp.shared.exceptions import MCPError

from sandbox import capture
from sandbox.replay import PolicySet, replay
from sandbox.replay.conditions.faults import STAND_IN_MODULE, rebuild_error, stand_in_reason
from sandbox.seam.boundary import RecordedError, error_info
from sandbox.snapshot.events import ErrorInfo
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore


@pytest.mark.parametrize(
    "original",
    [
        TimeoutError("read timed out"),
        ConnectionError("reset by peer"),
        KeyError("order"),
        FileNotFoundError(2, "No such file"),
        httpx.ReadTimeout("timed out"),
        openai.APITimeoutError(request=httpx.Request("POST", "http://127.0.0.1/v1/chat")),
        MCPError(-32001, "Request timed out", {"timeout": 5}),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_recorded_error_comes_back_as_its_own_class(original: Exception) -> None:
    info = ErrorInfo.model_validate_json(error_info(original).model_dump_json())
    again = rebuild_error(info)
    assert type(again) is type(original)
    assert str(again) == str(original)
    assert again.args == original.args


def test_an_exception_group_names_the_errors_it_holds() -> None:
    """A crash inside an anyio or asyncio ``TaskGroup`` (an MCP client's ``stdio_client``
    runs one) ends the run with an ``ExceptionGroup``: its message names the crash."""
    crash = RuntimeError("forced crash before the time was asked")
    group = ExceptionGroup("unhandled errors in a TaskGroup", [crash])
    outer = BaseExceptionGroup("outer", [group, KeyboardInterrupt()])
    info = error_info(group)
    assert info.type == "ExceptionGroup" and info.args is None
    assert info.message == (
        "unhandled errors in a TaskGroup (1 sub-exception): "
        "RuntimeError: forced crash before the time was asked"
    )
    assert error_info(outer).message == (
        "outer (2 sub-exceptions): RuntimeError: forced crash before the time was asked; "
        "KeyboardInterrupt: "
    )


def test_mcp_error_keeps_its_error_data() -> None:
    again = rebuild_error(error_info(MCPError(-32001, "Request timed out", {"timeout": 5})))
    assert isinstance(again, MCPError)
    assert isinstance(again.error, mcp_types.ErrorData)
    assert (again.code, again.message, again.data) == (-32001, "Request timed out", {"timeout": 5})


def test_an_error_whose_constructor_needs_more_is_built_with_its_attributes() -> None:
    class Refused(Exception):
        def __init__(self, order: int, why: str) -> None:
            super().__init__(f"order {order}: {why}")
            self.order = order

    sys.modules[__name__].Refused = Refused  # type: ignore[attr-defined]
    Refused.__qualname__ = "Refused"
    try:
        again = rebuild_error(error_info(Refused(7, "already refunded")))
    finally:
        del sys.modules[__name__].Refused  # type: ignore[attr-defined]
    assert type(again) is Refused
    assert again.order == 7  # type: ignore[attr-defined]
    assert str(again) == "order 7: already refunded"


def test_a_class_not_imported_is_a_stand_in_that_says_why() -> None:
    info = ErrorInfo(type="billing_sdk.errors.GatewayTimeout", message="late")
    assert "billing_sdk" not in sys.modules
    again = rebuild_error(info)
    assert isinstance(again, RecordedError) and isinstance(again, TimeoutError)
    assert type(again).__module__ == STAND_IN_MODULE
    assert "billing_sdk" not in sys.modules  # a recording never makes us import a module
    assert stand_in_reason(info) == (
        "billing_sdk.errors.GatewayTimeout is not imported by the replayed program"
    )


@capture.tool
def charge() -> str:
    raise sys.modules["vendor_payments"].GatewayTimeout("the gateway answered late")


def paying_agent() -> dict[str, str]:
    try:
        return {"charged": charge()}
    except TimeoutError as exc:
        return {"error": type(exc).__name__}


def test_a_replay_that_raises_a_stand_in_says_so(tmp_path: Path) -> None:
    """The vendor's module is imported at capture and not on replay: its error comes back as
    a stand-in (caught by ``except TimeoutError`` all the same), and the report says so."""
    vendor = types.ModuleType("vendor_payments")
    vendor.GatewayTimeout = type(  # type: ignore[attr-defined]
        "GatewayTimeout", (TimeoutError,), {"__module__": "vendor_payments"}
    )
    store = DirectoryStore(tmp_path)
    sys.modules["vendor_payments"] = vendor
    try:
        with capture.run(
            "stand-in",
            store=store,
            seed=1,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:paying_agent"),
            packages=False,
        ) as rec:
            rec.set_result(paying_agent())
            rec.mark_failed("not charged", ResultPredicate(path="error", value="GatewayTimeout"))
    finally:
        del sys.modules["vendor_payments"]
    report = replay(rec.run_id, store=store, policies=PolicySet().with_rule("recorded", "tool"))
    assert report.verdict.reproduced == 1, report.describe()
    assert any(
        "vendor_payments.GatewayTimeout was raised as a stand-in" in note
        and "not imported by the replayed program" in note
        for note in report.notes
    ), report.notes
