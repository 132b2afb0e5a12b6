"""A soak-test process (test_soak.py): a writer or a reader going through bus "epochs", one
new bus file per epoch, until the stop file names the last epoch.

    writer <dir> <writer_id> <per_epoch>     writes per_epoch records (id, epoch, i) per epoch
    reader <dir> <reader_id> <writers> <per_epoch>
        reads each epoch whole and checks it: every writer's records complete and in order

Each prints "epoch <k>" when done with epoch k; writers wait while epoch k - 4 is still
there (the test removes an epoch once every process is done with it), so the files in RAM
stay few however long the run. Opening and closing a bus per epoch makes
leaked mappings, descriptors or memory show up as growth over the run.
"""
import os
import struct
import sys
import time

from mappedbus_py import MappedBusReader, MappedBusWriter

RECORD = 12
AHEAD = 4


def file_size(writers, per_epoch):
    return 8 + (8 + RECORD) * writers * per_epoch


def last_epoch(d):
    try:
        with open(os.path.join(d, "stop")) as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def writer(d, wid, per_epoch, writers=4):
    rec = bytearray(RECORD)
    k = 0
    while True:
        # Back-pressure: at most AHEAD epochs past the oldest one not yet read by everyone
        # (the test deletes an epoch once every process is done with it).
        while os.path.exists(os.path.join(d, f"epoch-{k - AHEAD}")):
            time.sleep(0.01)
        with MappedBusWriter(os.path.join(d, f"epoch-{k}"), file_size(writers, per_epoch),
                             RECORD) as w:
            for i in range(per_epoch):
                struct.pack_into("<iii", rec, 0, wid, k, i)
                assert w.write(rec)
                if i % 2000 == 1999:
                    time.sleep(0.002)       # a steady stream, not a flat-out burst
        print(f"epoch {k}", flush=True)
        stop = last_epoch(d)
        if stop is not None and k >= stop:
            return
        k += 1


def reader(d, rid, writers, per_epoch):
    k = 0
    while True:
        expect = {w: 0 for w in range(writers)}
        path = os.path.join(d, f"epoch-{k}")
        deadline = time.monotonic() + 60
        while not os.path.exists(path):     # readers never create a bus: wait for a writer
            if time.monotonic() > deadline:
                sys.exit(f"reader {rid}: epoch {k} never created")
            time.sleep(0.005)
        with MappedBusReader(path, file_size(writers, per_epoch), RECORD) as r:
            for _ in range(writers * per_epoch):
                rec = r.read(timeout=60)
                if rec is None:
                    sys.exit(f"reader {rid}: epoch {k} stalled at {r.position}")
                wid, epoch, i = struct.unpack_from("<iii", rec.payload)
                if epoch != k or expect.get(wid) != i:
                    sys.exit(f"reader {rid}: epoch {k}: got ({wid}, {epoch}, {i}), "
                             f"expected writer {wid} record {expect.get(wid)}")
                expect[wid] = i + 1
            if r.skipped:
                sys.exit(f"reader {rid}: epoch {k} lost {r.skipped} records")
        print(f"epoch {k}", flush=True)
        stop = last_epoch(d)
        if stop is not None and k >= stop:
            return
        k += 1


if __name__ == "__main__":
    cmd, d, *nums = sys.argv[1:]
    if cmd == "writer":
        writer(d, int(nums[0]), int(nums[1]))
    else:
        reader(d, int(nums[0]), int(nums[1]), int(nums[2]))
