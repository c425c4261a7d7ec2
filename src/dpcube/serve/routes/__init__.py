"""The service's endpoints, one router per resource: :mod:`.releases` (the list, each release's
description, its HTML report), :mod:`.answers`, :mod:`.tables` and :mod:`.pages` (the explorer
page and the API documentation). :func:`dpcube.serve.app.create_app` includes them in this order,
which is the order of the OpenAPI schema's paths."""
