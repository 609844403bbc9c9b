"""Charges a card for an invoice, retrying when the payment provider does not answer."""

import os

import httpx
from tenacity import Retrying, stop_after_attempt, wait_exponential


def main():
    url = os.environ["PAYMENTS_URL"]
    for attempt in Retrying(stop=stop_after_attempt(4), wait=wait_exponential(min=0.05, max=1)):
        with attempt:
            charge = {"invoice": "INV-9", "cents": 4200}
            resp = httpx.post(url + "/charges", json=charge, timeout=0.3)
            resp.raise_for_status()
    charges = httpx.post(url + "/charges/list", json={"invoice": "INV-9"}).json()["charges"]
    if len(charges) > 1:
        raise RuntimeError(f"invoice INV-9 charged {len(charges)} times")


if __name__ == "__main__":
    main()
