"""Fixtures of the fleet test: one PostgreSQL cluster, three `memkv serve` on it and HAProxy in
front, all on 127.0.0.1, started once for the session and stopped at its end however it ends;
the figures the tests measure, printed at the end and written as JSON to $MEMKV_FLEET_REPORT."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

import fleetlib

# What the tests measured, by name: printed at the end of the session, and written as JSON to
# $MEMKV_FLEET_REPORT when it is set (whatever passed or failed).
FIGURES: dict = {}


@pytest.fixture(scope="session")
def figures():
    return FIGURES


@pytest.fixture(scope="session")
def fleet(request):
    """The fleet. Its logs (each server's, HAProxy's with a line per request, PostgreSQL's) are
    kept in a directory named at the end when a test failed, removed otherwise."""
    assert Path(fleetlib.BIN).is_file(), f"no memkv binary at {fleetlib.BIN} (set MEMKV_BIN)"
    assert shutil.which("haproxy"), "no haproxy: tools/install-postgres.sh installs it (apt-get install haproxy)"
    pg_bin = fleetlib.pg_bin_dir()
    assert pg_bin, "no PostgreSQL server binaries: tools/install-postgres.sh installs them (or set MEMKV_PG_BIN)"
    FIGURES["haproxy_version"] = fleetlib.haproxy_version()
    workdir = Path(tempfile.mkdtemp(prefix="memkv-fleet-"))
    pg = fleetlib.Postgres(pg_bin)
    fleet = fleetlib.Fleet(workdir, pg)
    try:
        pg.start()
        fleet.start()
        yield fleet
    finally:
        try:
            if request.session.testsfailed:
                # PostgreSQL's log goes with the rest; its data directory does not.
                shutil.copy(pg.log, workdir / "postgres.log")
        finally:
            fleet.stop()
        if request.session.testsfailed:
            print(f"\nthe fleet's logs: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(autouse=True)
def whole_fleet(fleet):
    """Every test starts with the three servers up (one a test killed is started again)."""
    fleet.ensure_all_up()
    return fleet


def pytest_terminal_summary(terminalreporter):
    if not FIGURES:
        return
    terminalreporter.section("fleet figures")
    for line in json.dumps(FIGURES, indent=2, sort_keys=True).splitlines():
        terminalreporter.write_line(line)
    report = os.environ.get("MEMKV_FLEET_REPORT")
    if report:
        Path(report).write_text(json.dumps(FIGURES, indent=2, sort_keys=True) + "\n")
        terminalreporter.write_line(f"(written to {report})")
