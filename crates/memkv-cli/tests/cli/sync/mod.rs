//! `memkv sync`: real `memkv sync` processes on real folders against a real `memkv serve`, over
//! a TCP proxy the tests can cut.

mod config;
mod converge;
mod faults;
mod hostile;
mod listing;
mod model;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use memkv_sync::api::Api;

use crate::serve::proc::{Served, add_key};

/// A server, a store on it, and a proxy in front of it that the syncs talk to.
pub struct World {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    pub server: Option<Served>,
    pub proxy: Proxy,
    pub key: String,
    pub store: String,
    server_args: Vec<String>,
}

impl World {
    /// A server on a new redb file.
    pub fn new(server_args: &[&str]) -> World {
        World::on(None, server_args)
    }

    /// A server on `db` (a `postgres://` URL), or on a new redb file.
    pub fn on(db: Option<String>, server_args: &[&str]) -> World {
        // MEMKV_TEST_KEEP=1 keeps the folders, states and logs for a look after a failure.
        let dir = tempfile::Builder::new()
            .disable_cleanup(std::env::var_os("MEMKV_TEST_KEEP").is_some())
            .tempdir()
            .unwrap();
        let db = db.map_or_else(|| dir.path().join("memkv.redb"), PathBuf::from);
        let key = add_key(&db, &["--admin"]);
        let server = Served::start(&db, server_args);
        let proxy = Proxy::start(server.addr);
        let body = r#"{"name":"sync-test"}"#;
        let created = http(
            "POST",
            &format!("http://{}/v1/memory_stores", server.addr),
            &key,
            Some(body),
        );
        let store = serde_json::from_str::<serde_json::Value>(&created).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        World {
            dir,
            db,
            server: Some(server),
            proxy,
            key,
            store,
            server_args: server_args.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The URL the syncs use: the proxy's.
    pub fn url(&self) -> String {
        format!("http://{}", self.proxy.addr)
    }

    pub fn api(&self) -> Api {
        let server = self.server.as_ref().expect("the server runs");
        Api::new(
            &format!("http://{}", server.addr),
            &self.store,
            &self.key,
            Duration::from_secs(30),
        )
        .unwrap()
    }

    /// A new folder (empty) and a state folder for it.
    pub fn folder(&self, name: &str) -> (PathBuf, PathBuf) {
        let f = self.dir.path().join(name);
        std::fs::create_dir(&f).unwrap();
        (f, self.dir.path().join(format!("state-{name}")))
    }

    /// The server stopped and started again on the same file (another port; the proxy follows).
    pub fn restart_server(&mut self) {
        drop(self.server.take());
        let args: Vec<&str> = self.server_args.iter().map(String::as_str).collect();
        let server = Served::start(&self.db, &args);
        self.proxy.retarget(server.addr);
        self.server = Some(server);
    }

    /// The store's memories: path → content.
    pub fn store_files(&self) -> BTreeMap<String, String> {
        self.api()
            .list(true)
            .unwrap()
            .into_iter()
            .map(|m| (m.path, m.content.unwrap_or_default()))
            .collect()
    }

    /// Every version of the store, by memory: (memory id, path, content or None).
    pub fn versions(&self) -> Vec<(String, Option<String>, Option<String>)> {
        self.versions_of(&self.store)
    }

    /// Every version of `store`, by memory (oldest first within one).
    pub fn versions_of(&self, store: &str) -> Vec<(String, Option<String>, Option<String>)> {
        let mut out = Vec::new();
        let mut page: Option<String> = None;
        for _ in 0..10_000 {
            let mut url = format!(
                "{}/v1/memory_stores/{store}/memory_versions?view=full&limit=100",
                self.url()
            );
            if let Some(p) = &page {
                url.push_str(&format!("&page={p}"));
            }
            let v: serde_json::Value =
                serde_json::from_str(&http("GET", &url, &self.key, None)).unwrap();
            for item in v["data"].as_array().unwrap() {
                out.push((
                    item["memory_id"].as_str().unwrap().to_owned(),
                    item["path"].as_str().map(str::to_owned),
                    item["content"].as_str().map(str::to_owned),
                ));
            }
            match v["next_page"].as_str() {
                Some(p) if !p.is_empty() => page = Some(p.to_owned()),
                _ => break,
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }
}

/// A plain HTTP/1.1 request on loopback, answering the body (panics on a failure status).
pub fn http(method: &str, url: &str, key: &str, body: Option<&str>) -> String {
    let client = reqwest::blocking::Client::new();
    let mut r = client
        .request(method.parse().unwrap(), url)
        .header("x-api-key", key)
        .header("content-type", "application/json");
    if let Some(b) = body {
        r = r.body(b.to_owned());
    }
    let resp = r.send().unwrap();
    let status = resp.status();
    let text = resp.text().unwrap();
    assert!(status.is_success(), "{method} {url}: {status} {text}");
    text
}

/// Every synced file of a folder (hidden ones left out): path as the store spells it → content.
pub fn folder_files(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
                continue;
            };
            if meta.is_dir() {
                stack.push(e.path());
            } else if meta.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.insert(format!("/{rel}"), text);
                }
            }
        }
    }
    out
}

/// Waits (at most `limit`) for `cond`, looking every 50 ms; false if it never held.
pub fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `memkv sync`; killed when dropped.
pub struct SyncProc {
    child: Child,
    pub log: PathBuf,
}

impl SyncProc {
    pub fn start(
        world: &World,
        folder: &Path,
        state: &Path,
        name: &str,
        extra: &[&str],
    ) -> SyncProc {
        let log = state.with_extension("log");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_memkv"))
            .arg("sync")
            .arg(folder)
            .args([
                "--url",
                &world.url(),
                "--store",
                &world.store,
                "--name",
                name,
            ])
            .arg("--state")
            .arg(state)
            .args(extra)
            .env("MEMKV_API_KEY", &world.key)
            .env_remove("MEMKV_CONFIG")
            .env("MEMKV_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        SyncProc { child, log }
    }

    /// SIGKILL, and the exit reaped.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for SyncProc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// `memkv sync status --json` of a state folder, parsed; `null` for a sync that never reported
/// (so that a failing test's explanation shows, rather than this).
pub fn status(folder: &Path, state: &Path) -> serde_json::Value {
    if !state.join("status.json").exists() {
        return serde_json::Value::Null;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_memkv"))
        .args(["sync", "status", "--json"])
        .arg(folder)
        .arg("--state")
        .arg(state)
        .env_remove("MEMKV_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
}

/// A TCP proxy on loopback whose connections the test can cut, and whose target can move.
pub struct Proxy {
    pub addr: SocketAddr,
    /// When set, the proxy answers 404 to every change-feed request, as a server of the
    /// memory-stores API without memkv's feed does (and closes each connection after one
    /// request, to see each request's line).
    pub hide_feed: Arc<AtomicBool>,
    target: Arc<Mutex<SocketAddr>>,
    live: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Proxy {
    pub fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let target = Arc::new(Mutex::new(target));
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let hide_feed = Arc::new(AtomicBool::new(false));
        let (t, l, s, h) = (
            Arc::clone(&target),
            Arc::clone(&live),
            Arc::clone(&stop),
            Arc::clone(&hide_feed),
        );
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = conn else { continue };
                let to = *t.lock().unwrap();
                if h.load(Ordering::SeqCst) {
                    std::thread::spawn(move || without_feed(client, to));
                    continue;
                }
                let Ok(server) = TcpStream::connect(to) else {
                    continue;
                };
                {
                    let mut live = l.lock().unwrap();
                    // Connections already closed are dropped from the list.
                    live.retain(|s| s.peer_addr().is_ok());
                    live.push(client.try_clone().unwrap());
                    live.push(server.try_clone().unwrap());
                }
                pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
                pipe(server, client);
            }
        });
        Proxy {
            addr,
            hide_feed,
            target,
            live,
            stop,
            accept: Some(accept),
        }
    }

    /// Every open connection cut, mid-request or not.
    pub fn cut(&self) {
        for s in self.live.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    pub fn retarget(&self, to: SocketAddr) {
        *self.target.lock().unwrap() = to;
        self.cut();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
        self.cut();
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

/// One request of `client`: 404 for the change feed, else forwarded to `to` with
/// `connection: close`, and the answer piped back.
fn without_feed(mut client: TcpStream, to: SocketAddr) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // The request head, byte by byte up to its blank line (at most 64 KiB).
    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let line = text.lines().next().unwrap_or_default().to_owned();
    if line
        .split(' ')
        .nth(1)
        .is_some_and(|p| p.contains("/changes"))
    {
        let body = r#"{"type":"error","error":{"type":"not_found_error","message":"Not found"}}"#;
        let _ = write!(
            client,
            "HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    let Ok(mut server) = TcpStream::connect(to) else {
        return;
    };
    let mut out = format!("{line}\r\nconnection: close\r\n");
    for h in text.lines().skip(1) {
        if !h.is_empty() && !h.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(h);
            out.push_str("\r\n");
        }
    }
    out.push_str("\r\n");
    if server.write_all(out.as_bytes()).is_err() {
        return;
    }
    pipe(client.try_clone().unwrap(), server.try_clone().unwrap());
    pipe(server, client);
}

/// Copies `from` to `to` on a thread until either side ends.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
        let _ = from.shutdown(Shutdown::Read);
    });
}

/// A tiny deterministic generator (the tests' choices repeat run to run).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407))
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Writes `content` to `path` as a careful agent does: a hidden temporary file, renamed.
pub fn agent_write(path: &Path, content: &str) {
    let dir = path.parent().unwrap();
    std::fs::create_dir_all(dir).unwrap();
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let tmp = dir.join(format!(".agent-{}-{n}.tmp", std::process::id()));
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
