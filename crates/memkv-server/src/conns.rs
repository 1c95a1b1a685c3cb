//! The open connections: at most `max_connections`, each holding a place while it is open.
//! When every place is taken, the connection that has been open longest with no request in
//! flight is closed to admit the new one, so connections that sit idle (or never send a byte)
//! cannot keep a real client out; when none is idle, the new connection waits for a place.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The places, and who holds them.
#[derive(Debug)]
pub(crate) struct Connections {
    places: Arc<Semaphore>,
    table: Arc<Mutex<Table>>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    /// By age: the lowest id is the oldest connection.
    open: BTreeMap<u64, Entry>,
}

#[derive(Debug)]
struct Entry {
    busy: Arc<AtomicUsize>,
    close: Arc<Notify>,
}

/// One connection's place; given back when dropped.
#[derive(Debug)]
pub(crate) struct Place {
    id: u64,
    busy: Arc<AtomicUsize>,
    close: Arc<Notify>,
    table: Arc<Mutex<Table>>,
    _permit: OwnedSemaphorePermit,
}

impl Connections {
    pub(crate) fn new(max: usize) -> Self {
        Connections {
            places: Arc::new(Semaphore::new(max.max(1))),
            table: Arc::default(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a connection just accepted: a free one, else the one an idle connection is
    /// told to give up (it closes and gives it back), else the next one given back.
    pub(crate) async fn admit(&self) -> Place {
        let permit = match Arc::clone(&self.places).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if let Some(close) = self.idle() {
                    close.notify_one();
                }
                Arc::clone(&self.places)
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        let mut table = self.table();
        let id = table.next;
        table.next += 1;
        let (busy, close) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        table.open.insert(
            id,
            Entry {
                busy: Arc::clone(&busy),
                close: Arc::clone(&close),
            },
        );
        Place {
            id,
            busy,
            close,
            table: Arc::clone(&self.table),
            _permit: permit,
        }
    }

    /// The oldest open connection with no request in flight.
    fn idle(&self) -> Option<Arc<Notify>> {
        self.table()
            .open
            .values()
            .find(|e| e.busy.load(Ordering::SeqCst) == 0)
            .map(|e| Arc::clone(&e.close))
    }
}

impl Place {
    /// Counts a request in flight on this connection until the guard is dropped.
    pub(crate) fn request(busy: &Arc<AtomicUsize>) -> Busy {
        busy.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(busy))
    }

    /// The counter of requests in flight, for the connection's service.
    pub(crate) fn busy(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.busy)
    }

    /// Completes when this connection is asked to give up its place, at a moment it has no
    /// request in flight (a request that arrived since the ask keeps it open).
    pub(crate) async fn closing(&self) {
        loop {
            self.close.notified().await;
            if self.busy.load(Ordering::SeqCst) == 0 {
                return;
            }
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .open
            .remove(&self.id);
    }
}

/// A request in flight (see [`Place::request`]).
#[derive(Debug)]
pub(crate) struct Busy(Arc<AtomicUsize>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn at_the_limit_the_oldest_idle_connection_gives_way() {
        let c = Connections::new(2);
        let old = c.admit().await;
        let busy = c.admit().await;
        let _request = Place::request(&busy.busy());
        // Both places are held: the third waits until the idle one (not the busy one) closes.
        let third = tokio::spawn(async move { c.admit().await });
        tokio::time::timeout(Duration::from_secs(5), old.closing())
            .await
            .expect("the idle connection was asked to close");
        assert!(!third.is_finished());
        drop(old);
        let place = tokio::time::timeout(Duration::from_secs(5), third)
            .await
            .expect("admitted once a place was given back")
            .unwrap();
        assert_eq!(place.id, 2);
    }
}
