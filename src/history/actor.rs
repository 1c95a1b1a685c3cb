//! Who made a change, as the history records it and as every face shows it (the memory-stores
//! API's actor object, [`ActorObject`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Who made a change (recorded when it happens, never updated).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Actor {
    /// A caller of `memkv serve`, by the id of its API key (`key_…`).
    ApiKey(String),
    /// An agent session: an MCP session, `memkv exec`, a tool session of an SDK adapter.
    Session(String),
    /// A person: the operator at the CLI (`user_id` is their login name).
    User(String),
}

impl Actor {
    /// The operator running a CLI command: `User(<login name>)`, or `User("operator")`.
    pub fn operator() -> Actor {
        let name = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .filter(|n| !n.is_empty() && n.len() <= 64 && !n.chars().any(char::is_control))
            .unwrap_or_else(|| "operator".to_owned());
        Actor::User(name)
    }

    /// The memory-stores API's actor object (`api_actor`, `session_actor`, `user_actor`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(ActorObject::from(self)).expect("an actor object serializes")
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::ApiKey(id) => write!(f, "api key {id}"),
            Actor::Session(id) => write!(f, "session {id}"),
            Actor::User(id) => write!(f, "user {id}"),
        }
    }
}

/// Who made a change: an API key, an agent session, or a person at the CLI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = Actor))]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ActorObject {
    /// A caller of `memkv serve`, by its API key's id.
    ApiActor {
        /// The key's id (`key_…`).
        api_key_id: String,
    },
    /// An agent session: an MCP session, `memkv exec`, a tool session of an SDK adapter.
    SessionActor {
        /// The session's id.
        session_id: String,
    },
    /// A person: the operator at the CLI.
    UserActor {
        /// Their login name.
        user_id: String,
    },
}

impl From<&Actor> for ActorObject {
    fn from(actor: &Actor) -> Self {
        match actor {
            Actor::ApiKey(id) => ActorObject::ApiActor {
                api_key_id: id.clone(),
            },
            Actor::Session(id) => ActorObject::SessionActor {
                session_id: id.clone(),
            },
            Actor::User(id) => ActorObject::UserActor {
                user_id: id.clone(),
            },
        }
    }
}
