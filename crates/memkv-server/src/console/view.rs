//! The console's page frame and the small pieces every page shows (sizes, times, authors,
//! links). Everything a store holds (paths, names, contents, labels) reaches the page through
//! maud's escaping: as text, never as markup.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use memkv::Actor;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Who is signed in, as the frame shows it.
pub struct Viewer<'a> {
    /// The key's id (`key_…`), or `None` under `--no-auth`.
    pub key_id: Option<&'a str>,
    /// What the key opens, in words.
    pub scope: String,
    /// Whether the admin pages are offered.
    pub admin: bool,
    /// The sign-out form's CSRF token.
    pub csrf: &'a str,
}

/// A whole page: `title` (also the `h1`), the navigation for `viewer` (none before sign-in),
/// and `body`.
pub fn page(title: &str, viewer: Option<&Viewer<'_>>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · memkv console" }
                link rel="stylesheet" href=(super::STYLE_PATH);
                link rel="icon" href=(super::ICON_PATH) type="image/svg+xml";
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/console" { "memkv console" }
                    @if let Some(v) = viewer {
                        nav aria-label="Console" {
                            ul {
                                li { a href="/console/stores" { "Stores" } }
                                @if v.admin {
                                    li { a href="/console/keys" { "API keys" } }
                                }
                            }
                        }
                        div.who {
                            span { "Signed in: " (v.key_id.unwrap_or("no key (--no-auth)")) " · " (v.scope) }
                            form method="post" action="/console/logout" {
                                input type="hidden" name="csrf" value=(v.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main #main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A size in bytes, in words (`1.2 KiB`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A time (ms since the epoch) as `2026-12-04 19:28:42 UTC`, in a `time` element.
pub fn time(ms: i64) -> Markup {
    let full = memkv::rfc3339_ms(ms);
    let shown = full
        .get(..19)
        .map_or_else(|| full.clone(), |s| format!("{} UTC", s.replace('T', " ")));
    html! { time datetime=(full) { (shown) } }
}

/// Who made a change, in words.
pub fn actor(actor: Option<&Actor>) -> String {
    match actor {
        None => "—".to_owned(),
        Some(Actor::ApiKey(id)) => format!("API key {id}"),
        Some(Actor::Session(id)) => format!("session {id}"),
        Some(Actor::User(name)) => format!("operator {name}"),
    }
}

/// A value for a URL's query string, percent-encoded.
pub fn query_value(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// What a path segment keeps as it is: the unreserved characters (RFC 3986).
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A path segment of a console URL (store ids are letters, digits and `_-.`, but encoded all
/// the same).
pub fn segment(text: &str) -> String {
    utf8_percent_encode(text, UNRESERVED).to_string()
}

/// The page of store `store`.
pub fn store_url(store: &str) -> String {
    format!("/console/stores/{}", segment(store))
}

/// The page of a directory of store `store` (`dir`: `/memories/…`).
pub fn dir_url(store: &str, dir: &str) -> String {
    format!("{}?dir={}", store_url(store), query_value(dir))
}

/// The page of memory `memory` of store `store`.
pub fn memory_url(store: &str, memory: &str) -> String {
    format!("{}/memories/{}", store_url(store), segment(memory))
}

/// A notice at the top of a page (after an action).
pub fn notice(text: &str) -> Markup {
    html! { p.notice role="status" { (text) } }
}

/// Nothing: for optional parts of a page.
pub fn nothing() -> Markup {
    PreEscaped(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_everywhere() {
        let evil = "<script>alert(1)</script>\"'&";
        let markup = page(
            evil,
            Some(&Viewer {
                key_id: Some(evil),
                scope: evil.into(),
                admin: true,
                csrf: evil,
            }),
            html! { p { (evil) } a href=(dir_url(evil, evil)) { "x" } },
        )
        .into_string();
        assert!(!markup.contains("<script>"), "{markup}");
        assert!(markup.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;'&amp;"));
    }

    #[test]
    fn sizes_and_urls() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(5 * 1024 * 1024), "5.0 MiB");
        assert_eq!(segment("a b/é"), "a%20b%2F%C3%A9");
        assert_eq!(
            dir_url("s", "/memories/a b"),
            "/console/stores/s?dir=%2Fmemories%2Fa+b"
        );
        assert_eq!(
            time(0).into_string(),
            "<time datetime=\"1970-01-01T00:00:00.000Z\">1970-01-01 00:00:00 UTC</time>"
        );
    }
}
