//! The SQL memkv sends. Statements travel in PostgreSQL's simple-query protocol, several to a
//! round trip (that is how a write costs two); every value in them is a hex `bytea` literal
//! (`'\x…'`) or a number, so no input, however spelled, can change a statement. The usual
//! write, one whose reads were all assumed, is instead one call of
//! [`super::write_fn::write_function`] with binary parameters.

use std::fmt::Write as _;

use postgres::SimpleQueryMessage;

use super::super::{Fetch, Space};
use crate::error::Error;

/// The table of every entry: the redb key space, one row per `(store, space, key)`.
pub(crate) const ENTRIES: &str = "memkv_entries";

/// The DDL of schema version [`super::SCHEMA_VERSION`] (also in `docs/postgres.md`).
pub(crate) const SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS memkv_meta (
    name  text   PRIMARY KEY,
    value bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS memkv_stores (
    store bytea PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS memkv_entries (
    store bytea    NOT NULL,
    space smallint NOT NULL,
    key   bytea    NOT NULL,
    value bytea    NOT NULL,
    PRIMARY KEY (store, space, key)
);";

/// The change log's table (since layout 7): made with [`SCHEMA`], and on a writable open of a
/// database made before it.
pub(crate) const CHANGES_SCHEMA: &str = "\
CREATE TABLE IF NOT EXISTS memkv_changes (
    seq   bigint PRIMARY KEY,
    value bytea  NOT NULL
);
CREATE TABLE IF NOT EXISTS memkv_changes_pending (
    id    bigserial PRIMARY KEY,
    value bytea     NOT NULL
);
INSERT INTO memkv_meta VALUES ('changes_last', 0), ('changes_trimmed', 0) ON CONFLICT DO NOTHING;";

/// Queues change-log entries for numbering (`memkv_changes_pending`, in the order of its
/// `id`): a writer takes no lock for them, so concurrent commits still share a WAL flush.
/// [`SETTLE`] numbers them once committed (`docs/postgres.md`).
pub(crate) fn log_append(out: &mut String, entries: &[Vec<u8>]) {
    if entries.is_empty() {
        return;
    }
    out.push_str("INSERT INTO memkv_changes_pending (value) SELECT t.e FROM unnest(ARRAY[");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        bytea(out, e);
    }
    out.push_str("]) WITH ORDINALITY AS t(e, o) ORDER BY t.o;\n");
}

/// Numbers the committed entries of `memkv_changes_pending`, in `id` order, after the last
/// number given, and moves them into `memkv_changes`: under the row lock of `changes_last`, so
/// numbering transactions follow each other and a reader that sees a number sees every lower
/// one. The move's snapshot is taken once the lock is held (each statement of a `DO` block takes
/// its own, in READ COMMITTED), so it sees every commit before it. With nothing queued it takes
/// no lock and writes nothing: a reader's transaction then commits without a WAL flush, and
/// readers do not wait for each other (twelve long polls woken at once each waited for the one
/// before's flush: the last answered 2 s after the commit, now all within 0.25 s). Nothing queued in the check's snapshot means
/// every entry committed before it is numbered and its numbering committed (a numbering's move
/// and its delete from the queue commit together).
pub(crate) const SETTLE: &str = "DO $settle$ BEGIN
IF EXISTS (SELECT 1 FROM memkv_changes_pending) THEN
PERFORM 1 FROM memkv_meta WHERE name = 'changes_last' FOR UPDATE;
WITH moved AS (DELETE FROM memkv_changes_pending RETURNING id, value), \
numbered AS (INSERT INTO memkv_changes (seq, value) \
SELECT (SELECT value FROM memkv_meta WHERE name = 'changes_last') \
+ row_number() OVER (ORDER BY id), value FROM moved RETURNING seq) \
UPDATE memkv_meta SET value = value + (SELECT count(*) FROM numbered) \
WHERE name = 'changes_last';
END IF;
END $settle$;\n";

/// Holds the numbering for the rest of the transaction (`WriteTxn::log_hold`): the row lock
/// [`SETTLE`] takes when something is queued, taken whatever is queued.
pub(crate) const HOLD: &str = "SELECT 1 FROM memkv_meta WHERE name = 'changes_last' FOR UPDATE;\n";

/// The change log's entries after `after`, oldest first, at most `limit`.
pub(crate) fn log_read(after: u64, limit: usize) -> String {
    format!(
        "SELECT seq, value FROM memkv_changes WHERE seq > {after} ORDER BY seq LIMIT {limit};\n"
    )
}

/// The change log's bounds: `changes_last`, `changes_trimmed`.
pub(crate) const LOG_BOUNDS: &str = "SELECT (SELECT value FROM memkv_meta WHERE name = \
     'changes_last'), (SELECT value FROM memkv_meta WHERE name = 'changes_trimmed');\n";

/// The `space` column's number for `space`.
pub(crate) fn space_number(space: Space) -> u8 {
    space.numbers().postgres
}

/// Appends the lowercase hex of `bytes`. Through `hex::encode_to_slice` and a buffer on the
/// stack: measured on 16 B to 100 KB values, as fast as a loop over a table of digits, where
/// `hex::encode` (a new `String` of `char`s each time) took three to four times as long.
fn push_hex(out: &mut String, bytes: &[u8]) {
    let mut buf = [0u8; 512];
    for chunk in bytes.chunks(buf.len() / 2) {
        let digits = &mut buf[..chunk.len() * 2];
        hex::encode_to_slice(chunk, digits).expect("the buffer holds two digits a byte");
        out.push_str(std::str::from_utf8(digits).expect("hex digits are ASCII"));
    }
}

/// `'\x…'::bytea`.
pub(crate) fn bytea(out: &mut String, bytes: &[u8]) {
    out.reserve(bytes.len() * 2 + 12);
    out.push_str("'\\x");
    push_hex(out, bytes);
    out.push_str("'::bytea");
}

/// Decodes the text form of a `bytea` (`\x…`, the default `bytea_output`).
pub(crate) fn unhex(text: &str) -> Result<Vec<u8>, Error> {
    let digits = text
        .strip_prefix("\\x")
        .ok_or_else(|| Error::storage(format!("unexpected bytea text {:.20}", text)))?;
    if !digits.len().is_multiple_of(2) {
        return Err(Error::storage("a bytea value has an odd length"));
    }
    // Into a buffer of the right size: as fast as a loop by hand, where `hex::decode` took
    // one and a half to two and a half times as long (measured on 16 B to 100 KB values).
    let mut out = vec![0; digits.len() / 2];
    hex::decode_to_slice(digits, &mut out)
        .map_err(|_| Error::storage("a bytea value is not hex"))?;
    Ok(out)
}

fn store_and_space(out: &mut String, user: &str, space: Space) {
    out.push_str("store = ");
    bytea(out, user.as_bytes());
    let _ = write!(out, " AND space = {}", space_number(space));
}

/// `'{"\\x…",NULL,…}'::bytea[]`: an array literal of `bytea`s (`None`: SQL `NULL`).
pub(crate) fn bytea_array<'a>(out: &mut String, items: impl Iterator<Item = Option<&'a [u8]>>) {
    out.push_str("'{");
    for (n, item) in items.enumerate() {
        if n > 0 {
            out.push(',');
        }
        match item {
            None => out.push_str("NULL"),
            Some(bytes) => {
                out.reserve(bytes.len() * 2 + 6);
                // In an array literal, `\\` is one backslash: the element is `\x…`.
                out.push_str("\"\\\\x");
                push_hex(out, bytes);
                out.push('"');
            }
        }
    }
    out.push_str("}'::bytea[]");
}

/// `'{1,2,…}'::ty[]`: an array literal of numbers.
fn number_array(out: &mut String, items: impl Iterator<Item = usize>, ty: &str) {
    out.push_str("'{");
    for (n, item) in items.enumerate() {
        if n > 0 {
            out.push(',');
        }
        let _ = write!(out, "{item}");
    }
    let _ = write!(out, "}}'::{ty}[]");
}

/// The statements every connection prepares before its first transaction (`PREPARE`, in
/// SQL: they then run as `EXECUTE` in the simple-query protocol, several to a round trip, and
/// the server plans each once per connection, not once per use). Their rows travel as arrays,
/// joined (`LATERAL`: one primary-key lookup or range scan each) to the entries, so one plan
/// serves any number of rows, and a group-commit batch's hundreds of reads cost one statement.
///
/// - `memkv_read`: point reads `(i, store, space, key)`, range reads `(i, store, space, lo, hi)`
///   and reads to the end of a space `(i, store, space, lo)`, as rows of `(i, key, value)`.
/// - `memkv_check`: see [`check`].
/// - `memkv_put`: stores every `(store, space, key, value)` (keys distinct): with `merge`
///   (PostgreSQL 15 and later) a `MERGE`, which inserts new rows plainly and updates existing
///   ones in place; otherwise an `INSERT … ON CONFLICT DO UPDATE`, whose speculative insertions
///   and row locks cost each row some 50 to 100 bytes more of WAL. A `MERGE` is safe because
///   every writer of a store holds its lock: no other inserts its keys between the `MERGE`'s
///   lookup and its insert.
/// - `memkv_delete`: removes every `(store, space, key)`.
/// - `memkv_lock`: makes sure each store has its row, then `memkv_locked` locks them in sorted
///   order (writers of one store serialize, and never deadlock), and fails (as a stale
///   assumption, [`STALE`]) if a store has no row: a writer that knows its stores' rows exist
///   skips `memkv_lock` (see [`lock`]).
///
/// With `generic` (PostgreSQL 12 and later), the session plans each statement once
/// (`plan_cache_mode = force_generic_plan`): by default the server plans the first five runs of
/// a prepared statement for their arguments, and keeps doing so while a plan for any
/// arguments looks dearer, which for these statements it always does (an `unnest` of a
/// parameter is estimated at 10 rows). Every generic plan is the same index lookup or range
/// scan per row (docs/postgres.md); a `create` then costs the server a third less.
pub(crate) fn prepare_all(merge: bool, generic: bool) -> String {
    let put = put_rows(merge, "$1, $2, $3, $4");
    // `DEALLOCATE ALL` first: a `PREPARE` outlives the failure of a later one in the same
    // message, and a second attempt must not find its name taken.
    let plans = if generic {
        "SET plan_cache_mode = force_generic_plan;\n"
    } else {
        ""
    };
    format!(
        "DEALLOCATE ALL;\n{plans}\
         PREPARE memkv_read(int[], bytea[], smallint[], bytea[], \
         int[], bytea[], smallint[], bytea[], bytea[], int[], bytea[], smallint[], bytea[]) AS \
         SELECT f.i, x.key, x.value FROM unnest($1, $2, $3, $4) AS f(i, store, space, key) \
         CROSS JOIN LATERAL (SELECT x.key, x.value FROM {ENTRIES} x \
         WHERE x.store = f.store AND x.space = f.space AND x.key = f.key LIMIT 1) x \
         UNION ALL \
         SELECT f.i, x.key, x.value FROM unnest($5, $6, $7, $8, $9) AS f(i, store, space, lo, hi) \
         CROSS JOIN LATERAL (SELECT x.key, x.value FROM {ENTRIES} x \
         WHERE x.store = f.store AND x.space = f.space AND x.key >= f.lo AND x.key < f.hi \
         OFFSET 0) x \
         UNION ALL \
         SELECT f.i, x.key, x.value FROM unnest($10, $11, $12, $13) AS f(i, store, space, lo) \
         CROSS JOIN LATERAL (SELECT x.key, x.value FROM {ENTRIES} x \
         WHERE x.store = f.store AND x.space = f.space AND x.key >= f.lo OFFSET 0) x;\n\
         PREPARE memkv_check(bytea[], smallint[], bytea[], bytea[]) AS \
         SELECT (CASE WHEN count(*) = 0 THEN '0' ELSE '{STALE} ' || count(*) END)::int \
         FROM {differing};\n\
         PREPARE memkv_put(bytea[], smallint[], bytea[], bytea[]) AS {put};\n\
         PREPARE memkv_delete(bytea[], smallint[], bytea[]) AS {delete};\n\
         PREPARE memkv_lock(bytea[]) AS \
         INSERT INTO memkv_stores (store) SELECT unnest($1) ON CONFLICT DO NOTHING;\n\
         PREPARE memkv_locked(bytea[]) AS \
         SELECT (CASE WHEN count(*) = cardinality($1) THEN '0' ELSE '{STALE} lock' END)::int \
         FROM {locked};\n",
        differing = differing_rows("$1, $2, $3, $4"),
        delete = delete_rows("$1, $2, $3"),
        locked = locked_rows("$1"),
    )
}

/// Sent once per connection, after [`prepare_all`], its failure ignored (a server without these
/// settings answers the same, only dearer): every statement memkv sends finds rows by key, and
/// an index scan, which returns them in key order, is always what it wants. The planner thinks
/// otherwise for a small table: on `memkv_stores` (a row per store) it chose a sequential scan
/// for the store locks, whose `store = ANY(…)` filter then ran over every row, a few
/// microseconds for every hundred stores, on every write, until the table grew to about a
/// thousand (BENCHMARKS.md, PostgreSQL).
pub(crate) const INDEX_SCANS: &str = "SET enable_seqscan = off; SET enable_bitmapscan = off";

/// Stores every `(store, space, key, value)` of the arrays `args` (keys distinct): with `merge`
/// (PostgreSQL 15 and later) a `MERGE`, which inserts new rows plainly and updates existing
/// ones in place; otherwise an `INSERT … ON CONFLICT DO UPDATE`.
pub(super) fn put_rows(merge: bool, args: &str) -> String {
    if merge {
        format!(
            "MERGE INTO {ENTRIES} x USING unnest({args}) AS f(store, space, key, value) \
             ON x.store = f.store AND x.space = f.space AND x.key = f.key \
             WHEN MATCHED THEN UPDATE SET value = f.value \
             WHEN NOT MATCHED THEN INSERT (store, space, key, value) \
             VALUES (f.store, f.space, f.key, f.value)"
        )
    } else {
        format!(
            "INSERT INTO {ENTRIES} (store, space, key, value) SELECT * FROM unnest({args}) \
             ON CONFLICT (store, space, key) DO UPDATE SET value = EXCLUDED.value"
        )
    }
}

/// The rows of `(store, space, key, value)` (the arrays `args`) whose entry holds another value
/// (`NULL`: absent), to be counted.
pub(super) fn differing_rows(args: &str) -> String {
    format!(
        "unnest({args}) AS f(store, space, key, value) \
         LEFT JOIN LATERAL (SELECT x.value FROM {ENTRIES} x \
         WHERE x.store = f.store AND x.space = f.space AND x.key = f.key LIMIT 1) x ON true \
         WHERE x.value IS DISTINCT FROM f.value"
    )
}

/// Removes every `(store, space, key)` of the arrays `args`.
pub(super) fn delete_rows(args: &str) -> String {
    format!(
        "DELETE FROM {ENTRIES} x USING unnest({args}) AS f(store, space, key) \
         WHERE x.store = f.store AND x.space = f.space AND x.key = f.key"
    )
}

/// The rows of the stores in the array `arg`, locked in sorted order, to be counted.
pub(super) fn locked_rows(arg: &str) -> String {
    format!("(SELECT store FROM memkv_stores WHERE store = ANY({arg}) ORDER BY store FOR UPDATE) l")
}

/// `EXECUTE memkv_read(…)` for all of `fetches`: rows of `(fetch index, key, value)`.
pub(crate) fn select(fetches: &[Fetch]) -> String {
    let mut gets = Vec::new();
    let mut ranges = Vec::new();
    for (i, fetch) in fetches.iter().enumerate() {
        match fetch {
            Fetch::Get { space, user, key } => gets.push((i, user, *space, key)),
            Fetch::Range {
                space,
                user,
                start,
                end,
            } => ranges.push((i, user, *space, start, end)),
        }
    }
    let mut sql = String::from("EXECUTE memkv_read(");
    number_array(&mut sql, gets.iter().map(|g| g.0), "int");
    sql.push_str(", ");
    bytea_array(&mut sql, gets.iter().map(|g| Some(g.1.as_bytes())));
    sql.push_str(", ");
    number_array(
        &mut sql,
        gets.iter().map(|g| usize::from(space_number(g.2))),
        "smallint",
    );
    sql.push_str(", ");
    bytea_array(&mut sql, gets.iter().map(|g| Some(g.3.as_slice())));
    // Bounded ranges apart from those to the end of the space: `key < hi` is then an index
    // condition, where the scan stops, not a filter over the rest of the space.
    for bounded in [true, false] {
        let part: Vec<_> = ranges.iter().filter(|r| r.4.is_some() == bounded).collect();
        sql.push_str(", ");
        number_array(&mut sql, part.iter().map(|r| r.0), "int");
        sql.push_str(", ");
        bytea_array(&mut sql, part.iter().map(|r| Some(r.1.as_bytes())));
        sql.push_str(", ");
        number_array(
            &mut sql,
            part.iter().map(|r| usize::from(space_number(r.2))),
            "smallint",
        );
        sql.push_str(", ");
        bytea_array(&mut sql, part.iter().map(|r| Some(r.3.as_slice())));
        if bounded {
            sql.push_str(", ");
            bytea_array(&mut sql, part.iter().map(|r| r.4.as_deref()));
        }
    }
    sql.push(')');
    sql
}

/// `(space, user, key)` as the cache keys them.
pub(crate) type Key = (u8, String, Vec<u8>);

/// `EXECUTE memkv_put(…)` of every `(key, value)` (keys distinct).
pub(crate) fn put_keys(out: &mut String, puts: &[(&Key, &[u8])]) {
    if puts.is_empty() {
        return;
    }
    out.push_str("EXECUTE memkv_put(");
    bytea_array(
        out,
        puts.iter().map(|((_, user, _), _)| Some(user.as_bytes())),
    );
    out.push_str(", ");
    number_array(
        out,
        puts.iter().map(|((space, _, _), _)| usize::from(*space)),
        "smallint",
    );
    out.push_str(", ");
    bytea_array(
        out,
        puts.iter().map(|((_, _, key), _)| Some(key.as_slice())),
    );
    out.push_str(", ");
    bytea_array(out, puts.iter().map(|(_, value)| Some(*value)));
    out.push_str(");\n");
}

/// What `memkv_check` raises, inside the text of an `invalid_text_representation` error, when
/// an entry differs from what the transaction assumed.
pub(crate) const STALE: &str = "memkv-stale";

/// `EXECUTE memkv_check(…)`: fails (SQLSTATE 22P02, with [`STALE`] in its message) unless every
/// entry holds the value given (`None`: absent). Sent after the store locks, so what it checks
/// cannot change before the commit: the transaction's assumptions are then as good as reads.
/// (A runtime cast of a text that is not a number: plain SQL, no function to install.)
pub(crate) fn check(out: &mut String, entries: &[(Key, Option<Vec<u8>>)]) {
    if entries.is_empty() {
        return;
    }
    out.push_str("EXECUTE memkv_check(");
    bytea_array(
        out,
        entries
            .iter()
            .map(|((_, user, _), _)| Some(user.as_bytes())),
    );
    out.push_str(", ");
    number_array(
        out,
        entries.iter().map(|((space, _, _), _)| usize::from(*space)),
        "smallint",
    );
    out.push_str(", ");
    bytea_array(
        out,
        entries.iter().map(|((_, _, key), _)| Some(key.as_slice())),
    );
    out.push_str(", ");
    bytea_array(out, entries.iter().map(|(_, value)| value.as_deref()));
    out.push_str(");\n");
}

/// `EXECUTE memkv_delete(…)` of every key.
pub(crate) fn remove_keys(out: &mut String, keys: &[&Key]) {
    if keys.is_empty() {
        return;
    }
    out.push_str("EXECUTE memkv_delete(");
    bytea_array(out, keys.iter().map(|(_, user, _)| Some(user.as_bytes())));
    out.push_str(", ");
    number_array(
        out,
        keys.iter().map(|(space, _, _)| usize::from(*space)),
        "smallint",
    );
    out.push_str(", ");
    bytea_array(out, keys.iter().map(|(_, _, key)| Some(key.as_slice())));
    out.push_str(");\n");
}

pub(crate) fn remove_range(out: &mut String, space: Space, user: &str, start: &[u8], end: &[u8]) {
    let _ = write!(out, "DELETE FROM {ENTRIES} WHERE ");
    store_and_space(out, user, space);
    out.push_str(" AND key >= ");
    bytea(out, start);
    out.push_str(" AND key < ");
    bytea(out, end);
    out.push_str(";\n");
}

/// Makes sure each store has its row (unless `known`: the rows exist, and are never removed),
/// then locks them in sorted order (`users` is sorted and free of duplicates): writers of one
/// store serialize, and never deadlock. If `known` was wrong, the lock fails as a stale
/// assumption, before anything is applied, and the write runs again without it.
pub(crate) fn lock(out: &mut String, users: &[&str], known: bool) {
    if users.is_empty() {
        return;
    }
    let names: &[&str] = if known {
        &["memkv_locked"]
    } else {
        &["memkv_lock", "memkv_locked"]
    };
    for name in names {
        let _ = write!(out, "EXECUTE {name}(");
        bytea_array(out, users.iter().map(|u| Some(u.as_bytes())));
        out.push_str(");\n");
    }
}

/// The rows of the last statement of a simple query.
pub(crate) fn last_rows(messages: Vec<SimpleQueryMessage>) -> Vec<postgres::SimpleQueryRow> {
    let mut rows = Vec::new();
    for m in messages {
        match m {
            SimpleQueryMessage::Row(row) => rows.push(row),
            SimpleQueryMessage::CommandComplete(_) => {}
            SimpleQueryMessage::RowDescription(_) => rows.clear(),
            _ => {}
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_round_trip_and_cannot_escape() {
        let mut s = String::new();
        bytea(&mut s, b"a'; DROP TABLE x; --\\\x00\xff");
        assert!(s.starts_with("'\\x") && s.ends_with("'::bytea"));
        assert!(s[3..s.len() - 8].bytes().all(|b| b.is_ascii_hexdigit()));
        let text = &s[1..s.len() - 8];
        assert_eq!(unhex(text).unwrap(), b"a'; DROP TABLE x; --\\\x00\xff");
    }

    #[test]
    fn array_literals_hold_only_hex() {
        let mut s = String::new();
        let nasty: &[u8] = b"'}\",{\\";
        bytea_array(&mut s, [Some(nasty), None, Some(&b""[..])].into_iter());
        assert_eq!(s, "'{\"\\\\x277d222c7b5c\",NULL,\"\\\\x\"}'::bytea[]");
    }
}
