"""Month-end invoice totals in EUR. Exchange rates come from the finance team's script."""

import json
import subprocess
import sys


def usd_rate():
    out = subprocess.run(
        [sys.executable, "fetch_rate.py", "USD"], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)["rate"]


def main():
    invoices_usd = [120.0, 80.5, 42.0]
    rate = float(usd_rate())
    print(f"total: {sum(invoices_usd) * rate:.2f} EUR")


if __name__ == "__main__":
    main()
