"""A recorded exception comes back as its own class with its attributes: built-in errors,
SDK errors (httpx, openai, mcp's ``MCPError`` with its ``ErrorData``), looked up only among
the modules already imported; a stand-in only when the class cannot be found or built."""

from __future__ import annotations

import sys

import httpx
import mcp_types
import openai
import pytest
from mcp.shared.exceptions import MCPError

from sandbox.replay.faults import STAND_IN_MODULE, rebuild_error, stand_in_reason
from sandbox.seam.boundary import RecordedError, error_info
from sandbox.snapshot.events import ErrorInfo


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
