//! `MemoryPath::parse` on any string: it never panics, and a path it accepts is canonical (its
//! display parses back to the same path, within the limits of PROTOCOL.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memkv::MemoryPath;

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(path) = MemoryPath::parse(input) else {
        return;
    };
    let shown = path.to_string();
    assert!(
        shown == "/memories" || shown.starts_with("/memories/"),
        "{shown:?}"
    );
    assert!(shown.len() <= 1024, "{} bytes", shown.len());
    assert!(path.segments().len() <= 20);
    assert!(
        path.segments()
            .iter()
            .all(|s| !s.is_empty() && s.len() <= 255)
    );
    assert_eq!(MemoryPath::parse(&shown).as_ref(), Ok(&path), "{input:?}");
});
