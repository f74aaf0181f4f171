#!/usr/bin/env python3
"""The rpc.py plugin (json-rpc/hhc_rpc_plugin.py) without SPDK: its
subcommands are added to a parser built the way SPDK's rpc.py builds its own
(scripts/rpc.py of v25.09: global options, then
`subparsers = parser.add_subparsers(help='RPC methods', dest='called_rpc_name',
metavar='')` and `plugin.spdk_rpc_plugin_initialize(subparsers)`), command
lines are parsed as rpc.py parses them, and each command's function runs
with a fake client that records the JSON-RPC method and params instead of
sending them.

Run: python3 tests/rpc_plugin_test.py (tests/rpc_plugin.rs runs it under
`cargo test`). Exit status 0 when every test passed.
"""

import argparse
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUGIN_DIR = os.path.join(REPO, "json-rpc")
sys.path.insert(0, PLUGIN_DIR)

import hhc_rpc_plugin  # noqa: E402


class FakeClient:
    """Records what would be sent; answers `answer`."""

    def __init__(self, answer=True):
        self.calls = []
        self.answer = answer

    def call(self, method, params=None):
        self.calls.append((method, params))
        return self.answer


def spdk_like_parser():
    """rpc.py's parser as far as a plugin sees it: its global options (among
    them -p, the port, which a subcommand's own -p must not collide with) and
    its subparsers, with the plugin's subcommands added."""
    parser = argparse.ArgumentParser(description="SPDK RPC command line interface", usage="%(prog)s [options]")
    parser.add_argument("-s", dest="server_addr", default="/var/tmp/spdk.sock")
    parser.add_argument("-p", dest="port", default=5260, type=int)
    parser.add_argument("-t", dest="timeout", default=60.0, type=float)
    parser.add_argument("-r", dest="conn_retries", default=0, type=int)
    parser.add_argument("-v", dest="verbose", action="store_const", const="INFO", default="ERROR")
    parser.add_argument("--dry-run", dest="dry_run", action="store_true")
    parser.add_argument("--plugin", dest="rpc_plugin")
    subparsers = parser.add_subparsers(help="RPC methods", dest="called_rpc_name", metavar="")
    hhc_rpc_plugin.spdk_rpc_plugin_initialize(subparsers)
    return parser


def run(argv):
    """Parses `argv` as rpc.py would and runs the command with a fake
    client; returns (the recorded calls, what the command printed)."""
    args = spdk_like_parser().parse_args(["-s", "/tmp/none.sock", "--plugin", "hhc_rpc_plugin"] + argv)
    client = FakeClient()
    args.client = client
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        args.func(args)
    return client.calls, printed.getvalue()


def params_of(argv):
    calls, _ = run(argv)
    assert len(calls) == 1, calls
    return calls[0]


def usage_error(argv):
    """The message of the usage error `argv` makes (argparse exits 2)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            spdk_like_parser().parse_args(argv)
        except SystemExit as exit:
            if exit.code == 2:
                return stderr.getvalue()
            raise
    raise AssertionError("no usage error for %s" % argv)


CREATE = ["bdev_hhc_create", "-b", "x", "--backing", "y", "--cache", "ssd"]


class ListArguments(unittest.TestCase):
    def logs(self, *logs_argv):
        method, params = params_of(CREATE + ["--logs"] + list(logs_argv))
        self.assertEqual(method, "bdev_hhc_create")
        return params["logs"]

    def test_logs_space_separated(self):
        self.assertEqual(self.logs("hdd0", "hdd1"), ["hdd0", "hdd1"])

    def test_logs_comma_separated(self):
        self.assertEqual(self.logs("hdd0,hdd1"), ["hdd0", "hdd1"])

    def test_logs_mixed(self):
        self.assertEqual(self.logs("hdd0,hdd1", "hdd2"), ["hdd0", "hdd1", "hdd2"])
        self.assertEqual(self.logs("hdd0", "hdd1,hdd2", "hdd3"), ["hdd0", "hdd1", "hdd2", "hdd3"])

    def test_logs_one(self):
        self.assertEqual(self.logs("hdd0"), ["hdd0"])

    def test_an_empty_name_keeps_a_slot_free_in_either_form(self):
        self.assertEqual(self.logs("hdd0,,hdd2"), ["hdd0", "", "hdd2"])
        self.assertEqual(self.logs("hdd0", "", "hdd2"), ["hdd0", "", "hdd2"])

    def test_logs_given_twice_are_joined(self):
        method, params = params_of(CREATE + ["--logs", "hdd0", "--policy", "wb", "--logs", "hdd1"])
        self.assertEqual(params["logs"], ["hdd0", "hdd1"])

    def test_options_after_the_list_still_parse(self):
        method, params = params_of(CREATE + ["--logs", "hdd0", "hdd1", "--policy", "wb", "--block-size", "8192"])
        self.assertEqual(params["logs"], ["hdd0", "hdd1"])
        self.assertEqual((params["policy"], params["block_size"]), ("wb", 8192))

    def test_no_logs_sends_none_and_an_empty_one_is_none(self):
        self.assertNotIn("logs", params_of(CREATE)[1])
        self.assertNotIn("logs", params_of(CREATE + ["--logs", ""])[1])

    def test_logs_without_a_value_is_a_usage_error(self):
        self.assertIn("--logs", usage_error(CREATE + ["--logs"]))
        self.assertIn("--logs", usage_error(CREATE + ["--logs", "--policy", "wb"]))

    def test_the_first_users_command_line(self):
        method, params = params_of(["bdev_hhc_create", "-b", "x", "--backing", "y", "--logs", "hdd0", "hdd1"])
        self.assertEqual(params, {"name": "x", "backing": "y", "logs": ["hdd0", "hdd1"]})

    def model_params(self, *params_argv):
        method, params = params_of(["bdev_hhc_model_create", "-b", "m", "--base-bdev", "base", "-m", "hdd", "-p"]
                                   + list(params_argv))
        self.assertEqual(method, "bdev_hhc_model_create")
        return params["params"]

    def test_model_params_in_every_form(self):
        expected = {"rpm": 5400.0, "capacity_gb": 0.064}
        self.assertEqual(self.model_params("rpm=5400,capacity_gb=0.064"), expected)
        self.assertEqual(self.model_params("rpm=5400", "capacity_gb=0.064"), expected)
        self.assertEqual(self.model_params("rpm=5400,capacity_gb=0.064", "link_mb_s=0"), dict(expected, link_mb_s=0.0))

    def test_malformed_model_params_are_usage_errors(self):
        base = ["bdev_hhc_model_create", "-b", "m", "--base-bdev", "base", "-m", "hdd", "-p"]
        self.assertIn("expected key=value, got 'rpm'", usage_error(base + ["rpm"]))
        self.assertIn("rpm: expected a number, got 'fast'", usage_error(base + ["capacity_gb=1", "rpm=fast"]))

    def test_the_python_functions_take_lists_and_comma_strings(self):
        client = FakeClient()
        hhc_rpc_plugin.bdev_hhc_create(client, "x", "y", logs="hdd0,hdd1")
        hhc_rpc_plugin.bdev_hhc_create(client, "x", "y", logs=["hdd0", "hdd1"])
        self.assertEqual([c[1]["logs"] for c in client.calls], [["hdd0", "hdd1"]] * 2)
        hhc_rpc_plugin.bdev_hhc_model_create(client, "m", "b", "hdd", params="rpm=5400")
        hhc_rpc_plugin.bdev_hhc_model_create(client, "m", "b", "hdd", params={"rpm": 5400.0})
        self.assertEqual([c[1]["params"] for c in client.calls[2:]], [{"rpm": 5400.0}] * 2)


class EveryCommand(unittest.TestCase):
    """Each subcommand sends its method with exactly these params and prints
    the answer as JSON."""

    CASES = [
        (CREATE + ["--logs", "hdd0", "hdd1", "--policy", "hhc", "--segment-size", "262144", "--dirty-threshold", "40",
                   "--seq-cutoff-policy", "always", "--cpumask", "0x2", "--barrier-gap", "0", "--backing-stripe", "0",
                   "--log-timeout-ms", "2500"],
         "bdev_hhc_create",
         {"name": "x", "backing": "y", "cache": "ssd", "logs": ["hdd0", "hdd1"], "policy": "hhc", "segment_size": 262144,
          "dirty_threshold": 40, "seq_cutoff_policy": "always", "cpumask": "0x2", "barrier_gap": 0, "backing_stripe": 0,
          "log_timeout_ms": 2500}),
        (CREATE + ["--logs", "peer0", "--takeover"], "bdev_hhc_create",
         {"name": "x", "backing": "y", "cache": "ssd", "logs": ["peer0"], "takeover": True}),
        (["bdev_hhc_delete", "hhc0"], "bdev_hhc_delete", {"name": "hhc0"}),
        (["bdev_hhc_forget", "-c", "ssd"], "bdev_hhc_forget", {"cache": "ssd"}),
        (["bdev_hhc_forget", "-c", "ssd", "--force"], "bdev_hhc_forget", {"cache": "ssd", "force": True}),
        (["bdev_hhc_get_bdevs"], "bdev_hhc_get_bdevs", None),
        (["bdev_hhc_get_bdevs", "-b", "hhc0"], "bdev_hhc_get_bdevs", {"name": "hhc0"}),
        (["bdev_hhc_get_stats", "-b", "hhc0"], "bdev_hhc_get_stats", {"name": "hhc0"}),
        (["bdev_hhc_reset_stats", "-b", "hhc0"], "bdev_hhc_reset_stats", {"name": "hhc0"}),
        (["bdev_hhc_set_policy", "-b", "hhc0", "-p", "wt"], "bdev_hhc_set_policy", {"name": "hhc0", "policy": "wt"}),
        (["bdev_hhc_set_options", "-b", "hhc0", "--idle-after-ms", "10", "--writeback-parallelism", "8"],
         "bdev_hhc_set_options", {"name": "hhc0", "idle_after_ms": 10, "writeback_parallelism": 8}),
        (["bdev_hhc_flush_all", "-b", "hhc0"], "bdev_hhc_flush_all", {"name": "hhc0"}),
        (["bdev_hhc_attach_log", "-b", "hhc0", "-l", "hdd2"], "bdev_hhc_attach_log", {"name": "hhc0", "log": "hdd2"}),
        (["bdev_hhc_detach_log", "-b", "hhc0", "-l", "hdd1"], "bdev_hhc_detach_log", {"name": "hhc0", "log": "hdd1"}),
        (["bdev_hhc_recover", "-b", "hhc0", "-m", "passthrough"], "bdev_hhc_recover", {"name": "hhc0", "mode": "passthrough"}),
        (["bdev_hhc_recover", "-b", "hhc0", "-m", "cache", "-c", "ssd2"], "bdev_hhc_recover",
         {"name": "hhc0", "mode": "cache", "cache": "ssd2"}),
        (["bdev_hhc_model_create", "-b", "hdd0", "--base-bdev", "hddbase", "-m", "hdd"], "bdev_hhc_model_create",
         {"name": "hdd0", "base_bdev_name": "hddbase", "model": "hdd"}),
        (["bdev_hhc_model_create", "-b", "raid0", "--base-bdev-name", "rb", "-m", "raid5", "-p", "link_mb_s=0",
          "request_latency_us=0"], "bdev_hhc_model_create",
         {"name": "raid0", "base_bdev_name": "rb", "model": "raid5", "params": {"link_mb_s": 0.0, "request_latency_us": 0.0}}),
        (["bdev_hhc_model_delete", "hdd0"], "bdev_hhc_model_delete", {"name": "hdd0"}),
        (["bdev_hhc_model_get_stats", "-b", "hdd0"], "bdev_hhc_model_get_stats", {"name": "hdd0"}),
    ]

    def test_every_command_sends_its_params(self):
        for argv, method, params in self.CASES:
            with self.subTest(argv=" ".join(argv)):
                calls, printed = run(argv)
                self.assertEqual(calls, [(method, params)])
                self.assertEqual(json.loads(printed), True)

    def test_every_subcommand_is_covered(self):
        subparsers = next(a for a in spdk_like_parser()._actions if isinstance(a, argparse._SubParsersAction))
        self.assertEqual(set(subparsers.choices), {argv[0] for argv, _, _ in self.CASES})

    def test_bad_choices_are_usage_errors(self):
        self.assertIn("invalid choice", usage_error(CREATE + ["--policy", "lru"]))
        self.assertIn("invalid choice", usage_error(["bdev_hhc_recover", "-b", "h", "-m", "nope"]))


class Package(unittest.TestCase):
    """json-rpc/pyproject.toml builds a package whose top-level module is the
    plugin (what `pip install ./json-rpc` installs)."""

    def test_pip_installs_the_module(self):
        if importlib.util.find_spec("pip") is None:
            self.skipTest("### SKIPPED: no pip for %s" % sys.executable)
        with tempfile.TemporaryDirectory() as tmp:
            # A copy: building in place leaves build/ and *.egg-info behind.
            source = os.path.join(tmp, "src")
            shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            target = os.path.join(tmp, "site")
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", target]
            if offline_build_possible():
                build = run_quietly(pip + ["--no-build-isolation", "--no-index", source])
            else:
                # As a user's `pip install ./json-rpc` does: pip fetches the
                # build backend (setuptools) from the package index.
                build = run_quietly(pip + [source])
                if build.returncode != 0 and any(sign in build.stdout for sign in INDEX_UNREACHABLE):
                    self.skipTest("### SKIPPED: no setuptools >= 61 with wheel support installed, and the package "
                                  "index did not answer:\n" + build.stdout)
            self.assertEqual(build.returncode, 0, build.stdout)
            self.assertTrue(os.path.isfile(os.path.join(target, "hhc_rpc_plugin.py")), os.listdir(target))
            # Imported from the installed copy only (not json-rpc/), as rpc.py's
            # importlib.import_module('hhc_rpc_plugin') would.
            probe = ("import importlib; m = importlib.import_module('hhc_rpc_plugin'); "
                     "assert callable(m.spdk_rpc_plugin_initialize); print(m.__file__)")
            imported = run_quietly([sys.executable, "-c", probe], cwd=tmp, env=dict(os.environ, PYTHONPATH=target))
            self.assertEqual(imported.returncode, 0, imported.stdout)
            self.assertTrue(imported.stdout.strip().startswith(target), imported.stdout)


# What pip prints when it cannot reach the package index for the build backend.
INDEX_UNREACHABLE = ["Could not find a version that satisfies the requirement setuptools",
                     "No matching distribution found for setuptools", "NewConnectionError",
                     "Temporary failure in name resolution", "Network is unreachable"]


def run_quietly(argv, **kwargs):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kwargs)


def offline_build_possible():
    """setuptools >= 61 (pyproject metadata) that can build a wheel without
    fetching anything: >= 70.1 does it alone, older ones need `wheel`.
    Asked of a fresh interpreter: importing setuptools here could meet a
    distutils that something else imported first."""
    probe = run_quietly([sys.executable, "-c", "import setuptools; print(setuptools.__version__)"])
    try:
        version = tuple(int(part) for part in probe.stdout.strip().split(".")[:2])
    except ValueError:
        return False
    if version >= (70, 1):
        return True
    return version >= (61, 0) and importlib.util.find_spec("wheel") is not None


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    skipped = len(result.skipped)
    print("%d passed, %d failed, %d skipped"
          % (result.testsRun - len(result.failures) - len(result.errors) - skipped,
             len(result.failures) + len(result.errors), skipped))
    sys.exit(0 if result.wasSuccessful() else 1)
