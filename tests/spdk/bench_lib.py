#!/usr/bin/env python3
"""Helpers of tests/spdk/bench.sh: JSON-RPC calls, a stats poller, result
records and the side-by-side tables. Needs SPDK's python `spdk` package on
PYTHONPATH (tests/spdk/env.sh puts it there).

  call SOCK METHOD PARAMS TIMEOUT         prints the result as JSON
  wait SOCK SECONDS                       until the app answers spdk_get_version
  stats SOCK KIND                         {"hhc": <stats>|null, "ocf": <counters>|null} of bdev bench0
                                          (KIND: hhc, ocf or none)
  poll SOCK KIND OUT                      appends a stats line to OUT every 0.25 s until SOCK goes
  bdevperf RESULT LOGCHUNK BEFORE AFTER   prints one record (JSON) of a bdevperf run
  fio FIO_JSON POLL_FILE                  prints one record of a fio run
  report RESULTS                          prints the tables
"""

import json
import os
import re
import statistics
import sys
import time

BENCH_BDEV = "bench0"


def client(sock, timeout):
    from spdk.rpc.client import JSONRPCClient
    return JSONRPCClient(sock, timeout=timeout, log_level="ERROR")


def cmd_call(sock, method, params, timeout):
    params = json.loads(params) if params else None
    c = client(sock, float(timeout))
    print(json.dumps(c.call(method, params)))
    c.close()


def cmd_wait(sock, seconds):
    deadline = time.time() + float(seconds)
    while time.time() < deadline:
        if os.path.exists(sock):
            try:
                c = client(sock, 5)
                c.call("spdk_get_version")
                c.call("bdev_get_bdevs", {"name": BENCH_BDEV, "timeout": 2000})
                c.close()
                return 0
            except Exception:  # not up yet
                pass
        time.sleep(0.2)
    print(f"no answer on {sock} within {seconds} s", file=sys.stderr)
    return 1


def counters(c, kind):
    """The engine's stats (kind hhc, through the plugin in json-rpc/) or OCF's
    request counters (kind ocf) of bdev bench0; nothing for other kinds."""
    out = {"hhc": None, "ocf": None, "t": time.time()}
    if kind == "hhc":
        import hhc_rpc_plugin
        out["hhc"] = hhc_rpc_plugin.bdev_hhc_get_bdevs(c, BENCH_BDEV)[0]["stats"]
    elif kind == "ocf":
        s = c.call("bdev_ocf_get_stats", {"name": BENCH_BDEV})
        out["ocf"] = {group + "." + k: v["count"] for group in ("requests", "blocks")
                      for k, v in s.get(group, {}).items()}
    return out


def cmd_stats(sock, kind):
    c = client(sock, 10)
    print(json.dumps(counters(c, kind)))
    c.close()


def cmd_poll(sock, kind, out_path):
    """Samples until the socket goes: a fio process has no other way to show
    its engine's counters after the measured job than while it still runs."""
    seen = False
    c = None
    deadline = time.time() + 3600
    with open(out_path, "a") as out:
        while time.time() < deadline:
            if not os.path.exists(sock):
                if seen:
                    return 0
                time.sleep(0.1)
                continue
            try:
                if c is None:
                    c = client(sock, 2)
                sample = counters(c, kind)
                seen = True
                out.write(json.dumps(sample) + "\n")
                out.flush()
            except Exception:
                if c is not None:
                    try:
                        c.close()
                    except Exception:
                        pass
                c = None
                if seen and not os.path.exists(sock):
                    return 0
            time.sleep(0.25)
    return 0


def delta(before, after):
    if before is None or after is None:
        return None
    return {k: after[k] - before.get(k, 0) if isinstance(after[k], (int, float)) else after[k] for k in after}


# Stats that are levels, not counters: shown as they are at the end of a run.
GAUGES = ("dirty_blocks", "unlogged_dirty_blocks", "free_blocks", "cache_blocks", "log_segments_in_use",
          "log_segments_total", "log_live_entries", "healthy_mirrors")


def hhc_summary(before, after, segments):
    """Stats delta of a run and the log wraps in it."""
    if after is None:
        return None
    before = before or {k: 0 for k in after}
    d = delta(before, after)
    for g in GAUGES:
        if g in after:
            d[g] = after[g]
    if "log_wraps" in after:
        wraps, how = d["log_wraps"], "log_wraps (engine)"
    elif "log_segments_total" in after and after["log_segments_total"]:
        wraps = d["log_segments_written"] / after["log_segments_total"]
        how = "log_segments_written / log_segments_total (engine)"
    else:
        wraps = d["log_segments_written"] / segments
        how = f"log_segments_written / {segments} segments (computed from the log size; no log_wraps in stats)"
    hits, misses = d.get("read_hits", 0), d.get("read_misses", 0)
    return {"delta": d, "wraps": wraps, "wraps_how": how,
            "hit_pct": 100.0 * hits / (hits + misses) if hits + misses else None}


def ocf_hit_pct(before, after):
    d = delta(before, after)
    if not d or not d.get("requests.rd_total"):
        return None
    return 100.0 * d["requests.rd_hits"] / d["requests.rd_total"]


def parse_bdevperf_chunk(text):
    """Percentiles of bdevperf -l's latency summary: {'99.00000': us, ...}."""
    out = {}
    for m in re.finditer(r"^\s*([0-9.]+)% :\s*([0-9.]+)us", text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def cmd_bdevperf(result_path, chunk_path, before_path, after_path):
    jobs = json.load(open(result_path))["results"]
    pct = parse_bdevperf_chunk(open(chunk_path, errors="replace").read())
    before, after = json.load(open(before_path)), json.load(open(after_path))
    # One job per core (BDEVPERF_CORES): IOPS add up, latencies are the
    # mean over the jobs weighted by IOPS, and the worst maximum.
    iops = sum(j["iops"] for j in jobs)
    rec = {"iops": iops, "mean_us": sum(j["avg_latency_us"] * j["iops"] for j in jobs) / iops if iops else 0.0,
           "p50_us": pct.get("50.00000"), "p99_us": pct.get("99.00000"),
           "max_us": max(j["max_latency_us"] for j in jobs), "runtime_s": jobs[0]["runtime"],
           "io_failed": sum(j["io_failed"] for j in jobs), "jobs": len(jobs)}
    add_stats(rec, before, after)
    print(json.dumps(rec))


def add_stats(rec, before, after):
    segments = int(os.environ.get("BENCH_LOG_SEGMENTS", "0")) or 1
    s = hhc_summary(before.get("hhc"), after.get("hhc"), segments)
    if s:
        rec.update(stats=s["delta"], wraps=s["wraps"], wraps_how=s["wraps_how"], hit_pct=s["hit_pct"])
    elif after.get("ocf"):
        rec["hit_pct"] = ocf_hit_pct(before.get("ocf"), after.get("ocf"))
        d = delta(before.get("ocf"), after.get("ocf"))
        if d and "blocks.core_volume_wr" in d:
            # 4 KiB blocks OCF wrote to the backing bdev: its write-backs.
            rec["ocf_core_writes"] = d["blocks.core_volume_wr"]


def pctl(p, key):
    return p.get(key) / 1000.0 if p and p.get(key) is not None else None


def fio_section(job):
    """The part of a fio job's result the row shows: its writes, its reads
    for a job that only reads, the reads and writes together for a mixed
    one (unified_rw_reporting=both gives them as "mixed")."""
    if "mixed" in job:
        return job["mixed"]
    if job["write"]["total_ios"] == 0 and job["read"]["total_ios"] > 0:
        return job["read"]
    return job["write"]


def cmd_fio(fio_json, poll_path):
    text = open(fio_json).read()
    # fio may print plugin lines before the JSON document.
    job = next(j for j in json.loads(text[text.index("{"):])["jobs"] if j["jobname"] == "bench")
    w, sync = job["write"], job.get("sync", {})
    m = fio_section(job)
    lat = sync.get("lat_ns", {})
    rec = {"iops": m["iops"], "mean_us": m["clat_ns"]["mean"] / 1000.0,
           "p50_us": pctl(m["clat_ns"].get("percentile"), "50.000000"),
           "p99_us": pctl(m["clat_ns"].get("percentile"), "99.000000"),
           "max_us": m["clat_ns"]["max"] / 1000.0, "runtime_s": m["runtime"] / 1000.0,
           "writes": w["total_ios"], "flushes": sync.get("total_ios", 0),
           "flush_p50_us": pctl(lat.get("percentile"), "50.000000"),
           "flush_p99_us": pctl(lat.get("percentile"), "99.000000"),
           "flush_max_us": lat["max"] / 1000.0 if lat.get("N") else None,
           "io_failed": job.get("error", 0)}
    reads = job["read"]["total_ios"]
    if reads and w["total_ios"]:
        for d in ("read", "write"):
            rec[d[0] + "_p99_us"] = pctl(job[d]["clat_ns"].get("percentile"), "99.000000")
    samples = [json.loads(line) for line in open(poll_path) if line.strip()] if os.path.exists(poll_path) else []
    if samples and samples[-1].get("hhc") is not None:
        # The process made the bdev: its counters start at zero. The "after" is
        # the first sample that has seen every write of the measured job (the
        # hold job behind it keeps the process up and only reads).
        after = next((s for s in samples if s["hhc"] and s["hhc"]["writes"] >= w["total_ios"]), None)
        if after is None:
            after = samples[-1]
            rec["note"] = (f"stats sampled before the last writes: engine saw {after['hhc']['writes']} "
                           f"of {w['total_ios']}")
        before = {"hhc": {k: 0 for k in after["hhc"]}}
        if reads:
            # A job that reads may follow a fill pass (bench_ceph.sh): the
            # counters from the last sample before it started (job_start, ms)
            # to the last one, which the hold job's few reads barely move.
            start = job.get("job_start", 0) / 1000.0
            before = next((s for s in reversed(samples) if s["hhc"] and s["t"] <= start), before)
            after = samples[-1]
        add_stats(rec, before, after)
    elif reads and samples and samples[-1].get("ocf") is not None:
        # OCF's request counters, over the measured job as above.
        start = job.get("job_start", 0) / 1000.0
        before = next((s for s in reversed(samples) if s["ocf"] and s["t"] <= start), samples[0])
        add_stats(rec, before, samples[-1])
    print(json.dumps(rec))


# -------------------------------------------------------------- tables

def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if abs(v) >= 10000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def refs():
    """The targets of the ratio columns: BENCH_REFS, "NAME=TARGET ...",
    each a column "vs NAME" (bench.sh: hhc:wb and bdev_passthru)."""
    spec = os.environ.get("BENCH_REFS", "wb=hhc:wb passthru=bdev_passthru")
    return [tuple(x.split("=", 1)) for x in spec.split()]


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def per_round_ratios(rows, target, other):
    """The target's IOPS over the other's, round by round (ROUNDS > 1)."""
    base = {r.get("round", 1): r["iops"] for r in rows if r["target"] == other and "iops" in r}
    return sorted(r["iops"] / base[r.get("round", 1)] for r in rows
                  if r["target"] == target and "iops" in r and base.get(r.get("round", 1)))


def median_rows(rows):
    """One row per target: with several rounds, the round of median IOPS,
    its IOPS replaced by the median and its ratios by the medians of the
    per-round ratios (each round's targets ran back to back, so a ratio
    within a round is less noisy than one across rounds)."""
    targets = []
    for r in rows:
        if r["target"] not in targets:
            targets.append(r["target"])
    out = []
    for t in targets:
        runs = [r for r in rows if r["target"] == t]
        measured = sorted((r for r in runs if "iops" in r), key=lambda r: r["iops"])
        if len(measured) < 2:
            out.append(measured[0] if measured else runs[0])
            continue
        rep = dict(measured[(len(measured) - 1) // 2])
        rep["iops"] = statistics.median(r["iops"] for r in measured)
        rep["rounds"] = len(measured)
        for name, other in refs():
            ratios = per_round_ratios(rows, t, other)
            if ratios:
                rep["vs_" + name] = (statistics.median(ratios), ratios[0], ratios[-1])
        out.append(rep)
    return out


def ratio_cell(r, key, a, b):
    if key in r:
        mid, low, high = r[key]
        return f"{mid:.2f}x ({low:.2f}-{high:.2f})"
    return ratio(a, b)


def cmd_report(results_path):
    recs = [json.loads(line) for line in open(results_path) if line.strip()]
    order = []
    for r in recs:
        if r["workload"] not in order:
            order.append(r["workload"])
    how = sorted({r["wraps_how"] for r in recs if r.get("wraps_how")})
    rounds = max((r.get("round", 1) for r in recs), default=1)
    # BENCH_P50=1: a p50 column, and flush columns only where a run flushed.
    p50 = os.environ.get("BENCH_P50") == "1"
    if rounds > 1:
        print(f"\n{rounds} rounds, each target once per round: IOPS are medians; a ratio is the median of the"
              " rounds' ratios, with their range")
    for wl in order:
        rows = median_rows([r for r in recs if r["workload"] == wl])
        by = {r["target"]: r for r in rows if "iops" in r}
        ref_iops = [(name, by.get(other, {}).get("iops")) for name, other in refs()]
        flush = any(r.get("flush_p50_us") is not None for r in rows) or (
            not p50 and any("flush_p50_us" in r for r in rows))
        # Hits only mean something for the read workload (a write run's
        # only reads are the fio hold job's few).
        hits = wl in os.environ.get("BENCH_HITS", "randread").split()
        rw = any("r_p99_us" in r for r in rows)
        print()
        print(f"== {rows[0]['title']} ==")
        cols = ["target", "IOPS", "mean us"] + (["p50 us"] if p50 else []) + ["p99 us"]
        if rw:
            cols += ["rd p99", "wr p99"]
        if flush:
            cols += ["flush p50", "flush p99", "flush max"]
        cols += ["vs " + name for name, _ in ref_iops] + (["hit %"] if hits else []) + ["wraps", "run s"]
        table = [cols]
        for r in rows:
            if "iops" not in r:
                table.append([r["target"], "SKIPPED: " + r.get("skipped", "?")])
                continue
            line = [r["target"], fmt(r["iops"], 0), fmt(r["mean_us"])] + ([fmt(r.get("p50_us"))] if p50 else []) + [fmt(r["p99_us"])]
            if rw:
                line += [fmt(r.get("r_p99_us")), fmt(r.get("w_p99_us"))]
            if flush:
                line += [fmt(r.get("flush_p50_us")), fmt(r.get("flush_p99_us")), fmt(r.get("flush_max_us"))]
            wraps = r.get("wraps")
            uses_log = r.get("stats", {}).get("log_segments_written", 0) > 0
            line += [ratio_cell(r, "vs_" + name, r["iops"], iops) for name, iops in ref_iops]
            if hits:
                line.append(fmt(r.get("hit_pct")))
            line += [(fmt(wraps) if uses_log else "0") if wraps is not None else "-", fmt(r.get("runtime_s"))]
            table.append(line)
        widths = [max(len(str(row[i])) for row in table if len(row) > i and len(row) == len(cols))
                  for i in range(len(cols))]
        for row in table:
            if len(row) != len(cols):
                print(f"{row[0]:<{widths[0]}}  {row[1]}")
                continue
            print("  ".join(str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i])
                            for i, c in enumerate(row)))
        # The engine's counters of each HHC run: where a policy's time went.
        if any(r.get("stats") for r in rows):
            print("  engine stats over the run (HHC; dirty_blocks and log_segments_in_use at the end):")
        for r in rows:
            s = r.get("stats")
            if not s:
                continue
            keys = ["writes", "flushes", "reads", "writebacks", "writes_throttled", "log_segments_written", "dirty_blocks",
                    "log_segments_in_use", "device_errors"]
            print("    " + r["target"].ljust(16) + " " + " ".join(f"{k}={s.get(k)}" for k in keys if k in s))
        for r in rows:
            if r.get("ocf_core_writes") is not None:
                print("    " + r["target"].ljust(16) + f" 4 KiB blocks written to the backing bdev={r['ocf_core_writes']}")
        for r in rows:
            if r.get("note"):
                print(f"  note {r['target']}: {r['note']}")
    print()
    for h in how:
        print(f"wraps = {h}")


def main(argv):
    cmds = {"call": cmd_call, "wait": cmd_wait, "stats": cmd_stats, "poll": cmd_poll,
            "bdevperf": cmd_bdevperf, "fio": cmd_fio, "report": cmd_report}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]](*argv[2:]) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
