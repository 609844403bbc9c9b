"""Demo agents for the replayer: each is a real agent loop (the ``openai`` SDK against a
scripted model server on 127.0.0.1, tools over real services found through environment
variables) with a bug that capture records and replay brings back.

* :mod:`examples.orders`: a timeout after a commit, a retry, a duplicate order;
* :mod:`examples.inventory`: two concurrent reservations lose an update;
* :mod:`examples.billing`: a month-end decision split between Python's clock and SQL ``now()``.

:mod:`examples.capture_demo` captures them from "production" services into a store.
"""
