"""A long-lived writer or reader for the truncation campaign (test_truncation.py).

Commands on stdin, one per line: ``open PATH`` (open the bus and work on it until an error,
or until ``stop``), ``quit``. Replies on stdout: ``ready PATH``, then one of
``error <ExceptionClass>`` or ``stopped``. A crash (SIGBUS) shows as a negative return code.
"""
import select
import sys
import time

from mappedbus_py import MappedBusReader, MappedBusWriter

FILE_SIZE, RECORD_SIZE = 1 << 22, 64


def say(*words):
    print(*words, flush=True)


def stop_requested():
    if select.select([sys.stdin], [], [], 0)[0]:
        line = sys.stdin.readline().strip()
        assert line == "stop", line
        return True
    return False


def work(role, path):
    if role == "writer":
        bus = MappedBusWriter(path, FILE_SIZE, RECORD_SIZE).open()
    else:
        bus = MappedBusReader(path, FILE_SIZE, RECORD_SIZE, timeout=0.1).open()
    say("ready", path)
    n = 0
    reading = False
    try:
        while True:
            if role == "writer":
                bus.write(b"%d" % n)
                time.sleep(0.0002)
            elif bus.read(timeout=0.001) is not None and not reading:
                reading = True
                say("reading")
            n += 1
            if n % 64 == 0 and stop_requested():
                say("stopped")
                return
    except Exception as e:
        say("error", type(e).__name__, "|", str(e).replace("\n", " ")[:300])
    finally:
        bus.close()


def main(role):
    while True:
        # readline, not iteration: no read-ahead that select() in stop_requested would miss
        cmd, _, arg = sys.stdin.readline().strip().partition(" ")
        if cmd in ("quit", ""):
            return
        work(role, arg)


if __name__ == "__main__":
    main(sys.argv[1])
