"""Helpers of the tests (not tests): ``procs`` starts bus clients as processes (``bus_child``,
``rolling_child``), ``java_original`` finds the Java original's jar. Test modules import them as
``support.procs`` (tests/ is on the path: tests/conftest.py is there)."""
