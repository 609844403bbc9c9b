"""Purchasing script: asks two suppliers for a quote through a thread pool, keeps a draft
of the order in a temporary folder, and posts the order as JSON in a plain-text body."""

import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

import httpx

from sandbox import capture


def quote(supplier):
    answer = httpx.post(f"{os.environ['SUPPLIER_URL']}/{supplier}/quote", json={"qty": 4})
    return supplier, answer.json()["price"]


@capture.run("pool_quotes")
def main():
    with ThreadPoolExecutor(max_workers=1) as pool:
        quotes = list(pool.map(quote, ["north", "south"]))
    supplier, price = min(quotes, key=lambda q: q[1])
    order = {"supplier": supplier, "qty": 4, "price": price}
    with (
        tempfile.TemporaryDirectory() as folder,
        open(os.path.join(folder, "draft.json"), "w") as draft,
    ):
        json.dump(order, draft)
    headers = {"content-type": "text/plain"}
    httpx.post(f"{os.environ['SUPPLIER_URL']}/order", content=json.dumps(order), headers=headers)
    if price <= 0:
        raise ValueError(f"{supplier} quoted {price}: ordered for nothing")


if __name__ == "__main__":
    main()
