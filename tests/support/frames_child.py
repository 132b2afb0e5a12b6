"""A framed-bus client for the frame tests, as a process of its own.

    frames_child.py write PATH ID COUNT MAXSIZE [rolling] [topics]
        writes COUNT messages of random sizes (0..MAXSIZE, log-uniform, seeded by ID), each
        ``message(ID, seq, size)``; with ``topics``: topic "t{seq % 3}"
    frames_child.py read PATH TOTAL TIMEOUT [rolling] [TOPIC,...]
        reads until TOTAL messages came, the end marker (``END``, not counted), or none for
        TIMEOUT s, and prints one JSON line:
        {"order": [[id, seq], ...], "bad": [positions of messages not as written]}
    frames_child.py loop PATH ID MAXSIZE [rolling]
        writes messages until killed; prints "ready" after its first
"""
import json
import math
import os
import random
import struct
import sys

import numpy as np

HEAD = struct.Struct("<IIQ")     # writer id, seq, size
END_WID = 0xFFFFFFFF             # writer id of the end marker: readers stop at it


def message(wid, seq, size):
    """The bytes writer ``wid`` writes as message ``seq`` of ``size`` bytes."""
    if size < HEAD.size:
        return bytes([(wid * 31 + seq) & 0xFF]) * size
    body = np.full(size - HEAD.size, (wid * 31 + seq) & 0xFF, dtype=np.uint8)
    body[::4096] = seq & 0xFF ^ 0x55
    return HEAD.pack(wid, seq, size) + body.tobytes()


END = message(END_WID, 0, HEAD.size)      # the end marker


def check(payload):
    """(wid, seq) of a message as ``message`` made it, or None if it is not one."""
    n = len(payload)
    if n < HEAD.size:
        if n == 0:
            return (-1, -1)
        return (-2, payload[0])
    wid, seq, size = HEAD.unpack_from(payload)
    if size != n or payload != message(wid, seq, size):
        return None
    return (wid, seq)


def sizes(wid, count, maxsize):
    rng = random.Random(wid)
    top = math.log2(maxsize + 1)
    return [int(2 ** rng.uniform(0, top)) - 1 for _ in range(count)]


def open_writer(path, rolling):
    if rolling:
        from mappedbus_py import RollingBusWriter
        return RollingBusWriter(path, frames=True).open()
    from mappedbus_py import MappedBusWriter
    return MappedBusWriter(path, frames=True).open()


def main(argv):
    cmd, path = argv[0], argv[1]
    if cmd == "write":
        wid, count, maxsize = int(argv[2]), int(argv[3]), int(argv[4])
        rolling = "rolling" in argv[5:]
        topics = "topics" in argv[5:]
        w = open_writer(path, rolling)
        for seq, size in enumerate(sizes(wid, count, maxsize)):
            assert w.write(message(wid, seq, size), topic=f"t{seq % 3}" if topics else None)
        w.close()
    elif cmd == "read":
        total, timeout = int(argv[2]), float(argv[3])
        rolling = len(argv) > 4 and argv[4] == "rolling"
        topics = argv[5].split(",") if len(argv) > 5 else None
        if rolling:
            from mappedbus_py import RollingBusReader
            r = RollingBusReader(path, topics=topics).open()
        else:
            from mappedbus_py import MappedBusReader
            r = MappedBusReader(path, topics=topics).open()
        order, bad = [], []
        while len(order) < total:
            rec = r.read(timeout=timeout)
            if rec is None:
                break
            got = check(rec.payload)
            if got == (END_WID, 0):
                break
            if got is None:
                bad.append(rec.position)
            order.append(list(got) if got is not None else None)
        rollbacks = r.rollbacks if not rolling else None
        r.close()
        print(json.dumps({"order": order, "bad": bad, "rollbacks": rollbacks}), flush=True)
    elif cmd == "loop":
        wid, maxsize = int(argv[2]), int(argv[3])
        rolling = len(argv) > 4 and argv[4] == "rolling"
        w = open_writer(path, rolling)
        rng = random.Random(wid)
        top = math.log2(maxsize + 1)
        seq = 0
        while True:
            # Sizes spread evenly in log scale, and every other message a large one, so that a
            # good part of the writer's time is spent inside a message: a kill at a random
            # moment lands mid-message often, never rarely enough to miss in a campaign.
            if seq % 2:
                size = rng.randint(maxsize // 2, maxsize)
            else:
                size = int(2 ** rng.uniform(0, top)) - 1
            w.write(message(wid, seq, size))
            if seq == 0:
                print("ready", flush=True)
            seq += 1


if __name__ == "__main__":
    main(sys.argv[1:])
