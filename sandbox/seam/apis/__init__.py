"""The model APIs that come with the package, one module each (an
:class:`~sandbox.seam.llm.LLMApi` as ``API``); :mod:`sandbox.seam.llm` registers them."""
