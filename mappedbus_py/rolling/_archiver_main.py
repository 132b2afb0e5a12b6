"""The archiver process a writer with an archive starts (``rolling.archive.ArchiverProcess``):
``python -m mappedbus_py.rolling._archiver_main HOT_DIR MODE ALLOW_FOREIGN``."""
import sys

from .archive import child_main

if __name__ == "__main__":
    child_main(sys.argv[1:])
