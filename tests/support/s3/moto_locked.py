"""moto's S3 server with object writes serialised.

Stock moto checks ``If-None-Match`` and then stores the object without a lock, inside a threaded
server, so two racing conditional PUTs can both win (about 1 in 1,000 tight races). Our commits
rely on that check being atomic, as on AWS S3 and SeaweedFS; this wrapper makes moto honour it by
running every write to an object key under one process-wide lock. It patches a private moto
method, so moto is pinned and ``test_s3_store.py`` keeps a same-key race that catches a moto
upgrade breaking it.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from moto.s3.responses import S3Response

_WRITES = threading.Lock()
_original = S3Response._key_response


def _serialised_key_response(self: S3Response, request: Any, full_url: str) -> Any:
    if request.method in ("PUT", "POST", "DELETE"):
        with _WRITES:
            return _original(self, request, full_url)
    return _original(self, request, full_url)


S3Response._key_response = _serialised_key_response  # type: ignore[method-assign]

if __name__ == "__main__":
    from moto.server import main

    main(sys.argv[1:])
