"""The topology rig's benchmark table: fio's figures of each point next to
the timed simulator's prediction for the same devices, workload, threads
and policy (tests/spdk/rig_bench.sh writes the inputs).

    python3 rig_bench.py table RESULTS_DIR    # the Markdown table on stdout
    python3 rig_bench.py point FIO_JSON       # one point's figures, one line
    python3 rig_bench.py log RESULTS_DIR      # the log's figures: hhc0, its HDD model, the simulator's engine
    python3 rig_bench.py reads RESULTS_DIR    # where a read's time goes: fio, hhc0, the cache model, misses

A gap above 20 % between the rig and the simulator is marked; docs/results.md
explains each one.
"""

import base64
import glob
import json
import os
import re
import sys

GAP = 0.20


def fio_figures(path):
    """IOPS of reads and writes (syncs not counted, as the simulator does),
    mean request latency, and the FLUSH (sync) latency p50/p99, in us."""
    with open(path) as f:
        text = f.read()
    # fio prints notices before its JSON with some engines.
    data = json.loads(text[text.index("{"):])
    job = data["jobs"][0]
    runtime_s = max(job["read"]["runtime"], job["write"]["runtime"]) / 1000.0
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    lat_sum = sum(job[d]["lat_ns"]["mean"] * job[d]["total_ios"] for d in ("read", "write"))
    sync = job.get("sync", {})
    sync_pct = sync.get("lat_ns", {}).get("percentile", {})

    def pct(key):
        return sync_pct.get(key, 0) / 1000.0

    return {
        "iops": ios / runtime_s if runtime_s > 0 else 0.0,
        "lat_us_mean": lat_sum / ios / 1000.0 if ios else 0.0,
        "flushes": sync.get("total_ios", 0),
        "flush_us_p50": pct("50.000000"),
        "flush_us_p99": pct("99.000000"),
        "errors": job.get("error", 0),
    }


def sim_points(path):
    with open(path) as f:
        data = json.load(f)
    return {p["policy"]: p for p in data["points"]}


def ratio(a, b):
    return a / b if b else float("nan")


def mark(r):
    return " **gap**" if r == r and abs(r - 1.0) > GAP else ""


def fmt(value):
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def table(results_dir):
    rows = []
    header = ("| transport | workload | policy | rig IOPS | sim IOPS | rig/sim | rig lat us | sim lat us "
              "| rig flush p50/p99 ms | sim flush p50/p99 ms |")
    rows.append(header)
    rows.append("|" + "---|" * (header.count("|") - 1))
    for path in sorted(glob.glob(os.path.join(results_dir, "*.fio.json"))):
        transport, workload, policy = os.path.basename(path)[: -len(".fio.json")].split("-", 2)
        rig = fio_figures(path)
        sim = sim_points(os.path.join(results_dir, f"{workload}.sim.json")).get(policy, {})
        sim_iops = sim.get("iops", 0.0)
        r = ratio(rig["iops"], sim_iops)
        stem = os.path.basename(path)[: -len(".fio.json")]
        warm = warm_up(os.path.join(results_dir, f"{stem}.stats.json"),
                       os.path.join(results_dir, f"{workload}.sim.log"), policy)
        rows.append(
            f"| {transport} | {workload} | {policy} | {fmt(rig['iops'])} | {fmt(sim_iops)} | {r:.2f}{mark(r)}{warm} "
            f"| {fmt(rig['lat_us_mean'])} | {fmt(sim.get('latency_us_mean', 0.0))} "
            f"| {rig['flush_us_p50'] / 1000:.1f} / {rig['flush_us_p99'] / 1000:.1f} "
            f"| {sim.get('flush_us_p50', 0.0) / 1000:.1f} / {sim.get('flush_us_p99', 0.0) / 1000:.1f} |"
        )
    return "\n".join(rows)


def find(value, key):
    """The first value of `key` anywhere in a JSON value, or None."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = find(item, key)
            if found is not None:
                return found
    return None


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sim_counters(path, policy):
    """The engine's counters and gauges of `simulate --verbose` (stderr) for
    one policy's point: the line after the point's progress line."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    for line, following in zip(lines, lines[1:]):
        if f" threads {policy}: " in line:
            return dict(kv.split("=", 1) for kv in following.split() if "=" in kv)
    return {}


def warm_up(stats_path, sim_log_path, policy):
    """A note when the simulator's cache filled (no free block at the end)
    and the rig's never did (no eviction): the rig measured a warm-up the
    simulator was past, as WB-Ordered on varmail in 25 s (docs/results.md)."""
    stats = load_json(stats_path)
    counters = sim_counters(sim_log_path, policy)
    if not stats or "free_blocks" not in counters:
        return ""
    if int(counters["free_blocks"]) == 0 and int(find(stats, "evictions") or 0) == 0:
        return " (rig cache never full: warm-up)"
    return ""


def sim_backing_write_ms(path, policy):
    """The simulator's mean charge per backing write, from the `backing:`
    line of `simulate --verbose` for one policy's point; 0 if none."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return 0.0
    found = False
    for line in lines:
        if f" threads {policy}: " in line:
            found = True
        elif found and line.strip().startswith("backing:"):
            match = re.search(r"writes \d+ x ([0-9.]+) ms", line)
            return float(match.group(1)) if match else 0.0
        elif found and not line.startswith(" "):
            break
    return 0.0


def histogram_p50_us(data):
    """The median of an SPDK bdev histogram (`bdev_get_histogram`), in us,
    from its buckets as SPDK's scripts/histogram.py reads them; 0 if empty."""
    if not data or "histogram" not in data:
        return 0.0
    raw = base64.b64decode(data["histogram"])
    granularity, low, high = data["granularity"], data["min_range"], data["max_range"]
    buckets = []
    for i in range(high - low):
        for j in range(1 << granularity):
            index = ((i << granularity) + j) * 8
            count = int.from_bytes(raw[index:index + 8], "little")
            if i > 0:
                end = (1 << (i + granularity + low - 1)) + ((j + 1) << (i + low - 1))
            else:
                end = (j + 1) << low
            buckets.append((end, count))
    total = sum(c for _, c in buckets)
    so_far = 0
    for end, count in buckets:
        so_far += count
        if total and so_far * 2 >= total:
            return end * 1e6 / data["tsc_rate"]
    return 0.0


def log_table(results_dir):
    """Per point: the FLUSH as fio, hhc0 and the simulator saw it; the log
    space left in gaps per part; what the engine's gap choice goes by
    (engine/gap.rs: packed and gapped waits, the host's turnaround), in the
    rig and in the simulator; the HDD model's charge per command; free cache
    blocks at the end (0: the cache filled, a point past its warm-up) and
    the RAID5 model's charge per write, in the rig and in the simulator."""
    header = ("| transport | workload | policy | rig IOPS | sim IOPS | rig/sim | flush p50 ms fio / hhc0 / sim "
              "| gap KiB per part rig / sim | packed wait ms rig / sim | gapped wait ms rig / sim "
              "| turnaround ms rig / sim | hdd0 ms per command | bdev layer flush p50 ms "
              "| free blocks at end rig / sim | raid0 ms per write rig / sim |")
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for path in sorted(glob.glob(os.path.join(results_dir, "*.fio.json"))):
        stem = os.path.basename(path)[: -len(".fio.json")]
        transport, workload, policy = stem.split("-", 2)
        rig = fio_figures(path)
        sim = sim_points(os.path.join(results_dir, f"{workload}.sim.json")).get(policy, {})
        stats = load_json(os.path.join(results_dir, f"{stem}.stats.json")) or {}
        hdd = load_json(os.path.join(results_dir, f"{stem}.hdd0.json")) or {}
        raid = load_json(os.path.join(results_dir, f"{stem}.raid0.json")) or {}
        counters = sim_counters(os.path.join(results_dir, f"{workload}.sim.log"), policy)

        def rig_n(key):
            return float(find(stats, key) or 0)

        def sim_n(key):
            return float(counters.get(key, 0))

        def per_part(n):
            gap, parts = n("log_gap_blocks"), n("log_parts_written")
            return gap * 4 / parts if parts else 0.0

        def ms(n, key):
            return n(key) / 1000.0

        flush = find(stats, "flush_latency_us") or {}
        rows.append(
            f"| {transport} | {workload} | {policy} | {fmt(rig['iops'])} | {fmt(sim.get('iops', 0.0))} "
            f"| {ratio(rig['iops'], sim.get('iops', 0.0)):.2f} "
            f"| {rig['flush_us_p50'] / 1000:.1f} / {flush.get('p50', 0) / 1000:.1f} / {sim.get('flush_us_p50', 0.0) / 1000:.1f} "
            f"| {per_part(rig_n):.0f} / {per_part(sim_n):.0f} "
            f"| {ms(rig_n, 'gap_packed_wait_us'):.1f} / {ms(sim_n, 'gap_packed_wait_us'):.1f} "
            f"| {ms(rig_n, 'gap_gapped_wait_us'):.1f} / {ms(sim_n, 'gap_gapped_wait_us'):.1f} "
            f"| {ms(rig_n, 'gap_turnaround_us'):.1f} / {ms(sim_n, 'gap_turnaround_us'):.1f} "
            f"| {float(hdd.get('model_latency_avg_us', 0)) / 1000:.1f} ({hdd.get('commands', 0)}) "
            f"| {histogram_p50_us(load_json(os.path.join(results_dir, f'{stem}.flush-hist.json'))) / 1000:.1f} "
            f"| {rig_n('free_blocks'):.0f} / {sim_n('free_blocks'):.0f} "
            f"| {float(raid.get('write_model_latency_avg_us', 0)) / 1000:.1f} / "
            f"{sim_backing_write_ms(os.path.join(results_dir, f'{workload}.sim.log'), policy):.1f} |"
        )
    return "\n".join(rows)


def iostat_read(data):
    """(reads, read latency ticks, tick rate) of the first bdev of a
    `bdev_get_iostat` reply; zeros if there is none."""
    bdevs = (data or {}).get("bdevs") or [{}]
    rate = (data or {}).get("tick_rate", 0)
    return bdevs[0].get("num_read_ops", 0), bdevs[0].get("read_latency_ticks", 0), rate


def reads_table(results_dir):
    """Per point, where a read's time goes in fio's measured window:
    fio's read latency (mean, p50, p99), hhc0's own as the host's bdev
    layer saw it (the NVMe-oF or vhost path is the difference), the cache
    model's charge per read (whole run), and the share of blocks read
    that missed, in the rig and in the simulator (a miss goes to the RAID,
    ~10 ms in the rig). hhc0's figures start from the snapshot taken as
    the settle ended (`*-measured.json`), else (older runs) from the one
    taken as the replay started, settle included; points with neither
    show 0 for them."""
    header = ("| transport | workload | policy | fio read mean / p50 / p99 us | hhc0 read mean us "
              "| ssd0 us per read | read misses rig / sim % |")
    rows = [header, "|" + "---|" * (header.count("|") - 1)]
    for path in sorted(glob.glob(os.path.join(results_dir, "*.fio.json"))):
        stem = os.path.basename(path)[: -len(".fio.json")]
        transport, workload, policy = stem.split("-", 2)
        with open(path) as f:
            text = f.read()
        if "{" not in text:
            continue  # a point still running, or whose fio failed
        read = json.loads(text[text.index("{"):])["jobs"][0]["read"]
        pct = read.get("clat_ns", {}).get("percentile", {})
        ops_1, ticks_1, rate = iostat_read(load_json(os.path.join(results_dir, f"{stem}.hhc0-iostat.json")))
        start = "measured" if os.path.exists(os.path.join(results_dir, f"{stem}.stats-measured.json")) else "before"
        ops_0, ticks_0, _ = iostat_read(load_json(os.path.join(results_dir, f"{stem}.hhc0-iostat-{start}.json")))
        hhc0_us = (ticks_1 - ticks_0) / (ops_1 - ops_0) / rate * 1e6 if ops_1 > ops_0 and rate else 0.0
        ssd = load_json(os.path.join(results_dir, f"{stem}.ssd0.json")) or {}
        after = load_json(os.path.join(results_dir, f"{stem}.stats.json")) or {}
        before = load_json(os.path.join(results_dir, f"{stem}.stats-{start}.json")) or {}

        def window(key):
            return float(find(after, key) or 0) - float(find(before, key) or 0) if before else 0.0

        def share(misses, hits):
            return 100.0 * misses / (misses + hits) if misses + hits else 0.0

        counters = sim_counters(os.path.join(results_dir, f"{workload}.sim.log"), policy)
        sim_share = share(float(counters.get("read_misses", 0)), float(counters.get("read_hits", 0)))
        rows.append(
            f"| {transport} | {workload} | {policy} "
            f"| {read['lat_ns']['mean'] / 1000:.0f} / {pct.get('50.000000', 0) / 1000:.0f} / {pct.get('99.000000', 0) / 1000:.0f} "
            f"| {hhc0_us:.0f} | {float(ssd.get('read_model_latency_avg_us', 0)):.0f} "
            f"| {share(window('read_misses'), window('read_hits')):.2f} / {sim_share:.2f} |"
        )
    return "\n".join(rows)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        print(table(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "log":
        print(log_table(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "reads":
        print(reads_table(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "point":
        f = fio_figures(sys.argv[2])
        print(" ".join(f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in f.items()))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
