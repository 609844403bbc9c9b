"""A tool-using agent on Google's ``google-genai`` SDK, written the way its docs write one:
function declarations handed to ``generate_content`` and a loop that runs the function calls
the model makes and hands back their responses. The model is the scripted one behind
Gemini's API, at the address in ``GEMINI_AGENT_MODEL_URL``. Nothing in it knows about
capture but its two tools (``capture.tool``).

The bug is in one tool's output (see :mod:`examples._refunds`): the customer is told
``30 days``. ``main_fixed`` (and ``streamed_fixed``) use the fixed tool; ``streamed`` reads
each answer with ``generate_content_stream``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from google import genai
from google.genai import types

from examples import _refunds
from examples._model import MODEL
from sandbox import capture

MODEL_URL_ENV = "GEMINI_AGENT_MODEL_URL"
API_KEY = "local-scripted-gemini-key"
DECLARATIONS = [
    types.FunctionDeclaration(
        name="order_status",
        description="The status and destination country of an order.",
        parameters_json_schema={
            "type": "object",
            "properties": {"order_id": {"type": "integer"}},
            "required": ["order_id"],
        },
    ),
    types.FunctionDeclaration(
        name="refund_window",
        description=_refunds.WINDOW_DOC,
        parameters_json_schema={
            "type": "object",
            "properties": {"country": {"type": "string"}},
            "required": ["country"],
        },
    ),
]


@capture.tool
def order_status(order_id: int) -> dict[str, Any]:
    return _refunds.order(order_id)


@capture.tool("refund_window")
def refund_window(country: str) -> str:
    return _refunds.window_2023(country)


@capture.tool("refund_window")
def refund_window_fixed(country: str) -> str:
    return _refunds.window_2024(country)


def _ask(window: Callable[[str], str], streamed: bool) -> str:
    client = genai.Client(
        api_key=API_KEY,
        http_options=types.HttpOptions(base_url=os.environ[MODEL_URL_ENV]),
    )
    config = types.GenerateContentConfig(
        system_instruction=_refunds.SYSTEM,
        tools=[types.Tool(function_declarations=DECLARATIONS)],
        temperature=0,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    impls: dict[str, Callable[..., Any]] = {"order_status": order_status, "refund_window": window}
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text=_refunds.USER)])]
    for _ in range(8):
        if streamed:
            chunks = client.models.generate_content_stream(
                model=MODEL, contents=contents, config=config
            )
            parts = [p for c in chunks for p in (c.candidates or [])[0].content.parts or []]
        else:
            answer = client.models.generate_content(model=MODEL, contents=contents, config=config)
            parts = list((answer.candidates or [])[0].content.parts or [])
        calls = [p.function_call for p in parts if p.function_call is not None]
        if not calls:
            return "".join(p.text or "" for p in parts)
        contents.append(types.Content(role="model", parts=parts))
        for call in calls:
            result = impls[str(call.name)](**(call.args or {}))
            response = types.Part.from_function_response(
                name=str(call.name), response={"result": result}
            )
            contents.append(types.Content(role="user", parts=[response]))
    return ""


def _answered(window: Callable[[str], str], streamed: bool) -> str:
    answer = _ask(window, streamed)
    capture.result({"answer": answer})
    return answer


def main() -> str:
    return _answered(refund_window, streamed=False)


def main_fixed() -> str:
    return _answered(refund_window_fixed, streamed=False)


def streamed() -> str:
    return _answered(refund_window, streamed=True)


def streamed_fixed() -> str:
    return _answered(refund_window_fixed, streamed=True)
