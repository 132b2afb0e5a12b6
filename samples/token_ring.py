"""Token ring sample: N nodes, each both writer and reader on one bus, pass a token around.

    python samples/token_ring.py 0 3        # in three terminals, in any order:
    python samples/token_ring.py 1 3        # token <id> <number_of_nodes>
    python samples/token_ring.py 2 3

Node 0 sends Token(from=0, to=1). Every node reads every record on the bus and reacts only to
tokens addressed to it: it prints the token and sends Token(from=id, to=(id+1) % N). After
--rounds full rounds node 0 sends Token(from=0, to=-1), which every node sees and stops on.
Nodes may be Python or Java (io.mappedbuspy.samples.TokenRing) in any mix.

Node 0 makes the bus file: it replaces any old file at --path when it starts and removes it
when the ring stops; the other nodes wait for it to appear and read it from its first record,
so a node started late still sees the token. (If a ring was killed, start node 0 first.)
"""
import argparse
import os
import signal
import sys
import tempfile
import time
from typing import List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mappedbus_py import BusFullError, MappedBusReader, MappedBusWriter, Token  # noqa: E402
from mappedbus_py.formats.files import remove_bus, side_files  # noqa: E402

SHM = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
DEFAULT_PATH = os.path.join(SHM, "mappedbus-sample-token")
FILE_SIZE = 2_000_000
RECORD_SIZE = 8
STOP = -1  # the "to" of the token that ends the ring


def create_bus(path: str) -> None:
    """Node 0: a fresh, initialised bus file at ``path``, swapped in atomically so no node
    ever opens a half-made file or the previous ring's."""
    tmp = f"{path}.{os.getpid()}.tmp"
    MappedBusWriter(tmp, FILE_SIZE, RECORD_SIZE, wake=False).open().close()
    # Its side files go along (the metadata: sizes, id; the writers file); an old ring's side
    # files that the new bus has none of go, so nothing of the old bus stays beside the new one.
    for src, dst in zip(side_files(tmp), side_files(path)):
        if os.path.isfile(src) and not os.path.islink(src):
            os.replace(src, dst)
        elif os.path.isfile(dst) and not os.path.islink(dst):
            os.unlink(dst)
    os.replace(tmp, path)


def wait_for_file(path: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            sys.exit(f"token_ring: no bus file {path} after {timeout:g} s (is node 0 running?)")
        time.sleep(0.01)


def run(node: int, nodes: int, rounds: int, interval: float, path: str,
        timeout: float) -> None:
    received = 0
    token = Token()
    with MappedBusWriter(path, FILE_SIZE, RECORD_SIZE) as writer, \
            MappedBusReader(path, FILE_SIZE, RECORD_SIZE) as reader:
        if node == 0:
            writer.write(Token(from_=0, to=1 % nodes))
        completed = 0
        while True:
            if not reader.wait(timeout):
                sys.exit(f"token_ring: node {node} saw no token for {timeout:g} s")
            reader.read_message(token)
            if token.to == STOP:
                print(f"Node {node} done: received {received} tokens", flush=True)
                return
            if token.to != node:
                continue
            received += 1
            print(f"Node {node} received {token}", flush=True)
            if interval > 0:
                time.sleep(interval)
            if node == 0:
                completed += 1
                if completed >= rounds:
                    writer.write(Token(from_=0, to=STOP))
                    continue  # node 0 stops when it reads its own stop token, like the others
            writer.write(Token(from_=node, to=(node + 1) % nodes))


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("id", type=int, help="this node's id, 0..number_of_nodes-1")
    p.add_argument("number_of_nodes", type=int)
    p.add_argument("--rounds", type=int, default=5,
                   help="full rounds before node 0 stops the ring (default 5)")
    p.add_argument("--interval", type=float, default=0.2,
                   help="seconds a node holds the token before passing it on (default 0.2)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="give up after this many seconds without a token (default 30)")
    p.add_argument("--path", default=DEFAULT_PATH, help=f"bus file (default {DEFAULT_PATH})")
    a = p.parse_args(argv)
    if a.number_of_nodes < 1 or not 0 <= a.id < a.number_of_nodes:
        p.error("need 0 <= id < number_of_nodes")
    if a.rounds < 1:
        p.error("--rounds must be at least 1")
    if (a.rounds * a.number_of_nodes + 2) * (8 + RECORD_SIZE) + 8 > FILE_SIZE:
        p.error(f"{a.rounds} rounds of {a.number_of_nodes} nodes do not fit in one bus file")

    # A terminated node 0 still runs its finally block and removes the file.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if a.id == 0:
        create_bus(a.path)
    else:
        wait_for_file(a.path, a.timeout)
    try:
        run(a.id, a.number_of_nodes, a.rounds, a.interval, a.path, a.timeout)
    except BusFullError as e:
        sys.exit(f"token_ring: {e}")
    finally:
        # Every node has the file mapped by now (each held the token), so it can go.
        if a.id == 0:
            remove_bus(a.path)


if __name__ == "__main__":
    main()
