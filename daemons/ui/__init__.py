"""`storm-py ui`: Storm's REST API (`/api/v1`), Prometheus `/metrics` and the web pages, all read
from Nimbus's RPC (docs/ui.md)."""
