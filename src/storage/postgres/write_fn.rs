//! `pg_temp.memkv_write`, the function that a whole write is one call of ([`super::call`]): its
//! SQL, and its prepared call with the parameters' types.

use super::sql::{ENTRIES, STALE, delete_rows, differing_rows, locked_rows, put_rows};

/// Prepares the call of `pg_temp.memkv_write` after making the function (`None`, leaving the
/// connection as it was, if the server cannot: the writes then travel as text).
pub(super) fn prepare_write(
    client: &mut postgres::Client,
    merge: bool,
) -> Option<postgres::Statement> {
    client.batch_execute(&write_function(merge)).ok()?;
    client.prepare_typed(WRITE_CALL, &WRITE_TYPES).ok()
}

/// `pg_temp.memkv_write`: a whole write in one call, for a writer whose stores' rows exist and
/// whose reads were all assumed (the common case: see [`super::memo`]): it locks the stores,
/// checks the assumptions, removes keys and stores keys, in that order, each statement with a
/// snapshot of its own (so the check sees every commit made before the locks were granted),
/// exactly as the statements of a one-round-trip write do in text. Called with binary
/// parameters in the extended protocol, outside `BEGIN`: the call is its own transaction,
/// committed when it returns, and the server reads no text of the values (lexing the hex of a
/// 1 KiB create's values cost the server more than running it does; BENCHMARKS.md). A failed
/// assumption raises what `memkv_check` and `memkv_locked` raise. A temporary function (in the
/// session's own schema: no right beyond `TEMP`, nothing left behind), made when a connection
/// prepares its statements; a server that cannot make it (one without PL/pgSQL or temporary
/// functions) sends the text instead.
///
/// With `MERGE`, an assumption about a key the write also stores travels with the key
/// (`a_pold`, `a_pcheck`) and is checked by the `MERGE` itself: a row is updated only if it
/// holds the value assumed, inserted only if it was assumed absent, and a count short of the
/// keys raises the same error as the check. One index lookup per such key instead of two (a
/// create assumes five keys and stores all of them). Assumptions about keys it does not store
/// are checked first, as in text. Without `MERGE` every assumption is checked first and
/// `a_pcheck` is all false.
pub(crate) fn write_function(merge: bool) -> String {
    let put = if merge {
        format!(
            "MERGE INTO {ENTRIES} x \
             USING unnest(a_pstore, a_pspace, a_pkey, a_pvalue, a_pold, a_pcheck) \
             AS f(store, space, key, value, old, checked) \
             ON x.store = f.store AND x.space = f.space AND x.key = f.key \
             WHEN MATCHED AND (NOT f.checked OR x.value = f.old) THEN UPDATE SET value = f.value \
             WHEN NOT MATCHED AND (NOT f.checked OR f.old IS NULL) THEN \
             INSERT (store, space, key, value) VALUES (f.store, f.space, f.key, f.value);\n\
             GET DIAGNOSTICS n = ROW_COUNT;\n\
             IF n <> cardinality(a_pstore) THEN \
             RAISE EXCEPTION '{STALE} %', cardinality(a_pstore) - n \
             USING ERRCODE = 'invalid_text_representation'; END IF"
        )
    } else {
        put_rows(false, "a_pstore, a_pspace, a_pkey, a_pvalue")
    };
    format!(
        "CREATE OR REPLACE FUNCTION pg_temp.memkv_write(\
         a_lock bytea[], a_cstore bytea[], a_cspace smallint[], a_ckey bytea[], a_cvalue bytea[], \
         a_dstore bytea[], a_dspace smallint[], a_dkey bytea[], \
         a_istore bytea[], a_ispace smallint[], a_ikey bytea[], a_ivalue bytea[], \
         a_pstore bytea[], a_pspace smallint[], a_pkey bytea[], a_pvalue bytea[], \
         a_pold bytea[], a_pcheck boolean[], a_log bytea[]) \
         RETURNS void LANGUAGE plpgsql AS $memkv$\n\
         DECLARE n bigint;\n\
         BEGIN\n\
         SELECT count(*) INTO n FROM {locked};\n\
         IF n <> cardinality(a_lock) THEN \
         RAISE EXCEPTION '{STALE} lock' USING ERRCODE = 'invalid_text_representation'; END IF;\n\
         IF cardinality(a_cstore) > 0 THEN\n\
         SELECT count(*) INTO n FROM {differing};\n\
         IF n > 0 THEN \
         RAISE EXCEPTION '{STALE} %', n USING ERRCODE = 'invalid_text_representation'; END IF;\n\
         END IF;\n\
         IF cardinality(a_dstore) > 0 THEN {delete}; END IF;\n\
         IF cardinality(a_istore) > 0 THEN \
         INSERT INTO {ENTRIES} (store, space, key, value) \
         SELECT * FROM unnest(a_istore, a_ispace, a_ikey, a_ivalue); END IF;\n\
         IF cardinality(a_pstore) > 0 THEN {put}; END IF;\n\
         IF cardinality(a_log) > 0 THEN \
         INSERT INTO memkv_changes_pending (value) \
         SELECT t.e FROM unnest(a_log) WITH ORDINALITY AS t(e, o) ORDER BY t.o; \
         END IF;\n\
         END\n$memkv$",
        locked = locked_rows("a_lock"),
        differing = differing_rows("a_cstore, a_cspace, a_ckey, a_cvalue"),
        delete = delete_rows("a_dstore, a_dspace, a_dkey"),
    )
}

/// The call of [`write_function`], and its parameters' types.
pub(crate) const WRITE_CALL: &str = "SELECT pg_temp.memkv_write($1, $2, $3, $4, $5, $6, $7, \
     $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)";
#[rustfmt::skip]
pub(crate) const WRITE_TYPES: [postgres::types::Type; 19] = {
    use postgres::types::Type;
    const B: Type = Type::BYTEA_ARRAY;
    const S: Type = Type::INT2_ARRAY;
    [
        B,                             // a_lock
        B, S, B, B,                    // a_cstore, a_cspace, a_ckey, a_cvalue
        B, S, B,                       // a_dstore, a_dspace, a_dkey
        B, S, B, B,                    // a_istore, a_ispace, a_ikey, a_ivalue
        B, S, B, B, B, Type::BOOL_ARRAY, // a_pstore, a_pspace, a_pkey, a_pvalue, a_pold, a_pcheck
        B,                             // a_log: change-log entries, queued for numbering
    ]
};
