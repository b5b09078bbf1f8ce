"""``flintlock ui DIR`` and ``execute(ui_port=...)``: a live web page of running jobs
(``server``: the page's server; ``app``: its routes; ``state``: what it reads from the
job folders; ``page`` and ``drawings``: the page; ``saved``: the page saved with its data,
``flintlock report``). Importing this package needs nothing beyond flintlock:
the server needs the ``ui`` extra (Starlette and uvicorn)."""
