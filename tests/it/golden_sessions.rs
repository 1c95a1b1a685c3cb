//! tests/data/golden-sessions.jsonl: the golden table's sessions as data, for the faces that
//! cannot compile tests/it/golden.rs (the Python extension and the Node addon replay the file
//! through their in-process objects, byte for byte).
//!
//! Each line is one session of golden.rs against a fresh store: its messages in order, each with
//! the exact answer line (`{"steps": [{"input": …, "answer": "…"}]}`). A session is recorded when
//! every step went through its messages (none set the store up directly) and it replays
//! identically on a fresh in-memory database with the default settings (so sessions that need
//! other limits are left out by construction), and is at most `util::MAX_SESSION_BYTES`. `tools/golden-sessions.sh` writes the file;
//! [`the_recorded_golden_sessions_hold`] holds it to the code.

use serde_json::Value;

use super::util::{GOLDEN_SESSIONS as FILE, replay};

#[test]
fn the_recorded_golden_sessions_hold() {
    let text = std::fs::read_to_string(FILE).unwrap();
    let mut sessions = 0;
    let mut steps = 0;
    for (n, line) in text.lines().enumerate() {
        let session: Value = serde_json::from_str(line).unwrap();
        let recorded: Vec<(Value, String)> = session["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["input"].clone(), s["answer"].as_str().unwrap().to_owned()))
            .collect();
        steps += recorded.len();
        sessions += 1;
        if let Err(e) = replay(&recorded) {
            panic!(
                "tests/data/golden-sessions.jsonl line {}: {e}\n(tools/golden-sessions.sh writes it anew)",
                n + 1
            );
        }
    }
    // The table's sessions, most of them: a file cut short would hold little.
    assert!(
        sessions >= 10 && steps >= 120,
        "{sessions} sessions, {steps} steps"
    );
}
