"""Entropy the agent draws without a seed: an unseeded ``random.Random()``,
``secrets.token_hex`` and ``os.urandom``. Each agent fails only for some draws; the replay
gets the captured draw back, so the same request goes out and the failure reproduces every
time (a different draw would send a request the recording cannot answer)."""

from __future__ import annotations

import re

from sandbox.snapshot.events import HTTPExchange
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def stock(path: str, body: dict[str, object]) -> tuple[int, object]:
    if path == "/replica/stock":
        return 200, {"sku": body["sku"], "qty": 3}  # the replica lags behind
    if path == "/primary/stock":
        return 200, {"sku": body["sku"], "qty": 0}
    return 409, {"error": "out of stock"}


def crm(path: str, body: dict[str, object]) -> tuple[int, object]:
    ref = str(body.get("ref", ""))
    if ref[:1].isdigit():  # the legacy CRM wants references that start with a letter
        return 422, {"error": f"bad reference {ref}"}
    return 201, {"ref": ref}


def chat(path: str, body: dict[str, object]) -> tuple[int, object]:
    if re.fullmatch(r"/sessions/[A-Za-z0-9=]+", path) is None:
        return 404, {"error": "no such route"}
    return 201, {"session": path.rsplit("/", 1)[1]}


def _capture(store: DirectoryStore, agent: str, env_name: str, handler: harness.Handler) -> str:
    with (
        harness.model(lambda messages: {"content": "Yes, tomorrow."}) as base,
        harness.service(handler, agent) as url,
    ):
        env = harness.base_env(
            OPENAI_BASE_URL=base, OPENAI_API_KEY=harness.API_KEY, **{env_name: url}
        )
        run = harness.capture_until_failed(store, agent, env)
    return run.run_id


def _sent(store: DirectoryStore, run_id: str) -> list[tuple[str, str]]:
    return [
        (e.url.split("/", 3)[-1], str(e.request_body))
        for e in store.load_events(run_id)
        if isinstance(e, HTTPExchange) and "chat/completions" not in e.url
    ]


def _replays_the_draw(store: DirectoryStore, run_id: str) -> None:
    result = harness.replay(store, run_id)
    harness.assert_reproduced_every_time(result)
    for replayed in result.report["replays"]:
        assert _sent(store, replayed) == _sent(store, run_id)


def test_unseeded_random_instance_replays_its_choice(store: DirectoryStore) -> None:
    run_id = _capture(store, "stock_replica", "STOCK_URL", stock)
    assert next(url for url, _ in _sent(store, run_id)) == "replica/stock"
    _replays_the_draw(store, run_id)


def test_secrets_token_hex_replays_the_same_token(store: DirectoryStore) -> None:
    run_id = _capture(store, "crm_ticket", "CRM_URL", crm)
    _replays_the_draw(store, run_id)


def test_os_urandom_replays_the_same_bytes(store: DirectoryStore) -> None:
    run_id = _capture(store, "session_nonce", "CHAT_URL", chat)
    _replays_the_draw(store, run_id)
