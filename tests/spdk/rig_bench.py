"""The topology rig's benchmark table: fio's figures of each point next to
the timed simulator's prediction for the same devices, workload, threads
and policy (tests/spdk/rig_bench.sh writes the inputs).

    python3 rig_bench.py table RESULTS_DIR    # the Markdown table on stdout
    python3 rig_bench.py point FIO_JSON       # one point's figures, one line

A gap above 20 % between the rig and the simulator is marked; docs/results.md
explains each one.
"""

import glob
import json
import os
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
        rows.append(
            f"| {transport} | {workload} | {policy} | {fmt(rig['iops'])} | {fmt(sim_iops)} | {r:.2f}{mark(r)} "
            f"| {fmt(rig['lat_us_mean'])} | {fmt(sim.get('latency_us_mean', 0.0))} "
            f"| {rig['flush_us_p50'] / 1000:.1f} / {rig['flush_us_p99'] / 1000:.1f} "
            f"| {sim.get('flush_us_p50', 0.0) / 1000:.1f} / {sim.get('flush_us_p99', 0.0) / 1000:.1f} |"
        )
    return "\n".join(rows)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        print(table(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "point":
        f = fio_figures(sys.argv[2])
        print(" ".join(f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in f.items()))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
