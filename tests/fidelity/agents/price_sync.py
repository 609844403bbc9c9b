"""Nightly price sync. Cron alerts on the exit code; there is no exception to see."""

import logging
import os
import sys

import httpx


def main():
    prices = httpx.post(os.environ["SUPPLIER_URL"] + "/prices", json={}).json()["prices"]
    bad = [p for p in prices if p["price"] <= 0]
    for p in bad:
        logging.error("invalid price for %s: %s", p["sku"], p["price"])
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
