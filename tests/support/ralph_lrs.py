"""Run Ralph's LRS (the real FastAPI app: validation, id conflicts, 204 for identical re-posts)
on its file-system backend, for the forwarding tests.

Ralph's file-system backend writes each target file only once (a second batch fails with
"already exists and overwrite is not allowed"); here its writes append instead, so an LRS
can receive more than one batch. Nothing else about Ralph is changed.

    python tests/support/ralph_lrs.py PORT DATA_DIR   (RALPH_AUTH_FILE set in the environment)
"""

import os
import sys
from pathlib import Path

import uvicorn
from ralph.backends.data.base import BaseOperationType
from ralph.backends.lrs.fs import FSLRSBackend

_write = FSLRSBackend.write


def _append(self, data, target=None, chunk_size=None, ignore_errors=False, operation_type=None):
    if operation_type in (None, BaseOperationType.CREATE, BaseOperationType.INDEX):
        operation_type = BaseOperationType.APPEND
    return _write(self, data, target, chunk_size, ignore_errors, operation_type)


FSLRSBackend.write = _append

if __name__ == "__main__":
    port, data_dir = int(sys.argv[1]), Path(sys.argv[2])
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["RALPH_RUNSERVER_BACKEND"] = "fs"
    os.environ["RALPH_BACKENDS__LRS__FS__DEFAULT_DIRECTORY_PATH"] = str(data_dir)
    uvicorn.run("ralph.api:app", host="127.0.0.1", port=port, log_level="warning")
