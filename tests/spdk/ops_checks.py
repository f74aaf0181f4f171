"""Checks of the HHC operator RPCs against a running target, for
tests/spdk/run.sh: python3 ops_checks.py SOCKET CHECK [ARGS...].

Each check prints what it saw and exits non-zero on the first mismatch.
Uses SPDK's python client (PYTHONPATH carries it, as for raw_call)."""

import json
import sys
import time

from spdk.rpc.client import JSONRPCClient, JSONRPCException


def stats(client, name="hhc0"):
    return client.call("bdev_hhc_get_stats", {"name": name})


def expect(condition, what, seen=None):
    if not condition:
        print("FAILED:", what)
        if seen is not None:
            print(json.dumps(seen, indent=1)[:4000])
        sys.exit(1)
    print("ok:", what)


def expect_error(client, method, params, text):
    """The call fails with a JSON-RPC error whose message holds `text`."""
    try:
        result = client.call(method, params)
    except JSONRPCException as e:
        expect(text in str(e), f"{method} {json.dumps(params)[:80]} refused with '{text}'", str(e))
        return
    expect(False, f"{method} {json.dumps(params)[:80]} must fail, answered {result}")


def check_moved(client, minimum_writes):
    """After I/O: counters, flush latency and rates moved; shape of the answer."""
    s = stats(client)
    c = s["counters"]
    expect(c["writes"] >= int(minimum_writes), f"writes {c['writes']} >= {minimum_writes}", s)
    expect(c["flushes"] > 0 and s["flush_latency_us"]["count"] > 0, "flushes counted and timed", s)
    lat = s["flush_latency_us"]
    expect(0 < lat["p50"] <= lat["p99"] <= lat["max"] or lat["max"] == 0, "flush p50 <= p99 <= max", lat)
    expect(c["log_bytes_written"] > 0, "the log was written", s)
    expect(s["gauges"]["cache_blocks"] > 0 and "dirty_blocks" in s["gauges"], "gauges present", s)
    expect(s["rates"]["window_ms"] >= 0 and "writes_per_s" in s["rates"], "rates over a window", s["rates"])
    expect([d["role"] for d in s["devices"]] == ["backing", "cache", "log0"], "devices listed", s["devices"])
    expect(s["devices"][2]["mirror"] == "healthy", "the mirror is healthy", s["devices"])
    # A second get right away: its rate window starts at the first.
    again = stats(client)
    expect(again["rates"]["window_ms"] < 5000 and again["counters"]["writes"] >= c["writes"],
           "rates since the previous get; counters monotonic", again["rates"])


def check_reset(client):
    before = stats(client)
    expect(client.call("bdev_hhc_reset_stats", {"name": "hhc0"}) is True, "reset answers true")
    s = stats(client)
    c = s["counters"]
    expect(c["writes"] == 0 and c["flushes"] == 0 and c["log_bytes_written"] == 0, "counters zero after reset", c)
    expect(s["flush_latency_us"]["count"] == 0, "flush latency reset", s["flush_latency_us"])
    expect(s["since_reset_ms"] < 5000, "since_reset_ms restarted", s)
    expect(s["gauges"]["cache_blocks"] == before["gauges"]["cache_blocks"]
           and s["gauges"]["log_segments_total"] == before["gauges"]["log_segments_total"], "gauges not reset", s)


def check_errors(client):
    expect_error(client, "bdev_hhc_get_stats", {"name": "nope"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_reset_stats", {"name": "nope"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_get_stats", {}, "invalid parameters")
    expect_error(client, "bdev_hhc_get_stats", {"name": 7}, "invalid parameters")
    expect_error(client, "bdev_hhc_get_stats", {"name": "hhc0", "extra": 1}, "invalid parameters")


def wait_policy(client, policy, timeout_s=60):
    """set_policy, then poll get_stats until the switch is complete."""
    answer = client.call("bdev_hhc_set_policy", {"name": "hhc0", "policy": policy})
    print("set_policy", policy, "->", answer)
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline:
        s = stats(client)
        if s["policy"] == policy and s["policy_target"] is None:
            print(f"switched to {policy}; dirty blocks {s['gauges']['dirty_blocks']}")
            # (dirty_blocks counts write-throughs in flight too: not 0 under I/O)
            return
        expect(s["policy_target"] == policy, f"policy_target {policy} while switching", s)
        time.sleep(0.1)
    expect(False, f"switch to {policy} complete within {timeout_s} s", stats(client))


def wait_writes(client, timeout_s=60):
    """Until writes arrive (fio has started)."""
    deadline = time.time() + float(timeout_s)
    while time.time() < deadline:
        if stats(client)["counters"]["writes"] > 0:
            return
        time.sleep(0.05)
    expect(False, "writes arrived")


def switch_policies(client, *policies):
    for policy in policies:
        wait_policy(client, policy)
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0", "policy": "lru"}, "unknown policy 'lru'")
    expect_error(client, "bdev_hhc_set_policy", {"name": "nope", "policy": "wt"}, "no HHC bdev named 'nope'")
    expect_error(client, "bdev_hhc_set_policy", {"name": "hhc0"}, "invalid parameters")


def flush_all(client):
    """flush_all with dirty blocks: progress falls to zero, the cache stays
    warm (no eviction), nothing is dirty afterwards (no writes meanwhile)."""
    before = stats(client)
    dirty = before["gauges"]["dirty_blocks"]
    expect(dirty > 0, f"{dirty} dirty blocks before flush_all", before["gauges"])
    started = client.call("bdev_hhc_flush_all", {"name": "hhc0"})
    expect(started["in_progress"] and started["blocks_remaining"] > 0, f"flush_all started: {started}")
    remaining = started["blocks_remaining"]
    deadline = time.time() + 120
    seen_in_progress = False
    while time.time() < deadline:
        s = stats(client)
        expect(s["flush_all_blocks_remaining"] <= remaining, f"remaining falls: {s['flush_all_blocks_remaining']}")
        remaining = s["flush_all_blocks_remaining"]
        if not s["flush_all_in_progress"]:
            break
        seen_in_progress = True
        time.sleep(0.1)
    expect(seen_in_progress, "get_stats saw flush_all_in_progress")
    expect(not s["flush_all_in_progress"], "flush_all finished", s)
    c = s["counters"]
    expect(c["flush_alls_completed"] - before["counters"]["flush_alls_completed"] == 1
           and c["flush_all_errors"] == 0, "one flush_all completed without errors", c)
    expect(s["gauges"]["dirty_blocks"] == 0, "nothing dirty", s["gauges"])
    expect(c["evictions"] == before["counters"]["evictions"], "no eviction: the cache stays warm", c)
    expect(c["writebacks"] - before["counters"]["writebacks"] >= dirty, "every dirty block written back", c)


def read_misses_zero(client):
    c = stats(client)["counters"]
    expect(c["reads"] > 0 and c["read_misses"] == 0, f"{c['read_hits']} read hits, no miss: warm", c)


def main():
    client = JSONRPCClient(sys.argv[1], timeout=50)
    check = globals()[sys.argv[2].replace("-", "_")]
    check(client, *sys.argv[3:])


if __name__ == "__main__":
    main()
