//! TLS for the connections, as libpq's URL parameters mean it (the `postgres` crate knows only
//! `sslmode=disable|prefer|require` and verifies nothing itself):
//!
//! - `disable`: no TLS. `prefer` (the default) and `require`: TLS (`require`: or no
//!   connection), the certificate not verified — unless `sslrootcert` is given, which makes it
//!   `verify-ca`, as in libpq.
//! - `verify-ca`: the certificate must chain to `sslrootcert` (a PEM file), or to the system's
//!   roots without it. `verify-full`: that, and it must name the host connected to.

use std::path::PathBuf;

use postgres_native_tls::MakeTlsConnector;

use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    ChainAndHost,
}

/// The TLS parameters of a URL that the `postgres` crate leaves to us.
#[derive(Debug)]
pub(crate) struct Tls {
    verify: Verify,
    root_cert: Option<PathBuf>,
}

/// Splits `url` into the URL for the `postgres` crate (`verify-ca` and `verify-full` become
/// `require`, `sslrootcert` is taken out) and the verification it asks for.
pub(crate) fn split(url: &str) -> (String, Tls) {
    let mut tls = Tls {
        verify: Verify::Nothing,
        root_cert: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), tls);
    };
    let mut kept = Vec::new();
    for param in query.split('&') {
        match param.split_once('=') {
            Some(("sslmode", "verify-ca")) => {
                tls.verify = Verify::Chain;
                kept.push("sslmode=require");
            }
            Some(("sslmode", "verify-full")) => {
                tls.verify = Verify::ChainAndHost;
                kept.push("sslmode=require");
            }
            Some(("sslrootcert", path)) => tls.root_cert = Some(PathBuf::from(decode(path))),
            _ => kept.push(param),
        }
    }
    if tls.root_cert.is_some() && tls.verify == Verify::Nothing {
        tls.verify = Verify::Chain;
    }
    let url = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (url, tls)
}

/// Percent-decodes a URL parameter's value (bytes that do not decode stay as they are).
fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            // Two hex digits exactly (`from_str_radix` alone would take `%+a`).
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Tls {
    /// The connector for the connections of `location` (the URL without its password).
    pub(crate) fn connector(&self, location: &str) -> Result<MakeTlsConnector, Error> {
        let mut builder = native_tls::TlsConnector::builder();
        match self.verify {
            Verify::Nothing => {
                builder.danger_accept_invalid_certs(true);
                builder.danger_accept_invalid_hostnames(true);
            }
            Verify::Chain => {
                builder.danger_accept_invalid_hostnames(true);
            }
            Verify::ChainAndHost => {}
        }
        if let Some(path) = &self.root_cert {
            let unusable = |why: String| Error::Unsupported {
                location: location.to_owned(),
                reason: format!("sslrootcert {}: {why}", path.display()),
            };
            let pem = std::fs::read(path).map_err(|e| unusable(format!("cannot read it: {e}")))?;
            let certs = native_tls::Certificate::stack_from_pem(&pem)
                .map_err(|e| unusable(format!("not PEM certificates: {e}")))?;
            if certs.is_empty() {
                return Err(unusable("holds no certificate".into()));
            }
            for cert in certs {
                builder.add_root_certificate(cert);
            }
            // Trusted: these roots, not the system's.
            builder.disable_built_in_roots(true);
        }
        let connector = builder.build().map_err(Error::storage)?;
        Ok(MakeTlsConnector::new(connector))
    }
}

#[cfg(test)]
mod tests {
    use super::{Verify, split};

    #[test]
    fn libpq_parameters_are_taken_out() {
        let (url, tls) = split("postgres://u:pw@h/db?sslmode=verify-full&sslrootcert=%2Fa%20b.pem");
        assert_eq!(url, "postgres://u:pw@h/db?sslmode=require");
        assert_eq!(tls.verify, Verify::ChainAndHost);
        assert_eq!(tls.root_cert.unwrap().to_str(), Some("/a b.pem"));
        let (url, tls) = split("postgres://h/db?options=-c%20x&sslmode=verify-ca");
        assert_eq!(url, "postgres://h/db?options=-c%20x&sslmode=require");
        assert_eq!(tls.verify, Verify::Chain);
        let (url, tls) = split("postgres://h/db?sslrootcert=r.pem");
        assert_eq!(url, "postgres://h/db");
        assert_eq!(tls.verify, Verify::Chain);
        let (url, tls) = split("postgres://h/db?sslmode=require");
        assert_eq!(url, "postgres://h/db?sslmode=require");
        assert_eq!(tls.verify, Verify::Nothing);
    }
}
