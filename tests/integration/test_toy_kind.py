"""A kind added in one module (``toy_kind``) is brought up by the sandbox from its descriptor
alone: its image, readiness, state restore, restore point and binding, and a replay against
services already up binds it the same way."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from toy_kind import KEY, KIND, memo_registered

from sandbox.containers import RestoreSpec, bring_up, connect
from sandbox.containers.labels import SESSION, new_session_id
from sandbox.replay.attached import attach
from sandbox.snapshot.manifest import ServiceState

pytestmark = pytest.mark.docker


@pytest.fixture
def client() -> Iterator[Any]:
    c = connect()
    with memo_registered():
        yield c
    c.close()


def test_the_toy_kind_comes_up_restored_bound_and_resettable(client: Any) -> None:
    session = new_session_id()
    with bring_up(
        [RestoreSpec("notes", "memo", data=b"buy milk")], client=client, session=session
    ) as env:
        endpoint = env.services["notes"]
        assert endpoint.restored and endpoint.kind == "memo"
        assert env.env == {"MEMO_URL": endpoint.url}
        assert endpoint.url.startswith(f"redis://{endpoint.ip}:6379/")
        (container,) = client.containers.list(filters={"label": f"{SESSION}={session}"})
        assert container.image.tags == ["sandbox-replayer/redis:7"]
        agent = redis.Redis.from_url(env.env["MEMO_URL"])
        assert agent.get(KEY) == b"buy milk"
        agent.set(KEY, "buy oat milk")
        env.reset()
        assert agent.get(KEY) == b"buy milk"

        given = {"notes": endpoint.url}
        attached = attach([ServiceState(name="notes", kind="memo")], given)
        assert attached.env == {"MEMO_URL": endpoint.url}
        assert attached.kinds == {"notes": KIND}
    assert client.containers.list(all=True, filters={"label": f"{SESSION}={session}"}) == []
