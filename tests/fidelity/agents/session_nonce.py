"""Opens a chat session with the support backend under a fresh random session id."""

import base64
import os

import httpx


def main():
    session_id = base64.b64encode(os.urandom(12)).decode()
    resp = httpx.post(f"{os.environ['CHAT_URL']}/sessions/{session_id}", json={"user": "u-17"})
    resp.raise_for_status()
    print("session", session_id)


if __name__ == "__main__":
    main()
