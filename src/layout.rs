//! How paths and records become the bytes of [`crate::storage`]: the logical layout, shared by
//! every backend and covered by the backend's format version. `docs/design.md` describes it.
//!
//! A path's *encoding* is its segments joined by `0x01` (the root is empty). Valid segments never
//! hold a byte below `0x20`, so:
//!
//! - [`Space::Nodes`](crate::storage::Space::Nodes) key of a file or directory:
//!   `enc(parent) 0x00 name`. The children of `d` are exactly the keys that start with
//!   `enc(d) 0x00`, in byte order of their names; everything below a non-root `d` is exactly the
//!   range `[enc(d) 0x00, enc(d) 0x02)`.
//! - [`Space::Contents`](crate::storage::Space::Contents) key of a file: `enc(path)`; the files
//!   below a non-root `d` are exactly the range `[enc(d) 0x01, enc(d) 0x02)`.
//! - [`Space::Access`](crate::storage::Space::Access) key of a file:
//!   `accessed_ms (u64 big-endian) enc(path)`, value: the file's size (postcard); a range scan
//!   from the start finds the files unused for longest.
//! - Values are postcard-encoded [`Node`] and [`UserTotals`]; contents are the raw UTF-8 bytes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The logical layout version: what memkv stores (the spaces, keys and records below), whatever
/// the backend. Bump it on any change here, add the step to `crate::migrate`, and say in
/// `docs/design.md` how older data is treated. Every backend records it and refuses a newer one.
/// (Versions 1 and 2 predate the PostgreSQL backend and exist only in redb files.)
pub const LAYOUT_VERSION: u64 = 9;
/// The oldest layout version this build migrates on open (see `crate::migrate`).
pub const OLDEST_MIGRATABLE: u64 = 1;

use crate::error::Error;
use crate::path::MemoryPath;

const CHILD: u8 = 0x00;
const SEP: u8 = 0x01;
const AFTER: u8 = 0x02;

/// A file or directory in the index, with what `view` needs and no content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Node {
    /// A file.
    File(FileMeta),
    /// A directory and the aggregates of everything below it.
    Dir(Totals),
}

/// A file's size, content hash, times (milliseconds since the Unix epoch) and history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileMeta {
    /// The memory's id (`crate::history::MemoryId`), since format 5.
    pub memory: u64,
    /// The version holding the current content (`crate::history::VersionId`), since format 5.
    pub version: u64,
    /// Length in bytes.
    pub size: u64,
    /// SHA-256 of the content's UTF-8 bytes (since format 4); `memkv check` verifies it.
    pub sha256: [u8; 32],
    /// When the file was created.
    pub created_ms: i64,
    /// When its content last changed.
    pub modified_ms: i64,
    /// When it was last read or written (kept for expiry; may lag behind).
    pub accessed_ms: i64,
}

impl FileMeta {
    /// The metadata of `content` with the given times: its size and SHA-256 are computed.
    pub fn new(content: &str, created_ms: i64, modified_ms: i64, accessed_ms: i64) -> Self {
        FileMeta {
            memory: 0,
            version: 0,
            size: content.len() as u64,
            sha256: sha256(content.as_bytes()),
            created_ms,
            modified_ms,
            accessed_ms,
        }
    }

    /// Times only, for [`crate::tree::Tree::write_file`], which fills in the size and hash of
    /// the content it writes, and the memory and version ids.
    pub fn times(created_ms: i64, modified_ms: i64, accessed_ms: i64) -> Self {
        FileMeta {
            memory: 0,
            version: 0,
            size: 0,
            sha256: [0; 32],
            created_ms,
            modified_ms,
            accessed_ms,
        }
    }
}

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Number of files and their total size: per directory, and per user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Files below.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
}

/// A user's totals: [`Totals`] and the time of their last write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserTotals {
    /// Files of the user.
    pub files: u64,
    /// Bytes of those files.
    pub bytes: u64,
    /// When any of the user's files was last created or changed (ms since the epoch).
    pub last_write_ms: i64,
}

/// The index key of a file last used at `accessed_ms`.
pub fn access_key(accessed_ms: i64, path: &MemoryPath) -> Vec<u8> {
    let mut out = access_prefix(accessed_ms).to_vec();
    encode_path(path, &mut out);
    out
}

/// The first 8 bytes of every access key for `accessed_ms` (times before 1970 clamp to 0).
pub fn access_prefix(accessed_ms: i64) -> [u8; 8] {
    (accessed_ms.max(0) as u64).to_be_bytes()
}

/// The access time and path of an access key.
pub fn decode_access_key(key: &[u8]) -> Result<(i64, MemoryPath), Error> {
    if key.len() < 8 {
        return Err(Error::Corrupt("an access key is too short".into()));
    }
    let (time, path) = key.split_at(8);
    let ms = u64::from_be_bytes(time.try_into().expect("8 bytes")) as i64;
    Ok((ms, path_of_content_key(path)?))
}

impl Node {
    /// What this node adds to each of its ancestors' totals.
    pub fn weight(&self) -> Totals {
        match self {
            Node::File(meta) => Totals {
                files: 1,
                bytes: meta.size,
            },
            Node::Dir(totals) => *totals,
        }
    }
}

/// Encodes a record with postcard.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serializing these plain structs into a Vec cannot fail.
    postcard::to_stdvec(value).expect("postcard encodes plain structs")
}

/// Decodes a record written by [`encode`].
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> Result<T, Error> {
    postcard::from_bytes(bytes).map_err(|e| Error::Corrupt(format!("{what}: {e}")))
}

fn encode_segments(segments: &[String], out: &mut Vec<u8>) {
    for (i, s) in segments.iter().enumerate() {
        if i > 0 {
            out.push(SEP);
        }
        out.extend_from_slice(s.as_bytes());
    }
}

fn encode_path(path: &MemoryPath, out: &mut Vec<u8>) {
    encode_segments(path.segments(), out);
}

/// The path's own encoding: the key of its content.
pub fn content_key(path: &MemoryPath) -> Vec<u8> {
    let mut out = Vec::new();
    encode_path(path, &mut out);
    out
}

/// The index key of a non-root path: `enc(parent) 0x00 name`.
pub fn node_key(path: &MemoryPath) -> Vec<u8> {
    prefix_node_key(path, path.segments().len())
}

/// The index key of the ancestor of `path` made of its first `n` segments (`1 <= n <= len`),
/// without building that ancestor's path.
pub fn prefix_node_key(path: &MemoryPath, n: usize) -> Vec<u8> {
    let segments = &path.segments()[..n];
    let (name, parent) = segments.split_last().expect("the root has no node key");
    let mut out = Vec::with_capacity(segments.iter().map(|s| s.len() + 1).sum());
    encode_segments(parent, &mut out);
    out.push(CHILD);
    out.extend_from_slice(name.as_bytes());
    out
}

/// The common prefix of the index keys of `dir`'s children.
pub fn children_prefix(dir: &MemoryPath) -> Vec<u8> {
    let mut out = content_key(dir);
    out.push(CHILD);
    out
}

/// The smallest key above every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    // Prefixes here end in 0x00 or 0x01, and no key byte is 0xFF, so a bump never carries.
    let last = end.last_mut().expect("prefixes are never empty");
    *last += 1;
    end
}

/// `[start, end)` of every index key below the non-root directory `dir`.
pub fn subtree_nodes(dir: &MemoryPath) -> (Vec<u8>, Vec<u8>) {
    let enc = content_key(dir);
    (
        [enc.as_slice(), &[CHILD]].concat(),
        [enc.as_slice(), &[AFTER]].concat(),
    )
}

/// `[start, end)` of every content key below the non-root directory `dir`.
pub fn subtree_contents(dir: &MemoryPath) -> (Vec<u8>, Vec<u8>) {
    let enc = content_key(dir);
    (
        [enc.as_slice(), &[SEP]].concat(),
        [enc.as_slice(), &[AFTER]].concat(),
    )
}

/// The name of a child, from its index key and its parent's [`children_prefix`].
pub fn child_name(key: &[u8], prefix_len: usize) -> Result<&str, Error> {
    std::str::from_utf8(&key[prefix_len..])
        .map_err(|_| Error::Corrupt("a node name is not UTF-8".into()))
}

/// The path of a content key.
pub fn path_of_content_key(key: &[u8]) -> Result<MemoryPath, Error> {
    let text = std::str::from_utf8(key)
        .map_err(|_| Error::Corrupt("a content key is not UTF-8".into()))?;
    let segments = text.split(SEP as char);
    MemoryPath::from_segments(segments)
        .map_err(|e| Error::Corrupt(format!("a stored path is invalid: {e}")))
}

/// The content key of the file whose index key is `key`: `enc(parent) 0x00 name` becomes
/// `enc(parent) 0x01 name` (or just `name` at the root).
pub fn content_key_of_node_key(key: &[u8]) -> Result<Vec<u8>, Error> {
    let at = key
        .iter()
        .position(|&b| b == CHILD)
        .ok_or_else(|| Error::Corrupt("an index key has no name".into()))?;
    let mut out = key.to_vec();
    if at == 0 {
        out.remove(0);
    } else {
        out[at] = SEP;
    }
    Ok(out)
}

/// `key` with its leading `from` replaced by `to`; a key that does not start with `from` (a
/// damaged page answered a range scan with it) is [`Error::Corrupt`].
pub fn rebase_key(key: &[u8], from: &[u8], to: &[u8]) -> Result<Vec<u8>, Error> {
    match key.strip_prefix(from) {
        Some(rest) => Ok([to, rest].concat()),
        None => Err(Error::Corrupt(
            "a key read back lies outside the range scanned".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MemoryPath {
        MemoryPath::parse(s).unwrap()
    }

    #[test]
    fn keys() {
        assert_eq!(node_key(&p("/memories/a")), b"\x00a");
        assert_eq!(node_key(&p("/memories/a/b/c")), b"a\x01b\x00c");
        assert_eq!(content_key(&p("/memories/a/b/c")), b"a\x01b\x01c");
        assert_eq!(children_prefix(&p("/memories")), b"\x00");
        assert_eq!(children_prefix(&p("/memories/a/b")), b"a\x01b\x00");
        assert_eq!(path_of_content_key(b"a\x01b").unwrap(), p("/memories/a/b"));
        assert!(path_of_content_key(b"a\x01..").is_err());
        let abc = p("/memories/a/b/c");
        assert_eq!(prefix_node_key(&abc, 1), node_key(&p("/memories/a")));
        assert_eq!(prefix_node_key(&abc, 2), node_key(&p("/memories/a/b")));
        assert_eq!(prefix_node_key(&abc, 3), node_key(&abc));
        for path in ["/memories/a", "/memories/a/b/c"] {
            let path = p(path);
            assert_eq!(
                content_key_of_node_key(&node_key(&path)).unwrap(),
                content_key(&path)
            );
        }
        let (ms, path) = decode_access_key(&access_key(1234, &p("/memories/x/y"))).unwrap();
        assert_eq!((ms, path), (1234, p("/memories/x/y")));
        assert!(access_key(1, &p("/memories/z")) < access_key(2, &p("/memories/a")));
    }

    #[test]
    fn subtree_ranges_hold_exactly_the_descendants() {
        let d = p("/memories/a");
        let (ns, ne) = subtree_nodes(&d);
        let (cs, ce) = subtree_contents(&d);
        let inside = ["/memories/a/x", "/memories/a/x/y", "/memories/a/\u{20}"];
        let outside = [
            "/memories/a",
            "/memories/ab",
            "/memories/ab/x",
            "/memories/b",
            "/memories/a b",
        ];
        for s in inside {
            let n = node_key(&p(s));
            assert!(n >= ns && n < ne, "{s}");
            let c = content_key(&p(s));
            assert!(c >= cs && c < ce, "{s}");
        }
        for s in outside {
            let n = node_key(&p(s));
            assert!(!(n >= ns && n < ne), "{s}");
            let c = content_key(&p(s));
            assert!(!(c >= cs && c < ce), "{s}");
        }
    }

    #[test]
    fn records_round_trip_and_garbage_is_corrupt() {
        let node = Node::File(FileMeta::new("abc", 1, 2, 2));
        assert_eq!(decode::<Node>(&encode(&node), "node").unwrap(), node);
        // The hash is the lowercase-hex SHA-256 of the UTF-8 bytes (FIPS 180-2 test vector).
        let Node::File(meta) = node else { panic!() };
        assert_eq!(
            hex::encode(meta.sha256),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches!(
            decode::<Node>(&[9, 9], "node"),
            Err(Error::Corrupt(_))
        ));
    }
}
