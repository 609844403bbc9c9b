"""Checkout, captured with the context-manager form around the agent's work."""

import os

import httpx

from sandbox import capture


@capture.tool
def place_order(sku: str, qty: int) -> dict:
    resp = httpx.post(os.environ["ORDERS_URL"] + "/orders", json={"sku": sku, "qty": qty})
    return resp.json()


def main():
    with capture.run("checkout-block", store="snapshots"):
        first = place_order("A1", 1)
        second = place_order("A1", 1)  # retried after a timeout
        if first["sku"] == second["sku"]:
            raise RuntimeError(f"order placed twice: {first['id']} and {second['id']}")


if __name__ == "__main__":
    main()
