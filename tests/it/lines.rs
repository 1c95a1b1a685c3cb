//! The line face (`memkv exec`, `protocol::answer_line`): a message refused whole is answered
//! with one error line, and nothing runs. (HTTP answers the same refusals with a 400; the
//! server's tests check that.)

use memkv::Database;
use memkv::protocol;
use serde_json::Value;

#[test]
fn text_that_is_not_json_gets_one_error_line() {
    let store = Database::in_memory().unwrap();
    let u = store.user("u").unwrap();
    let (line, errors) = protocol::answer_line(&u, b"{not json");
    assert!(errors.is_empty());
    assert_eq!(
        line,
        r#"{"content":"Error: Invalid JSON: key must be a string at line 1 column 2","is_error":true}"#
    );
}

#[test]
fn a_block_without_an_id_is_refused_and_nothing_runs() {
    let store = Database::in_memory().unwrap();
    let u = store.user("u").unwrap();
    for line in [
        r#"{"type":"tool_use","name":"memory","input":{"command":"create","path":"/memories/a","file_text":"x"}}"#,
        r#"{"type":"tool_use","id":42,"name":"memory","input":{"command":"create","path":"/memories/a","file_text":"x"}}"#,
        r#"[{"type":"tool_use","id":"ok","name":"memory","input":{"command":"create","path":"/memories/a","file_text":"x"}},{"type":"tool_use","name":"memory","input":{}}]"#,
    ] {
        let (answer, errors) = protocol::answer_line(&u, line.as_bytes());
        assert!(errors.is_empty());
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["is_error"], true, "{line}");
        assert!(
            answer["content"]
                .as_str()
                .unwrap()
                .starts_with("Error: Invalid tool_use block: "),
            "{answer}"
        );
    }
    assert!(u.files().unwrap().is_empty());
}
