//! `memkv search`: a user's memories searched as the model's `memory_search` tool searches them,
//! printed as the model reads them or as the HTTP server's JSON.

use std::io::{self, Write};

use memkv::{Database, SearchMode, SearchRequest};

use crate::Usage;
use crate::admin::open_read_only;
use crate::args::{Global, SearchArgs};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

pub fn search(global: &Global, args: &SearchArgs) -> Result {
    if args.tool_definition {
        let definition = serde_json::json!({
            "name": memkv::SEARCH_TOOL_NAME,
            "description": memkv::SEARCH_TOOL_DESCRIPTION,
            "input_schema": memkv::search_tool_schema(),
        });
        let mut out = io::stdout().lock();
        serde_json::to_writer(&mut out, &definition)?;
        out.write_all(b"\n")?;
        return Ok(());
    }
    let (Some(user), Some(query)) = (&args.user, &args.query) else {
        unreachable!("clap requires both without --tool-definition")
    };
    let db: Database = open_read_only(global)?;
    let store = db.user(user)?;
    let mode = if args.regex {
        SearchMode::Regex
    } else if args.fixed_strings {
        SearchMode::Literal
    } else {
        SearchMode::Ranked
    };
    let mut request = SearchRequest::new(query.clone(), mode)
        .case_insensitive(args.ignore_case)
        .context(args.context);
    if let Some(limit) = args.limit {
        request.limit = limit;
    }
    request.path_prefix = args.path_prefix.clone();
    let mut out = io::stdout().lock();
    if args.json {
        let results = match store.search(&request) {
            Ok(results) => results,
            // A search memkv does not run is a usage error (exit 2), as clap's own.
            Err(e @ (memkv::Error::InvalidSearch(_) | memkv::Error::InvalidPath { .. })) => {
                return Err(Box::new(Usage(e.to_string())));
            }
            Err(e) => return Err(e.into()),
        };
        serde_json::to_writer(&mut out, &results.to_json())?;
    } else {
        let output = store.search_output(&request)?;
        if output.is_error {
            let reason = output
                .content
                .strip_prefix("Error: ")
                .unwrap_or(&output.content);
            return Err(Box::new(Usage(format!("search refused: {reason}"))));
        }
        out.write_all(crate::text::safe_lines(&output.content).as_bytes())?;
    }
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}
