//! Elections against a real API server (in-process): one leader at a time; a crashed leader's
//! Lease is taken over once it expires; a leader that shuts down hands over at once.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use leader::{Config, Elector, Ended};
use tokio::sync::{oneshot, watch};

/// Short timings, in the same proportions as the defaults.
fn config() -> Config {
    Config {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1200),
        retry_period: Duration::from_millis(200),
    }
}

/// Who leads now, and the most that ever led at once.
#[derive(Clone)]
struct Board {
    leader: watch::Sender<Option<String>>,
    active: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

/// Counts a leader in while it lives.
struct Term(Arc<AtomicUsize>);

impl Drop for Term {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Board {
    fn new() -> Board {
        Board {
            leader: watch::channel(None).0,
            active: Arc::default(),
            most: Arc::default(),
        }
    }

    /// Starts a candidate whose work marks it leader until it is dropped; the sender stops it
    /// cleanly, aborting the task is a crash.
    fn candidate(
        &self,
        client: kube::Client,
        name: &str,
    ) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Ended>) {
        let elector = Elector::new(client, "default", "controllers", name, config()).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let board = self.clone();
        let name = name.to_owned();
        let task = tokio::spawn(elector.run(stopped, move || {
            let (board, name) = (board.clone(), name.clone());
            async move {
                let now = board.active.fetch_add(1, Ordering::SeqCst) + 1;
                board.most.fetch_max(now, Ordering::SeqCst);
                let _term = Term(board.active.clone());
                board.leader.send_replace(Some(name));
                std::future::pending::<()>().await;
            }
        }));
        (stop, task)
    }

    async fn wait_for_leader(&self, want: impl Fn(&str) -> bool) -> String {
        let mut rx = self.leader.subscribe();
        let got = tokio::time::timeout(
            Duration::from_secs(30),
            rx.wait_for(|l| l.as_deref().is_some_and(&want)),
        )
        .await
        .expect("a leader within the deadline")
        .unwrap();
        got.clone().unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_hand_over_on_crash_and_on_shutdown() {
    let server = embedded::Embedded::memory().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    let board = Board::new();
    let (stop_a, task_a) = board.candidate(server.client(), "a");
    let (stop_b, task_b) = board.candidate(server.client(), "b");

    let first = board.wait_for_leader(|_| true).await;
    let lease = leases.get("controllers").await.unwrap();
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(first.as_str()));
    assert_eq!(spec.lease_duration_seconds, Some(2));
    assert_eq!(spec.lease_transitions, Some(0));

    // The leader crashes (no release): the other takes over once the Lease expires.
    let (crashed, survivor, stop_survivor, survivor_task) = if first == "a" {
        task_a.abort();
        drop(stop_a);
        ("a", "b", stop_b, task_b)
    } else {
        task_b.abort();
        drop(stop_b);
        ("b", "a", stop_a, task_a)
    };
    let second = board.wait_for_leader(|l| l != crashed).await;
    assert_eq!(second, survivor);
    let spec = leases.get("controllers").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(survivor));
    assert_eq!(spec.lease_transitions, Some(1));

    // A new candidate waits while the survivor leads, then takes over when it shuts down cleanly
    // (the Lease released, not left to expire).
    let (stop_c, task_c) = board.candidate(server.client(), "c");
    stop_survivor.send(()).unwrap();
    assert_eq!(survivor_task.await.unwrap(), Ended::Shutdown);
    assert_eq!(board.wait_for_leader(|l| l == "c").await, "c");
    let spec = leases.get("controllers").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("c"));
    assert_eq!(spec.lease_transitions, Some(2));

    stop_c.send(()).unwrap();
    assert_eq!(task_c.await.unwrap(), Ended::Shutdown);
    let spec = leases.get("controllers").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity, None, "released on shutdown");
    assert_eq!(board.most.load(Ordering::SeqCst), 1, "never two leaders");
}

/// The bound for a killed leader: its standby leads within the lease duration of the kill,
/// not up to two jittered polls later (client-go's ~20 s at the default 15 s). The kill comes just
/// after a renewal, the worst moment, and the retry period is long beside the lease, so a standby
/// that only polled would overrun the bound by up to two of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_within_the_lease_duration_of_a_kill() {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};

    let config = Config {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_secs(2),
    };
    let server = embedded::Embedded::memory().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(server.client(), "default");
    let board = Board::new();
    let mut tasks = std::collections::HashMap::new();
    for name in ["a", "b"] {
        let elector = Elector::new(
            server.client(),
            "default",
            "controllers",
            name,
            config.clone(),
        )
        .unwrap();
        let (board, identity) = (board.clone(), name.to_owned());
        let task = tokio::spawn(elector.run(std::future::pending::<()>(), move || {
            let (board, identity) = (board.clone(), identity.clone());
            async move {
                board.leader.send_replace(Some(identity));
                std::future::pending::<()>().await;
            }
        }));
        tasks.insert(name.to_owned(), task);
    }
    let first = board.wait_for_leader(|_| true).await;

    // Watch for the leader's next renewal (its record changes with the holder unchanged), then kill
    // it at once.
    let fields = watcher::Config::default().fields("metadata.name=controllers");
    let mut records = std::pin::pin!(watcher(leases.clone(), fields).applied_objects());
    let mut renewals = 0;
    let mut last = None;
    while renewals < 2 {
        let lease = tokio::time::timeout(Duration::from_secs(30), records.next())
            .await
            .expect("a renewal within the deadline")
            .unwrap()
            .unwrap();
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some(first.as_str()));
        if last.is_some_and(|renewed| spec.renew_time.as_ref() != Some(&renewed)) {
            renewals += 1;
        }
        last = spec.renew_time;
    }
    tasks[&first].abort();
    let killed = tokio::time::Instant::now();

    let second = board.wait_for_leader(|l| l != first).await;
    let took = killed.elapsed();
    println!("the standby {second} led {took:?} after the kill");
    assert!(
        took <= config.lease_duration + Duration::from_secs(1),
        "the standby took over {took:?} after the kill; the lease is {:?}",
        config.lease_duration
    );
    let spec = leases.get("controllers").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(second.as_str()));
    for task in tasks.values() {
        task.abort();
    }
}
