"""Prints today's exchange rate for a currency as JSON (the finance team's script)."""

import json
import os
import sys

import httpx

currency = sys.argv[1]
resp = httpx.post(os.environ["RATES_URL"] + "/rates", json={"currency": currency})
resp.raise_for_status()
print(json.dumps({"currency": currency, "rate": resp.json()["rate"]}))
