"""Books a hotel room; the booking API is slow at times, so calls are retried."""

import os

import httpx
import tenacity


@tenacity.retry(stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_fixed(0.1))
def book(guest, night):
    resp = httpx.post(
        os.environ["HOTEL_URL"] + "/bookings", json={"guest": guest, "night": night}, timeout=0.3
    )
    resp.raise_for_status()
    return resp.json()


def main():
    book("ada", "2024-03-01")
    mine = httpx.post(os.environ["HOTEL_URL"] + "/bookings/list", json={"guest": "ada"}).json()
    if len(mine["bookings"]) != 1:
        raise RuntimeError(f"ada holds {len(mine['bookings'])} bookings for one stay")


if __name__ == "__main__":
    main()
