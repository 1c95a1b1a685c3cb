//! Lines of `memkv exec` input (JSON Lines: command inputs, `tool_use` blocks, arrays of them),
//! read with the same length cap and answered by `protocol::answer_line` against a fresh
//! in-memory store (secrets redacted): every line gets one line of JSON, nothing fails in storage, and the store's
//! invariants (`Database::check`) hold afterwards.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memkv::lines::{Line, read_line};
use memkv::protocol::answer_line;
use memkv::{SecretPolicy, Database};

fuzz_target!(|data: &[u8]| {
    // Small limits so that the fuzzer reaches them; secrets are redacted, which runs every
    // detector and the replacement.
    let store = Database::builder()
        .secrets(SecretPolicy::Redact)
        .max_file_bytes(512)
        .max_files(8)
        .max_bytes(2048)
        .view_max_chars(400)
        .in_memory()
        .unwrap();
    let user = store.user("fuzz").unwrap();
    let mut reader = data;
    let mut buf = Vec::new();
    for _ in 0..64 {
        match read_line(&mut reader, &mut buf, 4096).unwrap() {
            Line::End => break,
            Line::TooLong(_) => continue,
            Line::Complete => {}
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (answer, errors) = answer_line(&user, &buf);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(!answer.contains('\n'), "{answer:?}");
        serde_json::from_str::<serde_json::Value>(&answer).unwrap();
    }
    assert_eq!(store.check().unwrap(), Vec::new());
});
