"""The ``redis`` service kind: the kind itself (:mod:`.kind`, ``KIND``) and its client hooks
(:mod:`.clients`). This module imports nothing, so that the capture loads the hooks without
loading the kind (and redis-py) before the agent connects."""
