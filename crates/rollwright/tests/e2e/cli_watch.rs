//! `rollwright rollout watch` driven in a pseudo-terminal (tmux): the screen shows the counts
//! per revision of a rollout frozen mid-way (scheduler stopped) and when done, and its keys
//! pause the rollout after a confirmation.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use crate::common;

use common::{DEADLINE, ROLLWRIGHT, Rig};
use nodesim::distribution::Distribution;
use serde_json::json;
use std::time::Duration;

/// A tmux server of the test's own (a socket per instance), running one command in a fixed-size
/// window; killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(command: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = format!("rollwright-test-{}-{n}", std::process::id());
        let status = std::process::Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-s",
                "watch",
                "-x",
                "120",
                "-y",
                "45",
                command,
            ])
            .status()
            .expect("tmux runs (apt-get install tmux)");
        assert!(status.success(), "tmux new-session failed");
        Tmux { socket }
    }

    fn capture(&self) -> String {
        let out = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "watch"])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        let status = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "watch", keys])
            .status()
            .expect("tmux send-keys");
        assert!(status.success());
    }

    fn alive(&self) -> bool {
        std::process::Command::new("tmux")
            .args(["-L", &self.socket, "has-session", "-t", "watch"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Reads the screen until it shows `want` (the terminal has no watch to wait on: it is
    /// read again every 100ms up to the deadline).
    async fn until(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        self.until_within(DEADLINE, what, want).await
    }

    /// [`Self::until`] with its own deadline.
    async fn until_within(
        &self,
        within: Duration,
        what: &str,
        want: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let screen = self.capture();
            if want(&screen) {
                return screen;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the screen never showed {what}; it shows:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_screen_shows_counts_per_revision_and_pauses_on_keys() {
    let nodes = nodesim::NodeSim {
        nodes: 3,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        ..Default::default()
    };
    let mut rig = Rig::start(nodes, "seed: 1\n").await;
    rig.start_scheduler_and_controllers();
    rig.apply(&json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            "template": {"metadata": {"labels": {"app": "agent"}},
                         "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}
        }
    }))
    .await;
    rig.c
        .rollwright(&["rollout", "status", "ds/agent", "--timeout", "60s"])
        .await;
    let command = format!(
        "env KUBECONFIG={} HOME={} {ROLLWRIGHT} rollout watch ds/agent",
        rig.c.kubeconfig().display(),
        rig.c.dir.path().display()
    );
    let tmux = Tmux::start(&command);
    tmux.until("revision 1 rolled out", |s| {
        s.contains("revision 1 (current): 3/3 updated, 3 ready, 3 available")
            && s.contains("nodes (3)")
    })
    .await;

    // Frozen mid-rollout: one old pod replaced by a new one that cannot be scheduled.
    rig.stop_scheduler().await;
    rig.c
        .rollwright(&["set", "image", "ds/agent", "agent=agent:2"])
        .await;
    let screen = tmux
        .until("the counts of both revisions", |s| {
            s.contains("revision 2 (current): 1/3 updated, 0 ready, 0 available")
                && s.contains("revision 1: 2 pods, 2 ready, 2 available")
        })
        .await;
    assert!(screen.contains("ds/agent revision 2"), "{screen}");
    assert!(
        screen.contains("◐ new pending 1") && screen.contains("○ old ready 2"),
        "{screen}"
    );

    rig.start_scheduler();
    let screen = tmux
        .until("revision 2 rolled out", |s| {
            s.contains("revision 2 (current): 3/3 updated, 3 ready, 3 available")
                && !s.contains("revision 1:")
                && s.contains(" rolled out ")
        })
        .await;
    assert!(
        screen.contains("rolled out") && screen.contains("● new ready 3"),
        "{screen}"
    );

    // p asks, y pauses.
    tmux.keys("p");
    tmux.until("the question", |s| {
        s.contains("Pause the rollout of ds/agent? y / n")
    })
    .await;
    tmux.keys("y");
    tmux.until("the pause done", |s| {
        s.contains("daemonset.apps/agent paused")
    })
    .await;
    // As JSON: the typed DaemonSet has no `paused` field to keep it in.
    let ds = rig
        .c
        .kubectl_json(&["get", "ds", "agent", "-o", "json"])
        .await;
    let by_annotation =
        ds.pointer("/metadata/annotations/rollwright.io~1paused") == Some(&json!("true"));
    let by_field = ds.pointer("/spec/updateStrategy/rollingUpdate/paused") == Some(&json!(true));
    assert!(by_annotation || by_field, "{ds}");

    tmux.keys("q");
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while tmux.alive() {
        assert!(tokio::time::Instant::now() < deadline, "q did not quit");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_on_a_terminal_is_a_live_progress_bar() {
    let nodes = nodesim::NodeSim {
        nodes: 3,
        start_delay: Distribution::Fixed(Duration::from_millis(100)),
        readiness_delay: Distribution::Fixed(Duration::from_millis(100)),
        ..Default::default()
    };
    let mut rig = Rig::start(nodes, "seed: 1\n").await;
    rig.start_scheduler_and_controllers();
    rig.kubectl(&[
        "create",
        "deployment",
        "web",
        "--image=nginx:1.27",
        "--replicas=3",
    ])
    .await;
    rig.c
        .rollwright(&["rollout", "status", "deploy/web", "--timeout", "60s"])
        .await;
    rig.stop_scheduler().await;
    rig.kubectl(&["set", "image", "deploy/web", "nginx=nginx:1.28"])
        .await;
    // The shell stays after the command ends, so the last screen can be read.
    let command = format!(
        "env KUBECONFIG={} HOME={} {ROLLWRIGHT} rollout status deploy/web; echo exit=$?; sleep 60",
        rig.c.kubeconfig().display(),
        rig.c.dir.path().display()
    );
    let tmux = Tmux::start(&command);
    let screen = tmux
        .until("the bar of revision 2", |s| {
            s.contains("deploy/web revision 2 [") && s.contains("0/3 available")
        })
        .await;
    assert!(
        screen.contains("revision 1: 3 pods (3 available, 0 terminating)"),
        "{screen}"
    );
    assert!(
        screen.contains("waiting for 1 pod of revision 2 to become available: web-"),
        "{screen}"
    );
    rig.start_scheduler();
    // A scheduler started again schedules the pending pod and the rollout ends; with the whole
    // suite running beside it on two cores this has taken more than the usual deadline.
    let screen = tmux
        .until_within(3 * DEADLINE, "the end", |s| s.contains("exit=0"))
        .await;
    // The bar is gone; kubectl's closing line stays.
    assert!(
        screen.contains("deployment \"web\" successfully rolled out"),
        "{screen}"
    );
    assert!(!screen.contains("available  "), "{screen}");
    rig.stop().await;
}
