"""The fleet of tests/fleet, as processes on loopback: a throwaway PostgreSQL cluster, `memkv serve`
processes on it, and HAProxy in front of them; and the load, client threads of the memkv Python
package writing through the balancer, every request's outcome recorded.

Every process here is a child of the test process, stopped by its owner's `stop` (the fixtures
call them, however a test ends) and, should the test process itself die, killed by the kernel
(PR_SET_PDEATHSIG). Every wait polls for its condition until a deadline.
"""

from __future__ import annotations

import csv
import ctypes
import io
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("MEMKV_BIN") or str(ROOT / "target" / "debug" / "memkv")
HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "haproxy.cfg.template"
LOOPBACK = "127.0.0.1"
# The longest any single process operation (a CLI run, a start, a stop) may take.
TIMEOUT = 30

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """preexec_fn: the child gets SIGKILL when the test process dies, however it dies (it runs
    after the user change of `subprocess`, which would clear it)."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")


def free_port() -> int:
    """A port free on the loopback address now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float, what: str, interval: float = 0.01):
    """Polls `condition()` until it returns something true (returned), at most `timeout` seconds;
    an AssertionError naming `what` then."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)


def child_env() -> dict[str, str]:
    """The environment of the processes started here: the test's, without any MEMKV_ variable
    (memkv reads its options from them) and without proxies."""
    drop = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    return {k: v for k, v in os.environ.items() if not k.startswith("MEMKV_") and k.lower() not in drop}


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as e:
        return f"({path}: {e})"


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = TIMEOUT) -> int:
    """`sig`, then up to `timeout` seconds for the exit, then SIGKILL: the exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(TIMEOUT)
    return proc.returncode


def run_memkv(db: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`memkv --db DB ARGS`, which must succeed: its completed process (text output)."""
    out = subprocess.run(
        [BIN, "--db", db, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=child_env(),
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, f"memkv {' '.join(args)}: exit {out.returncode}\n{out.stdout}\n{out.stderr}"
    return out


# --- PostgreSQL ---------------------------------------------------------------------------------


def pg_bin_dir() -> Path | None:
    """PostgreSQL's server binaries (the newest under /usr/lib/postgresql, or $MEMKV_PG_BIN), as
    tests/support/pg.rs finds them."""
    if os.environ.get("MEMKV_PG_BIN"):
        return Path(os.environ["MEMKV_PG_BIN"])
    found = []
    for version in Path("/usr/lib/postgresql").glob("*"):
        bin_dir = version / "bin"
        if (bin_dir / "initdb").exists() and (bin_dir / "postgres").exists() and version.name.isdigit():
            found.append((int(version.name), bin_dir))
    return max(found)[1] if found else None


class Postgres:
    """A throwaway cluster, as tests/support/pg.rs makes one: initdb (as the `postgres` system
    user when the tests run as root: initdb refuses root) in a temporary directory, trust
    authentication, listening on 127.0.0.1 only on a free port with its socket in that directory,
    no fsync. The postmaster runs in the foreground as this process's child."""

    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.as_postgres = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="memkv-fleet-pg-"))
        self.data = self.dir / "data"
        self.sockets = self.dir / "sockets"
        self.sockets.mkdir()
        self.log = self.dir / "postgres.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
            shutil.chown(self.sockets, "postgres", "postgres")
        self.url = f"postgres://postgres@{LOOPBACK}:{self.port}/postgres"

    def _user(self) -> dict:
        return {"user": "postgres", "group": "postgres", "extra_groups": []} if self.as_postgres else {}

    def start(self):
        init = subprocess.run(
            [self.bin / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            cwd=self.dir,
            **self._user(),
        )
        assert init.returncode == 0, f"initdb: {init.stdout}{init.stderr}"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    self.bin / "postgres",
                    "-D", self.data,
                    "-p", str(self.port),
                    "-k", self.sockets,
                    "-c", f"listen_addresses={LOOPBACK}",
                    "-c", "max_connections=300",
                    "-c", "shared_buffers=64MB",
                    # The fleet needs PostgreSQL's semantics, not its durability.
                    "-c", "fsync=off",
                    "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.dir,
                preexec_fn=_die_with_parent,
                **self._user(),
            )

        def ready():
            assert self.proc.poll() is None, f"postgres exited ({self.proc.returncode}):\n{tail(self.log)}"
            probe = subprocess.run(
                [self.bin / "pg_isready", "-q", "-h", LOOPBACK, "-p", str(self.port), "-U", "postgres"],
                timeout=TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
            return probe.returncode == 0

        wait_until(ready, 60, f"postgres accepting connections on {LOOPBACK}:{self.port}", interval=0.05)

    def stop(self):
        """Fast shutdown (SIGINT), then the directory is removed."""
        try:
            if self.proc is not None:
                stop_process(self.proc, signal.SIGINT)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


# --- memkv serve --------------------------------------------------------------------------------


class Server:
    """`memkv serve` on a fixed loopback port (a restart gets the same one), its log (stderr and
    stdout, across restarts) in `log`."""

    def __init__(self, name: str, db: str, port: int, log: Path):
        self.name = name
        self.db = db
        self.port = port
        self.log = log
        self.url = f"http://{LOOPBACK}:{port}"
        self.proc: subprocess.Popen | None = None
        self.http = httpx2.Client(base_url=self.url, timeout=10, trust_env=False)

    def start(self):
        assert not self.running(), f"{self.name} is already running"
        with open(self.log, "ab") as log:
            log.write(f"=== {self.name}: start at {time.time():.3f}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                # --drain-delay: after SIGTERM, /readyz says 503 while the server goes on serving
                # for longer than HAProxy takes to mark it down (2 x 250 ms), as deployed.
                [BIN, "--db", self.db, "serve", "--listen", f"{LOOPBACK}:{self.port}",
                 "--shutdown-grace", "20s", "--drain-delay", "1s"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=child_env(),
                preexec_fn=_die_with_parent,
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ready(self) -> bool:
        """GET /readyz answers 200 (the process must be alive)."""
        assert self.running(), f"{self.name} exited ({self.proc.returncode if self.proc else None}):\n{tail(self.log)}"
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx2.TransportError:
            return False

    def wait_ready(self, timeout: float = TIMEOUT):
        wait_until(self.ready, timeout, f"{self.name} ({self.url}) answering /readyz 200")

    def terminate(self):
        """SIGTERM: the graceful shutdown."""
        self.proc.send_signal(signal.SIGTERM)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(TIMEOUT)

    def wait_exit(self, timeout: float = 40) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM:\n{tail(self.log)}") from None

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
        self.http.close()


# --- HAProxy ------------------------------------------------------------------------------------


def haproxy_version() -> str:
    out = subprocess.run(["haproxy", "-v"], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    return out.stdout.splitlines()[0].strip() if out.stdout else "?"


def render_template(**ports: int) -> str:
    """haproxy.cfg.template with its @NAME@ placeholders filled in; every one must be given."""
    text = TEMPLATE.read_text()
    for name, port in ports.items():
        placeholder = f"@{name.upper()}@"
        assert placeholder in text, f"no {placeholder} in {TEMPLATE}"
        text = text.replace(placeholder, str(port))
    left = re.findall(r"@[A-Z0-9_]+@", text)
    assert not left, f"placeholders left unfilled in {TEMPLATE}: {left}"
    return text


class HAProxy:
    """HAProxy in the foreground (`haproxy -f CFG -db`), its configuration rendered from
    haproxy.cfg.template and checked (`haproxy -c`, no warning) first; its log (a line per
    request) in `log`."""

    BACKEND = "memkv"

    def __init__(self, workdir: Path, servers: list[Server]):
        self.port = free_port()
        self.stats_port = free_port()
        ports = {f"memkv{i + 1}_port": s.port for i, s in enumerate(servers)}
        assert [s.name for s in servers] == [f"memkv{i + 1}" for i in range(len(servers))]
        self.config = workdir / "haproxy.cfg"
        self.config.write_text(render_template(frontend_port=self.port, stats_port=self.stats_port, **ports))
        self.log = workdir / "haproxy.log"
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.http = httpx2.Client(timeout=5, trust_env=False)

    def check_config(self):
        out = subprocess.run(
            ["haproxy", "-c", "-f", str(self.config)], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
        )
        said = out.stdout + out.stderr
        assert out.returncode == 0, f"haproxy -c: exit {out.returncode}\n{said}"
        assert "WARNING" not in said and "ALERT" not in said, f"haproxy -c warns:\n{said}"

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                ["haproxy", "-f", str(self.config), "-db"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=child_env(),
                preexec_fn=_die_with_parent,
            )

    def states(self) -> dict[str, str]:
        """Each server of the backend and its status as HAProxy sees it (`UP`, `DOWN`, `UP 1/2`
        going down, `DOWN 1/2` going up, ...), from GET /stats;csv."""
        assert self.proc.poll() is None, f"haproxy exited ({self.proc.returncode}):\n{tail(self.log)}"
        try:
            text = self.http.get(f"http://{LOOPBACK}:{self.stats_port}/stats;csv").text
        except httpx2.TransportError:
            return {}
        rows = csv.DictReader(io.StringIO(text.removeprefix("# ")))
        return {r["svname"]: r["status"] for r in rows if r["pxname"] == self.BACKEND and r["svname"] not in ("FRONTEND", "BACKEND")}

    def wait_state(self, server: str, up: bool, timeout: float = 10) -> float:
        """Waits until HAProxy has `server` up (`UP`, every check passed) or down (`DOWN...`):
        the monotonic time it saw it so."""

        def seen():
            state = self.states().get(server, "")
            return (state == "UP") if up else state.startswith("DOWN")

        wait_until(seen, timeout, f"HAProxy seeing {server} {'UP' if up else 'DOWN'} (states: {self.states()})")
        return time.monotonic()

    def log_offset(self) -> int:
        return self.log.stat().st_size

    def retried_since(self, offset: int) -> dict[str, int]:
        """From the request lines logged since `offset`: how many requests HAProxy sent again
        (`retried`), and how many of those to another server (`redispatched`)."""
        with open(self.log, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
        retried = redispatched = requests = 0
        # httplog: ... %ac/%fc/%bc/%sc/%rc %sq/%bq ...; %rc is "+N" when redispatched.
        for m in re.finditer(r" \d+/\d+/\d+/\d+/(\+?)(\d+) \d+/\d+ ", text):
            requests += 1
            if int(m.group(2)) > 0:
                retried += 1
                redispatched += m.group(1) == "+"
        return {"requests": requests, "retried": retried, "redispatched": redispatched}

    def stop(self):
        if self.proc is not None:
            stop_process(self.proc)
        self.http.close()


# --- the fleet ----------------------------------------------------------------------------------


class Fleet:
    """One PostgreSQL, `n` memkv servers on it, HAProxy in front; an admin key (`admin_key`)."""

    def __init__(self, workdir: Path, pg: Postgres, n: int = 3):
        self.workdir = workdir
        self.pg = pg
        self.db = pg.url
        self.servers = [Server(f"memkv{i + 1}", self.db, free_port(), workdir / f"memkv{i + 1}.log") for i in range(n)]
        self.haproxy = HAProxy(workdir, self.servers)
        self.admin_key = ""

    @property
    def url(self) -> str:
        """The balancer's address."""
        return self.haproxy.url

    def start(self):
        out = run_memkv(self.db, "keys", "add", "--admin", "--label", "fleet test")
        self.admin_key = out.stdout.strip().splitlines()[-1]
        assert self.admin_key.startswith("mkv_"), out.stdout
        for s in self.servers:
            s.start()
        for s in self.servers:
            s.wait_ready()
        self.haproxy.check_config()
        self.haproxy.start()
        self.ensure_all_up()

    def ensure_all_up(self):
        """Every server running and ready (one that died is started again), HAProxy seeing every
        one up."""
        for s in self.servers:
            if not s.running():
                s.start()
        for s in self.servers:
            s.wait_ready()
        for s in self.servers:
            self.haproxy.wait_state(s.name, up=True)

    def stop(self):
        """HAProxy, the servers, PostgreSQL: each stopped whatever happened to the others."""
        errors = []
        for stop in [self.haproxy.stop, *(s.stop for s in self.servers), self.pg.stop]:
            try:
                stop()
            except Exception as e:  # noqa: BLE001 - every process gets its stop
                errors.append(e)
        if errors:
            raise errors[0]

    def admin_headers(self) -> dict[str, str]:
        return {"x-api-key": self.admin_key}

    def export(self, users: list[str]) -> dict[tuple[str, str], str]:
        """`memkv export --user ...` of the database (the CLI, straight from PostgreSQL): each
        (user, path) and its content."""
        args = ["export"]
        for u in users:
            args += ["--user", u]
        return files_of(run_memkv(self.db, *args).stdout)

    def check(self) -> str:
        """`memkv check`, which must say that every invariant holds: its output."""
        out = run_memkv(self.db, "check", timeout=120)
        assert "ok: every invariant holds" in out.stdout, out.stdout + out.stderr
        return out.stdout


def files_of(export: str) -> dict[tuple[str, str], str]:
    """The files of an export (memkv's JSON Lines format): (user, path) -> content. The first line
    must be its header."""
    lines = [json.loads(line) for line in export.splitlines() if line.strip()]
    assert lines and lines[0].get("type") == "header" and lines[0].get("format") == "memkv-export", export[:300]
    return {(r["user"], r["path"]): r["content"] for r in lines if r.get("type") == "file"}


# --- the load -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One request of the load: when it was sent and answered (time.monotonic()), what it wrote,
    and what came back: `ok` (is_error false), `tool_error` (is_error true: `detail` is memkv's
    content), `http` (a status other than 200: `status`), `transport` (no complete answer) or
    `exception` (anything else)."""

    client: int
    store: str
    path: str
    text: str
    sent: float
    answered: float
    kind: str
    status: int | None = None
    detail: str = ""


class Load:
    """`clients` threads, each with MemkvMemoryTools of its own (the memkv package, one connection
    pool each) on the balancer, each creating files on distinct paths of stores of its own
    (`{name}-{i}-{k}`, a new store every `per_store` files, far below the default quota of 10,000)
    as fast as it is answered, until `stop` (or `max_seconds`, or `max_requests` each). The tools
    do not retry (max_retries=0): every request's outcome is what the balancer answered."""

    def __init__(self, url: str, key: str, name: str, clients: int = 4, max_seconds: float = 60, max_requests: int = 50_000):
        self.url = url
        self.key = key
        self.name = name
        self.per_store = 2_000
        self.max_seconds = max_seconds
        self.max_requests = max_requests
        self.outcomes: list[list[Outcome]] = [[] for _ in range(clients)]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"load-{name}-{i}", daemon=True) for i in range(clients)]
        self.started = 0.0

    @property
    def stores(self) -> list[str]:
        """The stores written so far."""
        return sorted({o.store for o in self.all()})

    def _run(self, i: int):
        # Imported here: the package is what tools/test-fleet.sh installed into the venv.
        from anthropic.tools import ToolError
        from memkv import MemkvError, MemkvMemoryTool

        out = self.outcomes[i]
        deadline = time.monotonic() + self.max_seconds
        tool = None
        try:
            for n in range(self.max_requests):
                if self._stop.is_set() or time.monotonic() > deadline:
                    break
                if n % self.per_store == 0:
                    if tool is not None:
                        tool.close()
                    store = f"{self.name}-{i}-{n // self.per_store}"
                    tool = MemkvMemoryTool(store, base_url=self.url, api_key=self.key, timeout=10, max_retries=0)
                path = f"/memories/load/{n:06d}.md"
                text = f"{store} file {n}\n"
                sent = time.monotonic()
                kind, status, detail = "ok", None, ""
                try:
                    tool.call({"command": "create", "path": path, "file_text": text})
                except ToolError as e:
                    kind, detail = "tool_error", str(e.content)
                except MemkvError as e:
                    kind, status, detail = ("http" if e.status is not None else "transport"), e.status, str(e)
                except Exception as e:  # noqa: BLE001 - recorded, and fails the test
                    kind, detail = "exception", repr(e)
                out.append(Outcome(i, store, path, text, sent, time.monotonic(), kind, status, detail))
        except Exception as e:  # noqa: BLE001 - recorded, and fails the test
            now = time.monotonic()
            out.append(Outcome(i, "", "", "", now, now, "exception", None, repr(e)))
        finally:
            if tool is not None:
                tool.close()

    def __enter__(self) -> "Load":
        self.started = time.monotonic()
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(TIMEOUT)
        alive = [t.name for t in self._threads if t.is_alive()]
        assert not alive, f"load threads still running {TIMEOUT} s after stop: {alive}"

    def all(self) -> list[Outcome]:
        return [o for per_client in self.outcomes for o in list(per_client)]

    def successes_after(self, t: float) -> list[int]:
        """Each client's number of writes acknowledged after `t`."""
        return [sum(1 for o in list(per_client) if o.kind == "ok" and o.answered > t) for per_client in self.outcomes]

    def wait_successes(self, n: int, after: float, timeout: float = 20):
        """Waits until every client has had `n` writes acknowledged after `after`."""
        wait_until(
            lambda: min(self.successes_after(after)) >= n,
            timeout,
            f"every load client having {n} writes acknowledged (now {self.successes_after(after)}; "
            f"last outcomes {[o[-1] if o else None for o in self.outcomes]})",
        )

    def wait_for(self, seconds: float):
        """Lets the load run `seconds` more (a measurement window), failing early if a client has
        stopped."""
        end = time.monotonic() + seconds

        def over():
            assert all(t.is_alive() for t in self._threads), "a load client stopped early"
            return time.monotonic() >= end

        wait_until(over, seconds + TIMEOUT, "the measurement window")


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) of `values`, nearest rank."""
    ordered = sorted(values)
    assert ordered, "no values"
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]
