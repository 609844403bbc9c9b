"""A FastAPI service written as FastAPI's documentation shows: its clients made in the
lifespan and kept on ``app.state`` (an asyncpg pool, an ``AsyncOpenAI`` client), a JSON
body, a bearer token checked against a setting; its database found by the capture, not
declared; the middleware added as the README's one line does (no entrypoint: the app
itself replays its requests; the store from the environment). Served by uvicorn with
``keep="failed"``: only the failing request is kept, and it replays (the model server and
the live Postgres stopped) and reproduces; fixed, gone."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI, Header, HTTPException, Request
from openai import AsyncOpenAI
from pydantic import BaseModel

from examples._model import serve_model
from examples.refund_load import serve
from sandbox import capture
from sandbox.capture.asgi import CaptureMiddleware
from sandbox.containers import RestoreSpec, bring_up
from sandbox.snapshot.store import DirectoryStore
from tests.replayed import reproduced_then_gone

pytestmark = pytest.mark.docker

SETTINGS = ("CHAT_DSN", "CHAT_MODEL_URL", "CHAT_SERVICE_TOKEN")
SAVED = (*SETTINGS, "SANDBOX_STORE")
TOKEN = "svc-tok-9f8e7d6c5b4a39281706"
FIXED = {"on": False}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.pool = await asyncpg.create_pool(os.environ["CHAT_DSN"], min_size=1, max_size=4)
    app.state.llm = AsyncOpenAI(
        base_url=os.environ["CHAT_MODEL_URL"], api_key="sk-local-model", max_retries=0
    )
    yield
    await app.state.pool.close()


class Ask(BaseModel):
    user_id: int
    message: str


def chat_app() -> FastAPI:
    """The service. Its bug: a user with no credits left divides by zero (500); the fix
    answers 402 before asking the model."""
    app = FastAPI(lifespan=lifespan)
    app.add_middleware(CaptureMiddleware, keep="failed")

    @app.post("/chat")
    async def chat(ask: Ask, request: Request, authorization: str = Header()) -> Any:
        if authorization != "Bearer " + os.environ["CHAT_SERVICE_TOKEN"]:
            raise HTTPException(401)
        pool = request.app.state.pool
        row = await pool.fetchrow("SELECT plan, credits FROM users WHERE id = $1", ask.user_id)
        if FIXED["on"] and row["credits"] == 0:
            raise HTTPException(402, "no credits left")
        answer = await request.app.state.llm.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "system", "content": f"plan {row['plan']}"},
                {"role": "user", "content": ask.message},
            ],
        )
        text = answer.choices[0].message.content
        per_credit = len(text) / row["credits"]
        await pool.execute("UPDATE users SET credits = credits - 1 WHERE id = $1", ask.user_id)
        return {"answer": text, "per_credit": per_credit}

    return app


app = chat_app()


def _answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": f"On your plan: {messages[-1]['content']}"}


async def _setup(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE users (id int PRIMARY KEY, plan text, credits int)")
        await conn.executemany(
            "INSERT INTO users VALUES ($1, $2, $3)",
            [(1, "pro", 50), (2, "free", 5), (3, "team", 20), (4, "free", 0)],
        )
    finally:
        await conn.close()


async def _load(base: str) -> list[int]:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        headers = {"authorization": f"Bearer {TOKEN}"}
        asks = [
            client.post("/chat", json={"user_id": u, "message": f"hi from {u}"}, headers=headers)
            for u in [1, 2, 3, 4, 1, 2, 3, 1]
        ]
        return [answer.status_code for answer in await asyncio.gather(*asks)]


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DirectoryStore, str]]:
    """The store after the load, with everything it ran against stopped; the kept run."""
    store = tmp_path_factory.mktemp("chat-store")
    saved = {name: os.environ.get(name) for name in SAVED}
    model_url, stop_model = serve_model(_answer)
    try:
        with bring_up([RestoreSpec(name="db", kind="postgres")]) as env:
            dsn = env.services["db"].url
            asyncio.run(_setup(dsn))
            os.environ.update(
                CHAT_DSN=dsn,
                CHAT_MODEL_URL=f"{model_url}/v1",
                CHAT_SERVICE_TOKEN=TOKEN,
                SANDBOX_STORE=str(store),
            )
            with serve(app) as base:
                statuses = asyncio.run(_load(base))
            assert capture.flush(60), "the kept run was not written in time"
        # the model server, the live Postgres and the service are gone from here on
    finally:
        stop_model()
    assert sorted(statuses) == [200] * 7 + [500]
    runs = DirectoryStore(store).list()
    assert [m.name for m in runs] == ["POST /chat"], "only the failing request is kept"
    try:
        os.environ.pop("CHAT_SERVICE_TOKEN")
        yield DirectoryStore(store), runs[0].run_id
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def test_the_kept_request_holds_what_the_app_was_started_with_and_sent(
    kept: tuple[DirectoryStore, str],
) -> None:
    """The settings the lifespan read are the run's (the token's redacted); its database
    was found through the pool made in the lifespan and its table kept; the request's
    body and redacted token are in its log; its entrypoint is the app."""
    store, run_id = kept
    manifest = store.load_manifest(run_id)
    assert manifest.entrypoint is not None and manifest.entrypoint.target == f"{__name__}:app"
    assert set(SETTINGS) <= set(manifest.env)
    assert manifest.env["CHAT_SERVICE_TOKEN"].startswith("<redacted:")
    (service,) = manifest.services
    assert service.kind == "postgres" and service.meta.get("rows_of") == ["public.users"]
    assert [t.clients for t in manifest.touched] == [["asyncpg"]]
    log = (store.run_dir(run_id) / "events.jsonl").read_bytes()
    assert b'"user_id":4' in log and TOKEN.encode() not in log


def test_the_kept_request_reproduces_with_everything_stopped_and_is_gone_once_fixed(
    kept: tuple[DirectoryStore, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replayed with the model server and Postgres stopped (the recorded DSN leads nowhere:
    the pool the lifespan makes is sent to the sandbox), the token the user supplies is
    sent where the request held it: the division by zero reproduces 2/2, with no
    divergence, having made the recorded model call; fixed, it answers 402 having read the
    restored table: gone."""
    store, run_id = kept
    monkeypatch.setenv("CHAT_SERVICE_TOKEN", "any-token-the-user-gives")
    buggy, fixed = reproduced_then_gone(run_id, store, FIXED)
    assert "recorded calls made: 1/1" in buggy.describe()
    assert "postgres read table public.users" in fixed.describe()
