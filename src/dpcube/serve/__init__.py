"""``dpcube serve``: a read-only query service over releases (FastAPI on uvicorn).

:func:`create_app` builds the app (see :mod:`dpcube.serve.app`); :mod:`dpcube.serve.served`
loads the releases once and answers from memory; :mod:`dpcube.serve.cli` is the sub-command.
"""

from __future__ import annotations

from dpcube.serve.app import create_app

__all__ = ["create_app"]
