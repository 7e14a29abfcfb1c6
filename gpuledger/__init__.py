"""The read side and the front door: reports (``reports.py``, ``windows.py``), the HTTP API
(``serve/``), the dashboards (``dashboard/``), the demo (``demo/``) and the ``gpuledger`` CLI
(``cli/``). It reads the warehouse (``sql``) and drives the other floors; nothing below imports it."""
