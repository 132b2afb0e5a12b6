"""The ``mappedbus`` command and what it shows: ``cli`` (the commands), ``slots`` (the one
slot scanner), ``views``/``views_rolling`` (what ``stat`` and ``dump`` describe), ``metrics``,
``exporter`` (Prometheus; the ``metrics`` extra), ``top``. Nothing of the library imports
these.
"""
