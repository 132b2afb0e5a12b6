"""The compiled core: one bus file mapped, written and read (Cython over small C headers).

``_mapping`` (a bus file mapped, its SIGBUS guard), ``_message`` and ``_record`` (payloads),
``_writer`` and ``_reader`` (the per-record paths), ``_wake``/``_wakefd`` (parking and waking),
``_consumers`` (the named consumers' registry), ``_liveness`` (who holds a slot, kept by the
kernel); the C headers beside them hold the protocols (``_atomic.h``: every atomic). It imports
the file formats (``mappedbus_py.formats``) and the errors, nothing above them.
"""
