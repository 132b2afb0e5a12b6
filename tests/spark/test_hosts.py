"""Reads on many hosts: each host's tasks read that host's bus and only that one, and a per-host read
is exactly the union of the hosts' buses. The cluster tests run a standalone Spark cluster on this
machine: a master and two workers, either each in its own mount and UTS namespace with a private tmpfs
over the bus directory and its own host name (two "machines"), or plain (one machine)."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from mappedbus_py import MappedBusWriter

from .helpers import bus_reader

pytestmark = pytest.mark.spark

RECORD = 12
SIZE = 100_000
HERE = os.path.dirname(os.path.abspath(__file__))


def write_ids(path, ids):
    with MappedBusWriter(path, SIZE, RECORD) as w:
        for i in ids:
            assert w.write(struct.pack("<qi", i, 0))


def test_per_host_read_on_one_machine_reads_its_bus_once(spark, bus_path):
    write_ids(bus_path, range(300))
    df = bus_reader(spark, bus_path, layout="id:int64,value:int32", hosts="*")
    assert df.rdd.getNumPartitions() == 1     # one host (local mode): one part
    assert sorted(r.id for r in df.collect()) == list(range(300))
    assert sorted(r.id for r in df.where("id >= 290").collect()) == list(range(290, 300))


def test_a_task_refuses_a_bus_replaced_since_planning(spark, bus_path):
    write_ids(bus_path, range(10))
    df = bus_reader(spark, bus_path, layout="id:int64,value:int32", numPartitions=1)
    planned = df.rdd  # planning happens here: the partition names this bus's id and inode
    os.unlink(bus_path)
    os.unlink(bus_path + ".meta")
    write_ids(bus_path, range(100, 110))
    with pytest.raises(Exception, match="is not the bus this task was planned on"):
        planned.collect()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_class():
    import pyspark
    return os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-class")


class Cluster:
    """A standalone master and two workers; ``isolated``: each worker in its own mount and UTS
    namespace, with a private tmpfs on ``bus_dir`` (holding its own bus, ids ``k*1000 ...``) and its
    own host name and executor host (127.0.0.2, 127.0.0.3); else both on 127.0.0.1 sharing the bus."""

    def __init__(self, root, isolated):
        self.root = root
        self.isolated = isolated
        self.bus_dir = os.path.join(root, "buses")
        os.makedirs(self.bus_dir)
        self.procs = []
        self.port = free_port()
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=os.path.join(root, "logs"), PYTHONPATH=os.getcwd())
        self.env = env
        self._start("master", [spark_class(), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(free_port())], env)
        self.hosts = []
        for k in (1, 2):
            host = f"127.0.0.{k + 1}" if isolated else "127.0.0.1"
            self.hosts.append(host)
            worker = [spark_class(), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{self.port}",
                      "-h", host, "-c", "1", "-m", "768m", "--webui-port", str(free_port()),
                      "--work-dir", os.path.join(root, f"work{k}")]
            wenv = dict(env, SPARK_LOCAL_IP=host)
            if isolated:
                # The worker's own "machine": its tmpfs over the bus directory holds its own bus.
                script = (f'mount -t tmpfs -o size=16m tmpfs "$1" && hostname mbworker{k} && '
                          f'"$2" -c "import struct; from mappedbus_py import MappedBusWriter as W; '
                          f'w = W(\'{self.bus_path}\', {SIZE}, {RECORD}).open(); '
                          f'[w.write(struct.pack(\'<qi\', i, 0)) for i in range({k * 1000}, {k * 1000 + 100 * k})]; '
                          f'w.close()" && '
                          f'shift 2 && exec "$@"')
                cmd = ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script, "sh",
                       self.bus_dir, sys.executable, *worker]
            else:
                cmd = worker
            self._start(f"worker{k}", cmd, wenv)
        deadline = time.time() + 120
        for k in (1, 2):
            log = os.path.join(root, f"worker{k}.log")
            while "Successfully registered with master" not in open(log).read():
                if time.time() > deadline or self.procs[k].poll() is not None:
                    self.stop()
                    raise AssertionError(f"worker {k} did not register:\n" + open(log).read()[-3000:])
                time.sleep(0.5)

    @property
    def bus_path(self):
        return os.path.join(self.bus_dir, "prices")

    @property
    def master(self):
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name, cmd, env):
        log = open(os.path.join(self.root, name + ".log"), "w")
        self.procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        deadline = time.time() + 20
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def run_driver(cluster, hosts):
    res = subprocess.run([sys.executable, os.path.join(HERE, "cluster_driver.py"), cluster.master,
                          cluster.bus_path, hosts], capture_output=True, text=True, timeout=420,
                         env=dict(cluster.env, SPARK_LOCAL_IP="127.0.0.1"))
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.fixture
def cluster_root(tmp_path):
    root = str(tmp_path / "cluster")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="separate mount and UTS namespaces need root and unshare")
def test_two_hosts_with_their_own_buses_read_as_their_union(cluster_root):
    c = Cluster(cluster_root, isolated=True)
    try:
        # The driver's own bus at the same path: a third bus, which no worker may read.
        write_ids(c.bus_path, range(5000, 5007))
        got = run_driver(c, ",".join(c.hosts))
    finally:
        c.stop()
    union = list(range(1000, 1100)) + list(range(2000, 2200))
    assert got["per_host"] == union
    assert got["per_host_all"] == union
    # Planned on the driver's bus: tasks on the workers find other buses there and refuse them, with or
    # without the host-name check (which the workers' own host names also fail).
    for name in ("driver_planned", "driver_planned_no_host_check"):
        assert isinstance(got[name], dict), f"{name} read another host's bus: {got[name]}"
        assert "not the bus this task was planned on" in got[name]["error"] or "node-local" in got[name]["error"]
    assert "not the bus this task was planned on" in got["driver_planned_no_host_check"]["error"]


@pytest.mark.slow
def test_plain_standalone_cluster_reads_the_shared_bus_once(cluster_root):
    c = Cluster(cluster_root, isolated=False)
    try:
        write_ids(c.bus_path, range(700))
        got = run_driver(c, "127.0.0.1")
    finally:
        c.stop()
    for name in ("per_host", "per_host_all", "driver_planned", "driver_planned_no_host_check"):
        assert got[name] == list(range(700)), (name, got[name] if isinstance(got[name], dict) else len(got[name]))
