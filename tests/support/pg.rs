//! A throwaway PostgreSQL cluster for the tests of one test binary: `initdb` and `pg_ctl` on a
//! private port (loopback only) and a private socket directory under a temporary directory, as
//! the `postgres` system user when the tests run as root. Started by the first test that asks,
//! shared by the binary's tests (each gets a schema of its own), stopped when the binary exits.
//! Without PostgreSQL's binaries, [`cluster`] says so on stderr and returns `None`; tests then
//! skip their PostgreSQL half visibly.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

pub struct Cluster {
    pub dir: PathBuf,
    pub port: u16,
    pub bin: PathBuf,
    pub data: PathBuf,
    pub sockets: PathBuf,
    as_postgres: bool,
    durable: bool,
    /// `ssl=on` with [`Cluster::tls_cert`] as its certificate.
    tls: bool,
}

static CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
static TLS_CLUSTER: OnceLock<Option<Cluster>> = OnceLock::new();
static NEXT: AtomicU64 = AtomicU64::new(0);
static SKIP_NOTED: Mutex<bool> = Mutex::new(false);

/// The directory of PostgreSQL's server binaries, if installed (`MEMKV_PG_BIN` overrides).
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("MEMKV_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists() && p.join("pg_ctl").exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

/// The shared cluster, started on first use; `None` (said once on stderr) without PostgreSQL.
pub fn cluster() -> Option<&'static Cluster> {
    present(CLUSTER.get_or_init(|| start(false)).as_ref())
}

/// A cluster of its own with TLS on (`ssl=on`, a self-signed certificate for `localhost` made
/// with the `openssl` command at start, see [`Cluster::tls_cert`]); `None` as for [`cluster`].
pub fn tls_cluster() -> Option<&'static Cluster> {
    present(TLS_CLUSTER.get_or_init(|| start(true)).as_ref())
}

fn present(cluster: Option<&'static Cluster>) -> Option<&'static Cluster> {
    if cluster.is_none() && std::env::var_os("MEMKV_REQUIRE_POSTGRES").is_some() {
        panic!("MEMKV_REQUIRE_POSTGRES is set, and PostgreSQL's server binaries are missing");
    }
    if cluster.is_none() {
        let mut noted = SKIP_NOTED.lock().unwrap();
        if !*noted {
            eprintln!(
                "SKIPPED: the PostgreSQL halves of these tests: no PostgreSQL server binaries \
                 (apt-get install postgresql, or set MEMKV_PG_BIN), or MEMKV_SKIP_POSTGRES is set"
            );
            *noted = true;
        }
    }
    cluster
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Cluster {
    fn run(&self, program: &str, args: &[&str]) -> std::process::Output {
        let exe = self.bin.join(program);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        cmd.args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"))
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=300 -c shared_buffers=64MB {}",
            self.port,
            self.sockets.display(),
            // Tests need PostgreSQL's semantics, not its durability: no flushes (benchmarks
            // run their own cluster with the defaults).
            if self.durable {
                ""
            } else {
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            }
        );
        let opts = if self.tls {
            format!(
                "{opts} -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                self.tls_cert().display(),
                self.dir.join("server.key").display()
            )
        } else {
            opts
        };
        let log = self.dir.join("server.log");
        let out = self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-o",
                &opts,
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start: {}{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// `pg_ctl stop -m fast`.
    pub fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// `pg_ctl restart` (fast): every connection is dropped.
    pub fn restart(&self) {
        self.stop();
        self.start();
    }

    /// The URL of the `postgres` database, as the superuser, over loopback TCP.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A fresh, empty schema: the URL of a database that no other test sees.
    pub fn fresh_url(&self) -> String {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let schema = format!("t{}_{n}", std::process::id());
        let mut client = postgres::Client::connect(&self.admin_url(), postgres::NoTls)
            .expect("connect to the test cluster");
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .unwrap();
        format!(
            "postgres://postgres@127.0.0.1:{}/postgres?options=-csearch_path%3D{schema}",
            self.port
        )
    }

    /// The server's certificate (PEM), self-signed, for the name `localhost` only (not for the
    /// address 127.0.0.1): the root certificate to trust for a TLS cluster.
    pub fn tls_cert(&self) -> PathBuf {
        self.dir.join("server.crt")
    }

    /// Another self-signed certificate for `localhost`, which did not sign the server's.
    pub fn other_cert(&self) -> PathBuf {
        self.dir.join("other.crt")
    }

    /// Runs SQL as the superuser.
    pub fn sql(&self, query: &str) {
        let mut client = postgres::Client::connect(&self.admin_url(), postgres::NoTls).unwrap();
        client.batch_execute(query).unwrap();
    }

    /// The rows of `query` (a superuser's), as the server's text of each column.
    pub fn rows(&self, query: &str) -> Vec<Vec<String>> {
        let mut client = postgres::Client::connect(&self.admin_url(), postgres::NoTls).unwrap();
        client
            .simple_query(query)
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).unwrap_or("").to_owned())
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A self-signed certificate for `localhost` and its key, made by the `openssl` command.
fn self_signed(cert: &Path, key: &Path) {
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .stdin(Stdio::null())
        .output()
        .expect("the openssl command (to make the test cluster's certificate)");
    assert!(
        out.status.success(),
        "openssl req: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn start(tls: bool) -> Option<Cluster> {
    if std::env::var_os("MEMKV_SKIP_POSTGRES").is_some() {
        return None;
    }
    let bin = bin_dir()?;
    let as_postgres = is_root();
    let dir = std::env::temp_dir().join(format!("memkv-pg-{}-{}", std::process::id(), free_port()));
    let data = dir.join("data");
    let sockets = dir.join("sockets");
    std::fs::create_dir_all(&sockets).unwrap();
    if tls {
        self_signed(&dir.join("server.crt"), &dir.join("server.key"));
        self_signed(&dir.join("other.crt"), &dir.join("other.key"));
        // The server refuses a key that others may read.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("server.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    if as_postgres {
        let status = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "chown the cluster directory");
    }
    let cluster = Cluster {
        dir: dir.clone(),
        port: free_port(),
        bin,
        data: data.clone(),
        sockets,
        as_postgres,
        durable: std::env::var_os("MEMKV_PG_DURABLE").is_some(),
        tls,
    };
    let out = cluster.run(
        "initdb",
        &[
            "-D",
            data.to_str().unwrap(),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ],
    );
    assert!(
        out.status.success(),
        "initdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.start();
    watch(&cluster);
    Some(cluster)
}

/// Stops the cluster once this process is gone, however it ends. The watchdog outlives this
/// process on purpose (init reaps it), so it is never waited for.
#[allow(clippy::zombie_processes)]
fn watch(cluster: &Cluster) {
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; \
         {run}{pg_ctl} -D {data} -m immediate stop >/dev/null 2>&1; rm -rf {dir}",
        pid = std::process::id(),
        run = if cluster.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        },
        pg_ctl = cluster.bin.join("pg_ctl").display(),
        data = cluster.data.display(),
        dir = cluster.dir.display(),
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the cluster's watchdog");
}

/// Where a redb file for a test goes, or a fresh PostgreSQL URL: the store location of `kind`.
pub fn path_str(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}
