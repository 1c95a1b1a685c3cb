//! A write in one call of `pg_temp.memkv_write` ([`super::write_fn`]): the commit of a
//! transaction whose every read the memo answered, with binary parameters, which also says
//! which assumption goes with which key stored, so that the server looks each key up once.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use super::cache::CacheKey;
use super::session::{Session, final_state};
use crate::error::Error;

impl Session {
    /// The whole transaction (store locks, the check of what was assumed, removals, stores) as
    /// one call of `pg_temp.memkv_write` (`write_function`), in place of the prologue and
    /// the statements `run` would send: the same effect, with binary parameters. The call is
    /// its own transaction: once the server has answered, none is left open.
    pub(super) fn commit_in_one_call(&mut self, call: &postgres::Statement) -> Result<(), Error> {
        self.prologue = None;
        let checks = std::mem::take(&mut self.unchecked);
        let dirty = std::mem::take(&mut self.dirty);
        let (puts, removes) = final_state(&self.cache, &dirty);
        // Which assumption goes with which key stored (`write_function`): a key assumed
        // absent is inserted (as is a key made new), and with `MERGE` a key assumed to hold a
        // value is updated only if it does; every other assumption is checked first.
        let merge = self.shared.merge.load(Ordering::Relaxed);
        let mut assumed: HashMap<&CacheKey, Option<&Option<Vec<u8>>>> =
            puts.iter().map(|(k, _)| (*k, None)).collect();
        let mut first = Vec::new();
        for (k, v) in &checks {
            match assumed.get_mut(k) {
                Some(slot @ None) if v.is_none() || merge => *slot = Some(v),
                _ => first.push((k, v)),
            }
        }
        let mut inserts = Vec::new();
        let mut stores = Vec::new();
        for (k, value) in &puts {
            match assumed[k] {
                Some(None) => inserts.push((*k, *value)),
                None if self.fresh.contains(*k) => inserts.push((*k, *value)),
                Some(Some(old)) => stores.push((*k, *value, Some(old.as_slice()))),
                None => stores.push((*k, *value, None)),
            }
        }
        let lock: Vec<&[u8]> = self.locked.iter().map(|u| u.as_bytes()).collect();
        let c_store: Vec<&[u8]> = first.iter().map(|(k, _)| k.1.as_bytes()).collect();
        let c_space: Vec<i16> = first.iter().map(|(k, _)| i16::from(k.0)).collect();
        let c_key: Vec<&[u8]> = first.iter().map(|(k, _)| k.2.as_slice()).collect();
        let c_value: Vec<Option<&[u8]>> = first.iter().map(|(_, v)| v.as_deref()).collect();
        let d_store: Vec<&[u8]> = removes.iter().map(|k| k.1.as_bytes()).collect();
        let d_space: Vec<i16> = removes.iter().map(|k| i16::from(k.0)).collect();
        let d_key: Vec<&[u8]> = removes.iter().map(|k| k.2.as_slice()).collect();
        let i_store: Vec<&[u8]> = inserts.iter().map(|(k, _)| k.1.as_bytes()).collect();
        let i_space: Vec<i16> = inserts.iter().map(|(k, _)| i16::from(k.0)).collect();
        let i_key: Vec<&[u8]> = inserts.iter().map(|(k, _)| k.2.as_slice()).collect();
        let i_value: Vec<&[u8]> = inserts.iter().map(|(_, v)| *v).collect();
        let p_store: Vec<&[u8]> = stores.iter().map(|(k, ..)| k.1.as_bytes()).collect();
        let p_space: Vec<i16> = stores.iter().map(|(k, ..)| i16::from(k.0)).collect();
        let p_key: Vec<&[u8]> = stores.iter().map(|(k, ..)| k.2.as_slice()).collect();
        let p_value: Vec<&[u8]> = stores.iter().map(|(_, v, _)| *v).collect();
        let p_old: Vec<Option<&[u8]>> = stores.iter().map(|(.., old)| *old).collect();
        let p_check: Vec<bool> = stores.iter().map(|(.., old)| old.is_some()).collect();
        let log = std::mem::take(&mut self.log);
        let log: Vec<&[u8]> = log.iter().map(Vec::as_slice).collect();
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::storage("the connection was lost"))?;
        let answer = conn.client().execute(
            call,
            &[
                &lock, &c_store, &c_space, &c_key, &c_value, &d_store, &d_space, &d_key, &i_store,
                &i_space, &i_key, &i_value, &p_store, &p_space, &p_key, &p_value, &p_old, &p_check,
                &log,
            ],
        );
        drop((puts, removes, first, inserts, stores));
        self.fresh.clear();
        self.written.extend(dirty);
        match answer {
            Ok(_) => Ok(()),
            Err(e) => {
                // A key inserted was there all the same: an assumption that did not hold.
                let present = e
                    .as_db_error()
                    .is_some_and(|db| *db.code() == postgres::error::SqlState::UNIQUE_VIOLATION);
                if e.as_db_error().is_some() {
                    // The server ended the call's transaction itself.
                    self.begun = false;
                }
                let err = self.failed(e);
                self.stale |= present;
                Err(err)
            }
        }
    }
}
