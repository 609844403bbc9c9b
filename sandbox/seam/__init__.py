"""The seam between an agent and the world: the contract capture and replay share.

Internal: agents use the verbs of :mod:`sandbox.capture`; this package is what those verbs,
the client patches and the replay are built on.

* :mod:`sandbox.seam.boundary`: how a crossing is described (:class:`~.boundary.Call`), handed
  to the installed :class:`~.boundary.Boundary` (the capture's recorder or the replay's
  boundary) and translated by a per-kind :class:`~.boundary.Adapter`;
* :mod:`sandbox.seam.llm`: how a model call is read out of an HTTP exchange, which capture
  records and replay matches on: the :class:`~.llm.LLMApi` protocol and its registry, one
  module per API in :mod:`sandbox.seam.apis`.

The seam imports only :mod:`sandbox.snapshot` and :mod:`sandbox.errors`, never capture or
replay.
"""
