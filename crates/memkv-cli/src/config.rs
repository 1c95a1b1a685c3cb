//! The configuration: every option of `memkv` (the global ones) and of `memkv serve` comes from,
//! in order of precedence, the command line, the environment (`MEMKV_` and the option's name in
//! capitals, `-` as `_`: `--max-in-flight` is `MEMKV_MAX_IN_FLIGHT`), the config file (`--config
//! FILE` or `MEMKV_CONFIG`), and the built-in default.
//!
//! The file is TOML: the global options at the top, `serve`'s in a `[serve]` table, each under
//! its long name (`max-files = 1000`, or `max_files`); a list option takes an array. An unknown
//! name is an error, naming it. The file's values become the options' defaults, so that clap
//! itself applies the precedence (command line, then environment, then default).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, Command, CommandFactory};

use crate::args::Cli;

/// The environment variable naming the config file.
pub const CONFIG_ENV: &str = "MEMKV_CONFIG";
/// The subcommands whose options the file may set in a table of their own.
const SERVE: &str = "serve";
const SYNC: &str = "sync";
/// The key of `[sync]` that holds the folders (`[[sync.folder]]`), not an option.
const FOLDER: &str = "folder";

/// The config file read, if any, and the options it set.
#[derive(Debug, Default, Clone)]
pub struct Loaded {
    /// The file.
    pub path: Option<PathBuf>,
    /// The global options it set (ids).
    pub global: Vec<String>,
    /// `serve`'s options it set (ids).
    pub serve: Vec<String>,
    /// `sync`'s options it set (ids).
    pub sync: Vec<String>,
    /// The folders of `[[sync.folder]]` tables, as written.
    pub sync_folders: Vec<toml::Table>,
}

/// The command line of `memkv`, with every option's environment variable and the config file's
/// values as defaults; `args` are the process's arguments (to find `--config`).
///
/// # Errors
/// The config file cannot be read or parsed, or names an option memkv does not have.
pub fn command(args: &[OsString]) -> Result<(Command, Loaded), String> {
    let mut command = with_env(Cli::command());
    let Some(path) = config_path(args) else {
        return Ok((command, Loaded::default()));
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: not a TOML file: {e}", path.display()))?;
    let mut loaded = Loaded {
        path: Some(path.clone()),
        ..Loaded::default()
    };
    for (key, value) in &table {
        if key == SERVE || key == SYNC {
            let sub_name: &'static str = if key == SERVE { SERVE } else { SYNC };
            let toml::Value::Table(table) = value else {
                return Err(format!(
                    "{}: `{key}` must be a table ([{key}])",
                    path.display()
                ));
            };
            for (name, value) in table {
                if sub_name == SYNC && name == FOLDER {
                    loaded.sync_folders = folders(&path, value)?;
                    continue;
                }
                let sub = command
                    .find_subcommand(sub_name)
                    .expect("the subcommand exists");
                let id = option_id(sub, name)
                    .ok_or_else(|| unknown(&path, &format!("{sub_name}.{name}")))?;
                let values = strings(&path, name, value)?;
                check_values(&path, &format!("{sub_name}.{name}"), sub, &id, &values)?;
                command = command
                    .mut_subcommand(sub_name, |s| s.mut_arg(&id, |a| a.default_values(values)));
                if sub_name == SERVE {
                    loaded.serve.push(id);
                } else {
                    loaded.sync.push(id);
                }
            }
            continue;
        }
        let id = option_id(&command, key).ok_or_else(|| unknown(&path, key))?;
        if id == "config" {
            return Err(format!(
                "{}: `config` cannot name another file",
                path.display()
            ));
        }
        let values = strings(&path, key, value)?;
        check_values(&path, key, &command, &id, &values)?;
        command = command.mut_arg(&id, |a| a.default_values(values));
        loaded.global.push(id);
    }
    Ok((command, loaded))
}

/// Each of `values` as option `id` of `command` would parse it: a value it refuses is an error
/// naming the file and the key (clap's own, once the values are defaults, names neither).
fn check_values(
    path: &Path,
    key: &str,
    command: &Command,
    id: &str,
    values: &[&str],
) -> Result<(), String> {
    let arg = command
        .get_arguments()
        .find(|a| a.get_id() == id)
        .expect("the option was found by its name");
    let Some(long) = arg.get_long() else {
        return Ok(());
    };
    if !arg.get_action().takes_values() {
        return Ok(());
    }
    // The option alone, given each value on a command line of its own.
    let alone = Command::new("memkv").arg(arg.clone().global(false).required(false));
    for value in values {
        if let Err(e) = alone
            .clone()
            .try_get_matches_from(["memkv".to_owned(), format!("--{long}={value}")])
        {
            let why = e.to_string();
            let why = why.trim().trim_start_matches("error: ");
            let why = why.lines().next().unwrap_or_default();
            return Err(format!("{}: {key} = {value:?}: {why}", path.display()));
        }
    }
    Ok(())
}

/// `[[sync.folder]]`: an array of tables.
fn folders(path: &Path, value: &toml::Value) -> Result<Vec<toml::Table>, String> {
    let bad = || {
        format!(
            "{}: sync.folder must be tables ([[sync.folder]] with dir = \"...\" and store = \"...\")",
            path.display()
        )
    };
    let toml::Value::Array(items) = value else {
        return Err(bad());
    };
    items
        .iter()
        .map(|i| match i {
            toml::Value::Table(t) => Ok(t.clone()),
            _ => Err(bad()),
        })
        .collect()
}

fn unknown(path: &Path, key: &str) -> String {
    format!(
        "{}: unknown option {key:?}: the keys are the long options of memkv (max-files = 1000) and, in a [serve] table, of memkv serve (listen = \"0.0.0.0:7437\")",
        path.display()
    )
}

/// `--config FILE`, `--config=FILE` or `$MEMKV_CONFIG`.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    let mut args = args.iter().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            return args.next().map(PathBuf::from);
        }
        if let Some(path) = arg.to_str().and_then(|a| a.strip_prefix("--config=")) {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os(CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The id of `command`'s option spelled `key` (`max-files` or `max_files`).
fn option_id(command: &Command, key: &str) -> Option<String> {
    let long = key.replace('_', "-");
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(long.as_str()))
        .map(|a| a.get_id().to_string())
}

/// A TOML value as the option's text values.
fn strings(path: &Path, key: &str, value: &toml::Value) -> Result<Vec<&'static str>, String> {
    let one = |v: &toml::Value| -> Result<String, String> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            _ => Err(format!(
                "{}: {key} must be a string, a number or a boolean (or an array of them)",
                path.display()
            )),
        }
    };
    let texts = match value {
        toml::Value::Array(items) => items.iter().map(one).collect::<Result<Vec<_>, _>>()?,
        v => vec![one(v)?],
    };
    // clap keeps defaults for the life of the process, which this command is.
    Ok(texts
        .into_iter()
        .map(|t| &*Box::leak(t.into_boxed_str()))
        .collect())
}

/// Every long option of memkv and of `serve` with an environment variable: its own if it has
/// one, else `MEMKV_` and its name.
pub fn with_env(command: Command) -> Command {
    fn add(command: Command) -> Command {
        add_as(command, "MEMKV_")
    }
    // `sync`'s options have names of their own (`MEMKV_SYNC_URL`, `MEMKV_SYNC_ONCE`): a plain
    // `MEMKV_ONCE` or `MEMKV_STATE` in a service's environment would mean too little.
    fn add_sync(command: Command) -> Command {
        add_as(command, "MEMKV_SYNC_")
    }
    fn add_as(mut command: Command, prefix: &str) -> Command {
        let ids: Vec<String> = command
            .get_arguments()
            .filter(|a| a.get_long().is_some() && a.get_env().is_none())
            .map(|a| a.get_id().to_string())
            .filter(|id| !matches!(id.as_str(), "help" | "version"))
            .collect();
        for id in ids {
            let name = format!("{prefix}{}", id.to_uppercase());
            command = command.mut_arg(&id, |a| a.env(&*Box::leak(name.into_boxed_str())));
        }
        command
    }
    add(command)
        .mut_subcommand(SERVE, add)
        .mut_subcommand(SYNC, add_sync)
}

/// The effective configuration, for `memkv config show`: every global option and every option
/// of `serve`, its value and where it came from; a database URL's password masked.
pub fn show(command: &Command, matches: &ArgMatches, loaded: &Loaded) -> String {
    let mut out = format!(
        "# memkv's configuration: command line > environment > {} > default\n",
        loaded.path.as_ref().map_or_else(
            || "config file (none)".to_owned(),
            |p| p.display().to_string()
        )
    );
    section(&mut out, command, matches, &loaded.global);
    // serve's options as `memkv serve` would see them now (environment, file, defaults).
    let serve = command.clone().try_get_matches_from(["memkv", SERVE]).ok();
    if let (Some(serve), Some(sub)) = (serve, command.find_subcommand(SERVE)) {
        out.push_str("\n[serve]\n");
        if let Some(m) = serve.subcommand_matches(SERVE) {
            section(&mut out, sub, m, &loaded.serve);
        }
    }
    out
}

fn section(out: &mut String, command: &Command, matches: &ArgMatches, from_file: &[String]) {
    // In the order the options are declared (setting a default moves an option to the end).
    let declared = Cli::command();
    let declared = if command.get_name() == SERVE {
        declared
            .find_subcommand(SERVE)
            .expect("serve exists")
            .clone()
    } else {
        declared
    };
    let order: Vec<String> = declared
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect();
    let mut args: Vec<&clap::Arg> = command.get_arguments().collect();
    args.sort_by_key(|a| order.iter().position(|id| id == a.get_id().as_str()));
    for arg in args {
        let (Some(long), id) = (arg.get_long(), arg.get_id().as_str()) else {
            continue;
        };
        if matches!(id, "help" | "version" | "config") {
            continue;
        }
        let Ok(Some(raw)) = matches.try_get_raw(id) else {
            // memkv's own default, where the option's help states one.
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let default = help
                .split_once("[default: ")
                .and_then(|(_, rest)| rest.split_once(']'))
                .map(|(default, _)| default);
            let line = match default {
                Some(default) => format!("# {long} (not set: memkv's default, {default})\n"),
                None => format!("# {long} (unset)\n"),
            };
            out.push_str(&line);
            continue;
        };
        let values: Vec<String> = raw
            .map(|v| mask(id, &v.to_string_lossy()))
            .map(|v| format!("{v:?}"))
            .collect();
        let value = if values.len() == 1 {
            values[0].clone()
        } else {
            format!("[{}]", values.join(", "))
        };
        let source = match matches.value_source(id) {
            Some(ValueSource::CommandLine) => "command line".to_owned(),
            Some(ValueSource::EnvVariable) => format!(
                "environment: {}",
                arg.get_env()
                    .map_or_else(String::new, |e| e.to_string_lossy().into_owned())
            ),
            Some(ValueSource::DefaultValue) if from_file.iter().any(|f| f == id) => {
                "config file".to_owned()
            }
            _ => "default".to_owned(),
        };
        let _ = std::fmt::Write::write_fmt(out, format_args!("{long} = {value}  # {source}\n"));
    }
}

/// A value as `config show` prints it: a URL's password and anything named like a credential
/// masked.
fn mask(id: &str, value: &str) -> String {
    if id.ends_with("api_key") || id.contains("password") || id.contains("token") {
        return "********".to_owned();
    }
    if memkv::storage::is_postgres_url(value) {
        return memkv::storage::redact_url(value);
    }
    value.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_global_and_serve_option_has_its_own_environment_variable() {
        let command = with_env(Cli::command());
        command.clone().debug_assert();
        let mut names = std::collections::BTreeSet::new();
        let serve = command.find_subcommand(SERVE).unwrap().clone();
        for arg in command.get_arguments().chain(serve.get_arguments()) {
            if arg.get_long().is_none() || matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            let env = arg.get_env().unwrap_or_else(|| panic!("{}", arg.get_id()));
            let env = env.to_str().unwrap().to_owned();
            assert!(env.starts_with("MEMKV_"), "{env}");
            assert!(names.insert(env.clone()), "{env} twice");
        }
        assert!(names.contains("MEMKV_MAX_IN_FLIGHT") && names.contains("MEMKV_DB"));
    }

    #[test]
    fn the_config_flag_is_found_in_either_spelling() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            config_path(&args(&["memkv", "--config", "a.toml", "users"])),
            Some(PathBuf::from("a.toml"))
        );
        assert_eq!(
            config_path(&args(&["memkv", "serve", "--config=b.toml"])),
            Some(PathBuf::from("b.toml"))
        );
        assert_eq!(
            config_path(&args(&["memkv", "exec", "--", "--config", "c"])),
            std::env::var_os(CONFIG_ENV)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        );
    }
}
