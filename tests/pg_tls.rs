//! TLS to PostgreSQL, as libpq's `sslmode` and `sslrootcert` mean it: a cluster of its own with
//! `ssl=on` and a self-signed certificate for `localhost` (made by the `openssl` command), and a
//! role that the server lets in only over TLS, with a password. Skipped, visibly, without
//! PostgreSQL.

use memkv::{Database, Error};
use serde_json::json;

#[path = "support/pg.rs"]
mod pg;

const ROLE: &str = "memkv_tls";
const PASSWORD: &str = "tls-test-sekret-pw";

/// Lets `ROLE` in with its password over TLS only (`hostssl`), never without (`hostnossl …
/// reject`), and waits until the server has reloaded that.
fn allow_only_tls(cluster: &pg::Cluster) {
    cluster.sql(&format!(
        "CREATE ROLE {ROLE} LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
    ));
    let hba = cluster.data.join("pg_hba.conf");
    let rules = format!(
        "hostnossl all {ROLE} 127.0.0.1/32 reject\nhostnossl all {ROLE} ::1/128 reject\n\
         hostssl all {ROLE} 127.0.0.1/32 scram-sha-256\nhostssl all {ROLE} ::1/128 scram-sha-256\n"
    );
    let old = std::fs::read_to_string(&hba).unwrap();
    std::fs::write(&hba, format!("{rules}{old}")).unwrap();
    cluster.sql("SELECT pg_reload_conf()");
    for _ in 0..100 {
        if open(&url(cluster, "127.0.0.1", "sslmode=disable")).is_err() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the server still lets {ROLE} in without TLS");
}

/// The URL of a fresh schema as `ROLE` with its password, on `host`, with `params`.
fn url(cluster: &pg::Cluster, host: &str, params: &str) -> String {
    let fresh = cluster.fresh_url();
    let rest = fresh
        .strip_prefix("postgres://postgres@127.0.0.1")
        .expect("fresh_url's form");
    let sep = if params.is_empty() { "" } else { "&" };
    format!("postgres://{ROLE}:{PASSWORD}@{host}{rest}{sep}{params}")
}

fn open(url: &str) -> Result<Database, Error> {
    Database::open(url)
}

/// The database at `url` works: a write, and its read from a second connection.
#[track_caller]
fn works(url: &str) {
    let store = open(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let u = store.user("u").unwrap();
    let out = u
        .execute_json(
            &json!({"command": "create", "path": "/memories/tls.md", "file_text": "over tls"}),
        )
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    drop(u);
    drop(store);
    let again = open(url).unwrap();
    assert_eq!(
        again
            .user("u")
            .unwrap()
            .read_file("/memories/tls.md")
            .unwrap()
            .as_deref(),
        Some("over tls")
    );
}

/// The database at `url` is refused with a message holding `why`, and not the password.
#[track_caller]
fn refused(url: &str, why: &str) -> String {
    let message = match open(url) {
        Ok(_) => panic!("{url}: connected"),
        Err(e) => e.to_string(),
    };
    assert!(message.contains(why), "{message:?} lacks {why:?}");
    assert!(!message.contains(PASSWORD), "{message:?}");
    assert!(message.contains(&format!("{ROLE}@")), "{message:?}");
    message
}

#[test]
fn sslmodes_encrypt_verify_and_refuse_clearly() {
    let Some(cluster) = pg::tls_cluster() else {
        return;
    };
    allow_only_tls(cluster);
    let root = cluster.tls_cert().display().to_string();
    let other = cluster.other_cert().display().to_string();

    // Without TLS the server turns the role away: what works below went over TLS.
    refused(
        &url(cluster, "127.0.0.1", "sslmode=disable"),
        "no encryption",
    );
    // `require` (and the default, `prefer`) encrypt without verifying the certificate, as
    // libpq does.
    works(&url(cluster, "127.0.0.1", "sslmode=require"));
    works(&url(cluster, "127.0.0.1", ""));
    works(&url(cluster, "localhost", "sslmode=prefer"));

    // `verify-full`: the certificate must chain to the given root (else the system's roots),
    // and name the host.
    refused(
        &url(cluster, "localhost", "sslmode=verify-full"),
        "certificate verify failed",
    );
    refused(
        &url(
            cluster,
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={other}"),
        ),
        "certificate verify failed",
    );
    works(&url(
        cluster,
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={root}"),
    ));
    // The certificate names `localhost`, not the address.
    let message = refused(
        &url(
            cluster,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={root}"),
        ),
        "certificate verify failed",
    );
    assert!(message.contains("mismatch"), "{message}");
    // `verify-ca` checks the chain only.
    works(&url(
        cluster,
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={root}"),
    ));
    refused(
        &url(
            cluster,
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={other}"),
        ),
        "certificate verify failed",
    );
    // `require` with a root certificate verifies the chain, as libpq does.
    refused(
        &url(
            cluster,
            "127.0.0.1",
            &format!("sslmode=require&sslrootcert={other}"),
        ),
        "certificate verify failed",
    );
    // An sslmode the backend does not know is refused as such.
    refused(
        &url(cluster, "localhost", "sslmode=verify-everything"),
        "invalid value for option `sslmode`",
    );
    // A root certificate that cannot be read is named.
    refused(
        &url(
            cluster,
            "localhost",
            "sslmode=verify-full&sslrootcert=/nonexistent/root.crt",
        ),
        "/nonexistent/root.crt",
    );
}
