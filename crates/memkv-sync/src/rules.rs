//! Which files of a folder are synced, and how a file's name maps to a memory's path.
//!
//! A file `notes/a.md` of the folder is the memory `/notes/a.md` of the store (the memory tool's
//! `/memories/notes/a.md`). Not synced, either way: hidden files and folders (a name starting
//! with `.`, which covers the sync's own temporary files), editor swap and backup files, and
//! whatever the folder's `.memkvignore` names, in gitignore's syntax.

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The file, at the folder's root, that names more files to leave out.
pub const IGNORE_FILE: &str = ".memkvignore";

/// Names left out besides hidden ones: editors' swap, backup and lock files, and what file
/// managers leave behind.
const BUILT_IN: &[&str] = &[
    "*~",
    "*.swp",
    "*.swo",
    "*.swx",
    "\\#*#",
    "4913",
    "*.tmp",
    "*.bak",
    "*.orig",
    "Thumbs.db",
    "desktop.ini",
];

/// The folder's rules.
#[derive(Debug)]
pub struct Rules {
    built_in: Gitignore,
    user: Gitignore,
}

impl Rules {
    /// The rules of the folder at `root`: the built-in ones and its `.memkvignore`.
    ///
    /// # Errors
    /// `.memkvignore` exists but cannot be read, or has a line that is not a pattern.
    pub fn load(root: &Path) -> Result<Rules, String> {
        let mut built_in = GitignoreBuilder::new(root);
        for pattern in BUILT_IN {
            built_in
                .add_line(None, pattern)
                .expect("the built-in patterns parse");
        }
        let mut user = GitignoreBuilder::new(root);
        let file = root.join(IGNORE_FILE);
        if file.exists()
            && let Some(e) = user.add(&file)
        {
            return Err(format!("{}: {e}", file.display()));
        }
        Ok(Rules {
            built_in: built_in.build().map_err(|e| e.to_string())?,
            user: user
                .build()
                .map_err(|e| format!("{}: {e}", file.display()))?,
        })
    }

    /// Whether `rel` (relative to the root, `/`-separated) is left out; `dir` when it names a
    /// folder.
    pub fn ignored(&self, rel: &str, dir: bool) -> bool {
        if rel.split('/').any(|c| c.starts_with('.')) {
            return true;
        }
        let path = Path::new(rel);
        self.built_in
            .matched_path_or_any_parents(path, dir)
            .is_ignore()
            || self.user.matched_path_or_any_parents(path, dir).is_ignore()
    }
}

/// The memory path of folder-relative `rel` (`notes/a.md` is `/notes/a.md`).
pub fn memory_path(rel: &str) -> String {
    format!("/{rel}")
}

/// The folder-relative name of memory path `path`, or why it cannot be a file here: a segment
/// that is empty, `.` or `..`, or holds a character no file name may (`\0`, `\`).
pub fn local_name(path: &str) -> Result<String, String> {
    let rel = path
        .strip_prefix('/')
        .ok_or_else(|| format!("{path:?} does not start with /"))?;
    if rel.is_empty() {
        return Err("the store's root is not a file".to_owned());
    }
    for segment in rel.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." {
            return Err(format!("{path:?} has an empty, . or .. segment"));
        }
        if segment.contains(['\0', '\\']) {
            return Err(format!("{path:?} has a character no file name may hold"));
        }
    }
    Ok(rel.to_owned())
}

/// The name of the conflict copy of `rel` made at `when` (`YYYYMMDD-HHMMSS`, UTC) on `host`:
/// `notes/a.sync-conflict-20261205-111455-laptop.md`, Syncthing's pattern.
pub fn conflict_name(rel: &str, when: &str, host: &str) -> String {
    let (dir, name) = match rel.rfind('/') {
        Some(i) => (&rel[..=i], &rel[i + 1..]),
        None => ("", rel),
    };
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let tag = format!("sync-conflict-{when}-{host}");
    match name.rfind('.') {
        Some(i) if i > 0 => format!("{dir}{}.{tag}{}", &name[..i], &name[i..]),
        _ => format!("{dir}{name}.{tag}"),
    }
}

/// What every conflict copy of `rel` starts and ends with (whatever its time and host):
/// `notes/a.sync-conflict-` and `.md`.
pub fn conflict_affixes(rel: &str) -> (String, String) {
    let name = conflict_name(rel, "", "");
    let (start, end) = name
        .split_once("sync-conflict--")
        .expect("a conflict name holds its tag");
    (format!("{start}sync-conflict-"), end.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_swap_and_user_patterns_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IGNORE_FILE), "drafts/\n*.log\n").unwrap();
        let rules = Rules::load(dir.path()).unwrap();
        for rel in [
            ".git/config",
            "a/.hidden.md",
            "notes.md~",
            ".notes.md.swp",
            "x.swp",
            "#a.md#",
            "4913",
            "drafts/a.md",
            "b/c.log",
        ] {
            assert!(rules.ignored(rel, false), "{rel}");
        }
        for rel in ["notes.md", "a/b/c.md", "drafts.md", "log.md"] {
            assert!(!rules.ignored(rel, false), "{rel}");
        }
    }

    #[test]
    fn a_bad_ignore_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IGNORE_FILE), "x[z-a]\n").unwrap();
        let e = Rules::load(dir.path()).unwrap_err();
        assert!(e.contains(IGNORE_FILE), "{e}");
    }

    #[test]
    fn memory_paths_map_to_names_and_back() {
        assert_eq!(local_name("/notes/a.md").unwrap(), "notes/a.md");
        assert_eq!(memory_path("notes/a.md"), "/notes/a.md");
        for bad in ["/", "", "a", "/a//b", "/../x", "/a/./b", "/a\\b"] {
            assert!(local_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn conflict_affixes_match_every_copy() {
        let (start, end) = conflict_affixes("notes/a.md");
        assert_eq!(
            (start.as_str(), end.as_str()),
            ("notes/a.sync-conflict-", ".md")
        );
        let copy = conflict_name("notes/a.md", "20261205-111455", "h");
        assert!(copy.starts_with(&start) && copy.ends_with(&end));
        assert_eq!(conflict_affixes("README").1, "");
    }

    #[test]
    fn conflict_copies_keep_the_extension() {
        assert_eq!(
            conflict_name("notes/a.md", "20261205-111455", "lap top"),
            "notes/a.sync-conflict-20261205-111455-lap_top.md"
        );
        assert_eq!(
            conflict_name("README", "20261205-111455", "h"),
            "README.sync-conflict-20261205-111455-h"
        );
        assert_eq!(
            conflict_name("x/.env", "20261205-111455", "h"),
            "x/.env.sync-conflict-20261205-111455-h"
        );
    }
}
