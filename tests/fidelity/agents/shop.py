# shop.py (the README's capture example, run as a script: python shop.py)
from sandbox import capture


@capture.tool
def place_order(sku: str, qty: int) -> dict:
    return {"order_id": 42, "sku": sku, "qty": qty}


@capture.run("checkout", store="snapshots", seed=7)
def main() -> None:
    first = place_order("A1", 1)
    second = place_order("A1", 1)  # the agent retried after a timeout
    capture.result({"orders": [first, second]})
    capture.mark_failed(
        "order placed twice",
        capture.ResultPredicate(path="orders.1.sku", op="eq", value="A1"),
    )


if __name__ == "__main__":
    main()
