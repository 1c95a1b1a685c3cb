//! `memkv export --url` and `memkv import --url`: backups through a running `memkv serve`
//! (its `GET /v1/export`, `GET /v1/memory_stores/{id}/export` and `POST /v1/import`), for a
//! database the server holds or that lives elsewhere.

use std::fs::File;
use std::io::{self, Read, Write};
use std::time::Duration;

use memkv::{ExportFile, ImportSource};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::Usage;
use crate::args::{ExportArgs, ImportArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn client() -> Result<reqwest::blocking::Client> {
    Ok(reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        // A backup takes as long as it takes; a stalled connection is cut by TCP.
        .timeout(None)
        .build()?)
}

/// `URL` + `path` + the query, with one `/` between.
fn endpoint(url: &str, path: &str, query: &[(&str, String)]) -> String {
    let mut target = format!("{}{path}", url.trim_end_matches('/'));
    if !query.is_empty() {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in query {
            q.append_pair(k, v);
        }
        target.push('?');
        target.push_str(&q.finish());
    }
    target
}

/// What a path segment keeps as it is: letters, digits and `-_~`.
const KEPT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'~');

/// The percent-encoding of one path segment (everything but letters, digits and `-_~`).
fn segment(text: &str) -> String {
    utf8_percent_encode(text, KEPT).to_string()
}

/// The server's refusal, in its words.
fn refused(response: reqwest::blocking::Response) -> Box<dyn std::error::Error> {
    let status = response.status();
    let text = response.text().unwrap_or_default();
    let message = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or(text);
    format!("the server answered {status}: {message}").into()
}

pub fn export(url: &str, key: &str, args: &ExportArgs) -> Result {
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(since) = args.since {
        query.push(("since", since.to_string()));
    }
    // One store: its own route (a store key may use it); else every store, or some (admin).
    let target = match args.user.as_slice() {
        [one] => endpoint(
            url,
            &format!("/v1/memory_stores/{}/export", segment(one)),
            &query,
        ),
        users => {
            query.extend(users.iter().map(|u| ("user", u.clone())));
            endpoint(url, "/v1/export", &query)
        }
    };
    let mut response = client()?.get(&target).header("x-api-key", key).send()?;
    if !response.status().is_success() {
        return Err(refused(response));
    }
    let copied = match &args.output {
        Some(path) => {
            // Written beside the target and verified (every line, checksum and the trailer,
            // as an import would) before it replaces the target: a body cut short never does.
            let mut file = ExportFile::create(path, None)?;
            // Checked for what makes an export whole (format, every line's checksum, the
            // trailer), not against this machine's limits or secrets policy: the server's stores
            // may have other settings, and the import that restores it checks those.
            let scratch = memkv::Database::builder()
                .max_file_bytes(1 << 30)
                .max_files(u64::MAX)
                .max_bytes(u64::MAX)
                .max_lines(u64::MAX)
                .secrets(memkv::SecretPolicy::Off)
                .in_memory()?;
            let mut tee = Tee {
                from: &mut response,
                to: &mut file,
                bytes: 0,
            };
            let mut source = ImportSource::spool(&mut tee, path, scratch.limits())?;
            let n = tee.bytes;
            scratch
                .verify_import(&mut source, &[], &mut |_| {})
                .map_err(|e| format!("the export received is not whole: {e}"))?;
            file.finish()?;
            n
        }
        None => {
            let mut out = io::stdout().lock();
            let n = io::copy(&mut response, &mut out)?;
            out.flush()?;
            n
        }
    };
    note!("exported {copied} bytes from {target}");
    Ok(())
}

/// Reads `from`, writing what it reads to `to`.
struct Tee<'a> {
    from: &'a mut dyn Read,
    to: &'a mut dyn Write,
    bytes: u64,
}

impl Read for Tee<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.from.read(buf)?;
        self.to.write_all(&buf[..n])?;
        self.bytes += n as u64;
        Ok(n)
    }
}

pub fn import(url: &str, key: &str, args: &ImportArgs) -> Result {
    let Some(file) = &args.file else {
        return Err(Usage(
            "import --url sends an export file: name it (or - for standard input)".into(),
        )
        .into());
    };
    let body: Box<dyn Read + Send> = if file.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(file).map_err(|e| format!("{}: {e}", file.display()))?)
    };
    let conflict = if args.replace {
        "replace"
    } else if args.skip_existing {
        "skip"
    } else {
        "refuse"
    };
    let mut query = vec![("conflict", conflict.to_owned())];
    query.extend(args.user.iter().map(|u| ("user", u.clone())));
    let target = endpoint(url, "/v1/import", &query);
    let response = client()?
        .post(&target)
        .header("x-api-key", key)
        .header("content-type", "application/x-ndjson")
        .body(reqwest::blocking::Body::new(body))
        .send()?;
    if !response.status().is_success() {
        return Err(refused(response));
    }
    let summary: serde_json::Value = serde_json::from_str(&response.text()?)?;
    note!(
        "imported {} files ({} bytes) of {} stores, {} versions, through {target}",
        summary["files"],
        summary["bytes"],
        summary["stores"],
        summary["versions"]
    );
    Ok(())
}

/// `memkv keys list --url`: the server's `GET /v1/keys`, printed as `keys list` prints them.
pub fn keys_list(url: &str, key: &str, json: bool) -> Result {
    let target = endpoint(url, "/v1/keys", &[]);
    let response = client()?.get(&target).header("x-api-key", key).send()?;
    if !response.status().is_success() {
        return Err(refused(response));
    }
    let page: serde_json::Value = serde_json::from_str(&response.text()?)?;
    let keys = page["data"]
        .as_array()
        .ok_or("the server's answer has no list of keys")?;
    let mut out = io::stdout().lock();
    print_keys(&mut out, keys, json)?;
    out.flush()?;
    Ok(())
}

/// Keys as `GET /v1/keys` answers them: one JSON object per line, or a table.
pub(crate) fn print_keys(
    out: &mut dyn Write,
    keys: &[serde_json::Value],
    json: bool,
) -> io::Result<()> {
    if json {
        for k in keys {
            writeln!(out, "{k}")?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:<16}  {:<20}  {:<20}  {:<20}  {:<28}  LABEL",
        "ID", "CREATED", "EXPIRES", "LAST USED", "SCOPE"
    )?;
    let now = now_ms();
    let time = |v: &serde_json::Value| v.as_str().and_then(memkv::parse_rfc3339);
    for k in keys {
        let scope = match k["store"].as_str() {
            None => "admin".to_owned(),
            Some(store) => format!(
                "store {store:?}{}",
                if k["read_only"] == true {
                    " read-only"
                } else {
                    ""
                }
            ),
        };
        let expires = match time(&k["expires_at"]) {
            None => "never".to_owned(),
            Some(at) if at <= now => format!("{} (expired)", memkv::utc(at)),
            Some(at) => memkv::utc(at),
        };
        let used = time(&k["last_used_at"]).map_or_else(|| "-".to_owned(), memkv::utc);
        let created = time(&k["created_at"]).map_or_else(String::new, memkv::utc);
        writeln!(
            out,
            "{:<16}  {:<20}  {:<20}  {:<20}  {scope:<28}  {}",
            k["id"].as_str().unwrap_or(""),
            created,
            expires,
            used,
            k["label"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
