//! Who runs beside whom on this host: every local attempt and every check takes a
//! seat for as long as it runs (prepare, process, hashing). A step that runs alone
//! ([`crate::plan::Step::runs_alone`]) takes the host's one exclusive seat: it waits
//! until nothing else of the run is seated, and nothing else is seated until it
//! leaves. Measurements are taken the way asv and hyperfine take them, never beside
//! other work of the same tool (on 2 cores a pytest step beside a benchmark moved
//! its median by 40% and its dispersion to 40–55%: docs/benchmarks.md).
//!
//! A seat also tells afterwards whether anything else ran while it was held, so the
//! record says of every attempt whether it ran alone, measured, not assumed.
//!
//! The lock is tokio's fair `RwLock`: a waiting exclusive seat holds back seats asked
//! for after it, so a stream of short steps cannot starve a measurement, and
//! exclusive seats are granted in the order they were asked for.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// The run's seats on this host.
#[derive(Debug, Default)]
pub(crate) struct Seats {
    lock: Arc<RwLock<()>>,
    taken: Arc<Mutex<Taken>>,
}

/// Seats held now: each with whether anything ran beside it since it was taken.
#[derive(Debug, Default)]
struct Taken {
    next: u64,
    shared: BTreeMap<u64, bool>,
}

/// A held seat; leaving it (drop) frees it.
#[derive(Debug)]
pub(crate) struct Seat {
    id: u64,
    taken: Arc<Mutex<Taken>>,
    _guard: Guard,
}

#[derive(Debug)]
enum Guard {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

impl Seats {
    /// Wait for a seat: the exclusive one when `alone`, else one beside others.
    pub(crate) async fn take(&self, alone: bool) -> Seat {
        let guard = if alone {
            Guard::Alone(Arc::clone(&self.lock).write_owned().await)
        } else {
            Guard::Shared(Arc::clone(&self.lock).read_owned().await)
        };
        let mut t = lock(&self.taken);
        let id = t.next;
        t.next += 1;
        let beside = !t.shared.is_empty();
        for s in t.shared.values_mut() {
            *s |= beside;
        }
        t.shared.insert(id, beside);
        drop(t);
        Seat {
            id,
            taken: Arc::clone(&self.taken),
            _guard: guard,
        }
    }
}

impl Seat {
    /// Whether nothing else of the run held a seat at any time while this one was
    /// held (so far).
    pub(crate) fn alone(&self) -> bool {
        !lock(&self.taken)
            .shared
            .get(&self.id)
            .copied()
            .unwrap_or(true)
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        lock(&self.taken).shared.remove(&self.id);
    }
}

/// The bookkeeping is a few map operations that cannot panic halfway: a poisoned
/// lock still holds consistent data.
fn lock(m: &Mutex<Taken>) -> std::sync::MutexGuard<'_, Taken> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn an_exclusive_seat_waits_for_the_others_and_holds_them_back() {
        let seats = Arc::new(Seats::default());
        let a = seats.take(false).await;
        let b = seats.take(false).await;
        assert!(
            !a.alone() && !b.alone(),
            "two shared seats ran beside each other"
        );
        let s = Arc::clone(&seats);
        let mut excl = tokio::spawn(async move { s.take(true).await });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!excl.is_finished(), "it waits while others are seated");
        // A seat asked for after the exclusive one waits behind it (fair).
        let s = Arc::clone(&seats);
        let mut later = tokio::spawn(async move { s.take(false).await });
        drop(a);
        drop(b);
        let e = (&mut excl).await.unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(
            !later.is_finished(),
            "nothing is seated beside an exclusive seat"
        );
        assert!(e.alone());
        drop(e);
        let l = (&mut later).await.unwrap();
        assert!(l.alone(), "alone once the exclusive seat left");
    }

    #[tokio::test]
    async fn a_seat_that_someone_joined_did_not_run_alone() {
        let seats = Seats::default();
        let a = seats.take(false).await;
        assert!(a.alone());
        let b = seats.take(false).await;
        drop(b);
        assert!(!a.alone(), "b ran beside a for a while");
    }
}
