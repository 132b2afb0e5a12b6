"""The Markdown table and the PNG plots, from the figures run.py collected."""
import os

TRANSPORTS = [
    # (label, figure) for the 1 writer -> 1 reader throughput chart and table
    ("mappedbus_py Python -> Python, numpy batch", "py_py_batch_msgs_per_s"),
    ("mappedbus_py Python -> Python, bytes", "py_py_bytes_msgs_per_s"),
    ("mappedbus_py Python -> Python, per message", "py_py_msgs_per_s"),
    ("mappedbus_py Python -> Python, per message, fields_writer", "py_py_fields_msgs_per_s"),
    ("mappedbus_py Java -> Java", "java_java_msgs_per_s"),
    ("mappedbus_py Java -> Python", "java_py_msgs_per_s"),
    ("mappedbus_py Python -> Java", "py_java_msgs_per_s"),
    ("mappedbus_py Java -> Python, numpy batch reader", "java_py_batch_msgs_per_s"),
    ("mappedbus_py Python -> Java, numpy batch writer", "py_java_batch_msgs_per_s"),
    ("Java original Mappedbus 0.5.1 (measured in this run)", "java_original_msgs_per_s"),
    ("pyzmq PUSH/PULL ipc://", "zmq_ipc_msgs_per_s"),
    ("multiprocessing.Pipe (send_bytes)", "mp_pipe_msgs_per_s"),
    ("multiprocessing.Queue", "mp_queue_msgs_per_s"),
    ("faster-fifo Queue", "faster_fifo_msgs_per_s"),
    ("iceoryx2 publish-subscribe (Python, lossless)", "iox2_msgs_per_s"),
    ("Py4J, Python -> JVM call per message", "py4j_msgs_per_s"),
]
SIDE_BY_SIDE = [("Java original 0.5.1", "java_original"), ("mappedbus_py Java port", "java_java"),
                ("mappedbus_py Python, per message", "py_py")]
WRITERS = (1, 2, 4, 8)
PAYLOADS = (8, 64, 512, 4096, 32768)
RTT_PAIRS = [("machine floor (C, two cache lines, no bus)", "floor_rtt_"),
             ("Python - Python", "rtt_"), ("Python - Java", "py_java_rtt_"),
             ("Java - Python", "java_py_rtt_"), ("Java - Java", "java_java_rtt_")]
PCTS = [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p99.9", "p99_9"), ("max", "max")]


def _rate(v):
    return f"{v / 1e6:,.2f} M" if v >= 1e6 else f"{v / 1e3:,.1f} k"


def _ns(v):
    return f"{v:,.0f}" if v < 1e6 else f"{v / 1e6:,.1f} ms"


def markdown(f, target_rows, raw):
    out = []
    cfg = raw.get("config", {})
    out.append(f"Machine: {f.get('machine_cpu')}, {f.get('machine_cores')} cores, "
               f"{f.get('machine_ram_gb')} GB RAM, Linux {f.get('machine_kernel')}, "
               f"{f.get('machine_python')}, {f.get('machine_java')}. Load average "
               f"{f.get('machine_load_avg_start')} at start, {f.get('machine_load_avg_end')} at end "
               f"(the machine is shared).\n")
    out.append(f"`{f.get('mode')}` mode, {f.get('date')}; each figure is the median of "
               f"{f.get('runs_per_figure')} runs in fresh processes; rates timed in the receiver "
               f"after a 10% warm-up; 12-byte PriceUpdate messages; suite took "
               f"{f.get('suite_seconds')} s.\n")
    base = f.get("py_py_msgs_per_s")
    rows = [(lab, key) for lab, key in TRANSPORTS if key in f]
    if rows:
        out.append("| 1 writer -> 1 reader | messages/s | ns/message | messages | vs Python per-message |")
        out.append("| --- | ---: | ---: | ---: | ---: |")
        for lab, key in rows:
            v = f[key]
            rawk = raw.get(key.replace("_msgs_per_s", ""), raw.get(key, {}))
            n = rawk.get("messages", "")
            vs = f"{v / base:.2f} x" if base and key != "py_py_msgs_per_s" else ""
            out.append(f"| {lab} | {_rate(v)} | {1e9 / v:,.1f} | {n:,} | {vs} |" if n != "" else
                       f"| {lab} | {_rate(v)} | {1e9 / v:,.1f} | | {vs} |")
        out.append("")
    side = [(lab, stem) for lab, stem in SIDE_BY_SIDE
            if f"{stem}_default_msgs_per_s" in f or f"{stem}_prefault_msgs_per_s" in f]
    if side:
        out.append("Side by side in this run (1 writer -> 1 reader process, 12-byte PriceUpdate, "
                   "/dev/shm; the Java original driven by perf/java/OriginalPerf.java). "
                   "*prefault*: every page mapped before the timing; *default*: a fresh file "
                   "mapped as each library does by default, page faults inside the timing "
                   f"({cfg.get('default_n', 0):,} messages).\n")
        out.append("| system | prefault msgs/s | vs original | default msgs/s | vs original "
                   "| default faults / 1000 msgs (writer / reader) | default: making the file, ms |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for lab, stem in side:
            cells = []
            for mode in ("prefault", "default"):
                v = f.get(f"{stem}_{mode}_msgs_per_s")
                o = f.get(f"java_original_{mode}_msgs_per_s")
                cells += [_rate(v) if v else "", f"{v / o:.2f} x" if v and o else ""]
            wf = f.get(f"{stem}_default_writer_faults_per_kmsg")
            rf = f.get(f"{stem}_default_reader_faults_per_kmsg")
            cells.append(f"{wf:.2f} / {rf:.2f}" if wf is not None and rf is not None else "")
            made = f.get(f"{stem}_default_create_ms")
            cells.append(f"{made:,.0f}" if made is not None else "")
            out.append(f"| {lab} | " + " | ".join(cells) + " |")
        out.append("")
        rr, lines = raw.get("round_ratios", {}), raw.get("line_rtt_p50_ns", {})
        for mode in ("prefault", "default"):
            for lab, stem in side[1:]:
                vals = rr.get(f"{stem}_{mode}_vs_java_original_{mode}")
                line = lines.get(f"java_original_{mode}", [])
                if vals:
                    cells = [f"{v:.2f} x" + (f" ({l:.0f})" if len(line) == len(vals) else "")
                             for v, l in zip(vals, line or [0] * len(vals))]
                    out.append(f"- {lab} / original, {mode}, each round (the cache-line round trip "
                               f"before the original's run, ns): " + " / ".join(cells))
        out.append("")
        out.append("Page faults are the kernel's minor-fault count of each process, start-up "
                   "included (a JVM takes about 5,000-7,000, Python about 5,700): a count the "
                   "machine's load does not change. A store to an unmapped page faults for that "
                   "page alone (4.9 faults per 1000 20-byte records); a load maps up to 16 pages "
                   "the file already has (fault-around: 0.3 per 1000). The Python writer maps its "
                   "pages ahead with MADV_POPULATE_WRITE (counted as faults, without a trap each); "
                   "the Java port's writer loads a byte of each page ahead of its records. Both "
                   "reserve a fresh tmpfs file's pages when they make it (Python posix_fallocate, "
                   "Java writing zeros: Java has no fallocate); the original leaves it sparse, so "
                   "its writer allocates every page inside a write.\n")
    if "py_floor_ns_per_msg" in f:
        out.append("Python floor: the same Python loops with each bus call replaced by a no-op "
                   "call into a C function taking the same arguments (`operator.truth` for one, "
                   "`perf/noop.pyx` `noop3` for `fields_writer`'s three); the bus's own cost is "
                   "the difference. The writer alone runs the same writer loop on a bus nobody "
                   "reads: what the bus's calls cost without a reader taking the writer's cache "
                   "lines. Before every run the suite measures the machine's cache-line round "
                   "trip (the latency floor below, in C): the share a reader costs follows it.\n")
        out.append("| Python per-message form | floor ns/msg (writer / reader loop) | bus ns/msg | "
                   "bus adds ns/msg | bus adds, each round (cache-line round trip just before, "
                   "ns) | writer alone, no reader: ns/msg "
                   "(adds to its loop) |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: |")
        for lab, stem, key in (("message objects (`m.price = i; write(m)`)", "py_floor", "py_py"),
                               ("`fields_writer(PriceUpdate)(source, i, 7)`", "py_fields_floor", "py_py_fields")):
            if f"{stem}_ns_per_msg" in f and f"{key}_ns_per_msg" in f:
                alone = stem.replace("floor", "writer_alone") + "_ns_per_msg"
                rounds = raw.get("round_ratios", {}).get(stem.replace("floor", "bus_overhead")
                                                         + "_ns_per_msg", [])
                line = raw.get("line_rtt_p50_ns", {}).get(
                    "py_py_msgs_per_s" if key == "py_py" else f"{key}_msgs_per_s", [])
                if len(line) == len(rounds):
                    rounds = [f"{v:.0f} ({l:.0f})" for v, l in zip(rounds, line)]
                else:
                    rounds = [f"{v:.0f}" for v in rounds]
                out.append(f"| {lab} | {f[stem + '_ns_per_msg']:.1f} "
                           f"({f[stem + '_writer_ns_per_msg']:.1f} / "
                           f"{f[stem + '_reader_ns_per_msg']:.1f}) | {f[key + '_ns_per_msg']:.1f} | "
                           f"{f[key + '_ns_per_msg'] - f[stem + '_ns_per_msg']:.1f} | "
                           + " / ".join(rounds) + " | "
                           + (f"{f[alone]:.1f} ({f[alone] - f[stem + '_writer_ns_per_msg']:.1f})"
                              if alone in f else "") + " |")
        out.append("")
    if any(f"py_{k}w_1r_msgs_per_s" in f for k in WRITERS[1:]):
        out.append("| N Python writers -> 1 Python reader | messages/s |")
        out.append("| --- | ---: |")
        for k in WRITERS:
            key = "py_py_msgs_per_s" if k == 1 else f"py_{k}w_1r_msgs_per_s"
            if key in f:
                out.append(f"| {k} | {_rate(f[key])} |")
        out.append("")
    if any(f"payload_{s}_msgs_per_s" in f for s in PAYLOADS):
        out.append("| payload bytes (Python bytes API, 1 -> 1) | messages/s | MB/s |")
        out.append("| ---: | ---: | ---: |")
        for s in PAYLOADS:
            if f"payload_{s}_msgs_per_s" in f:
                out.append(f"| {s:,} | {_rate(f[f'payload_{s}_msgs_per_s'])} | "
                           f"{f[f'payload_{s}_mb_per_s']:,.0f} |")
        out.append("")
    if any(f"{p}p50_ns" in f for _, p in RTT_PAIRS):
        out.append("| round trip (ns) | " + " | ".join(l for l, _ in PCTS)
                   + " | round trips | p50 of each round |")
        out.append("| --- |" + " ---: |" * (len(PCTS) + 2))
        for lab, p in RTT_PAIRS:
            if f"{p}p50_ns" in f:
                rounds = raw.get(p + "hist", {}).get("round_p50_ns", [])
                out.append(f"| {lab} | " + " | ".join(_ns(f[f"{p}{k}_ns"]) for _, k in PCTS)
                           + f" | {f[f'{p}round_trips']:,} | "
                           + " / ".join(_ns(v) for v in rounds) + " |")
        out.append("")
        if "floor_rtt_p50_ns" in f:
            out.append("The floor is the machine's own round trip in the same rounds: two "
                       "processes bounce two cache lines of shared memory in C with the bus's "
                       "acquire loads and release stores (perf/pingpong.pyx). Every bus round "
                       "trip moves at least those lines, so the floor bounds every pair from "
                       "below, and what a pair adds to it is the bus's own cost. The Python "
                       "initiator times with `time.perf_counter_ns` (a Python call inside the "
                       "timing), the floor and Java with the same clock read from C.\n")
    if "mem_writer_peak_rss_kb_small" in f:
        s, l = f["mem_small_messages"], f["mem_large_messages"]
        out.append(f"| memory (kB) | writer, {s:,} msgs | writer, {l:,} | reader, {s:,} | reader, {l:,} |")
        out.append("| --- | ---: | ---: | ---: | ---: |")
        for lab, k in (("peak resident (VmHWM)", "peak_rss_kb"), ("private (RssAnon)", "private_kb"),
                       ("bus pages mapped (RssShmem)", "bus_pages_kb")):
            out.append(f"| {lab} | " + " | ".join(
                f"{f[f'mem_{r}_{k}_{t}']:,}" for r in ("writer", "reader") for t in ("small", "large"))
                + " |")
        out.append("")
        out.append("The bus is append-only: the mapped pages are the file and grow with it; the "
                   "private memory does not grow with the number of messages.\n")
    if target_rows:
        out.append("| target | measured | met |")
        out.append("| --- | ---: | :---: |")
        for label, val, met in target_rows:
            out.append(f"| {label} | {val} | {'yes' if met else '**no**'} |")
        out.append("")
    return "\n".join(out) + "\n"


def plots(f, raw, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title_machine = f"{f.get('machine_cpu')}, {f.get('machine_cores')} cores, {f.get('mode')} mode"

    # 1. throughput by transport, plus N writers
    rows = [(lab, f[key]) for lab, key in TRANSPORTS if key in f]
    rows += [(f"mappedbus_py {k} Python writers -> 1 reader", f[f"py_{k}w_1r_msgs_per_s"])
             for k in WRITERS[1:] if f"py_{k}w_1r_msgs_per_s" in f]
    if rows:
        fig, ax = plt.subplots(figsize=(10, 0.42 * len(rows) + 1.4))
        labels, vals = zip(*rows)
        colors = ["tab:blue" if l.startswith("mappedbus_py") else
                  "tab:gray" if "original" in l else "tab:orange" for l in labels]
        y = range(len(rows))[::-1]
        ax.barh(list(y), vals, color=colors)
        ax.set_yticks(list(y), labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("messages per second (log scale), 12-byte PriceUpdate")
        for yy, v in zip(y, vals):
            ax.text(v, yy, " " + _rate(v), va="center", fontsize=7)
        ax.set_xlim(min(vals) / 2, max(vals) * 6)
        ax.set_title(f"Throughput by transport\n{title_machine}", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "throughput.png"), dpi=110)
        plt.close(fig)

    # 2. payload sizes
    sizes = [s for s in PAYLOADS if f"payload_{s}_msgs_per_s" in f]
    if sizes:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
        a1.plot(sizes, [f[f"payload_{s}_msgs_per_s"] for s in sizes], "o-")
        a1.set_ylabel("messages / s")
        a2.plot(sizes, [f[f"payload_{s}_mb_per_s"] for s in sizes], "o-", color="tab:green")
        a2.set_ylabel("MB / s")
        for ax in (a1, a2):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("payload bytes")
            ax.grid(True, which="both", alpha=0.3)
        fig.suptitle(f"Python bytes API, 1 writer -> 1 reader, by payload size\n{title_machine}",
                     fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "payload.png"), dpi=110)
        plt.close(fig)

    # 3. latency percentiles and histogram
    pairs = [(lab, p) for lab, p in RTT_PAIRS if f"{p}p50_ns" in f]
    if pairs:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
        width = 0.8 / len(pairs)
        for i, (lab, p) in enumerate(pairs):
            vals = [f[f"{p}{k}_ns"] for _, k in PCTS]
            a1.bar([j + i * width for j in range(len(PCTS))], vals, width, label=lab)
        a1.set_xticks([j + width * (len(pairs) - 1) / 2 for j in range(len(PCTS))],
                      [l for l, _ in PCTS])
        a1.set_yscale("log")
        a1.set_ylabel("round trip, ns (log)")
        a1.set_title("Round-trip percentiles", fontsize=9)
        a1.legend(fontsize=7)
        a1.grid(True, axis="y", which="both", alpha=0.3)
        for lab, p in pairs:
            h = raw.get(p + "hist")
            if h:
                e, c = h["hist_edges_ns"], h["hist_counts"]
                a2.stairs(c, e, label=lab)
        a2.set_xscale("log")
        a2.set_yscale("log")
        a2.set_xlabel("round trip, ns (log)")
        a2.set_ylabel("round trips (log)")
        a2.set_title("Round-trip histogram", fontsize=9)
        a2.legend(fontsize=7)
        fig.suptitle(f"Ping-pong over two buses, busy-spinning\n{title_machine}", fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "latency.png"), dpi=110)
        plt.close(fig)
