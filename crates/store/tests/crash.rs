//! An acknowledged write survives `kill -9`, and a torn batch is never visible.
//!
//! A child process (`store-crash-writer`) creates keys from many tasks and prints each key once its
//! create is acknowledged; this test kills it with SIGKILL after a few thousand acknowledgements,
//! reopens the store and checks every acknowledged key is there with its whole value.

#![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

use std::{
    io::{BufRead, BufReader, Read},
    os::unix::process::ExitStatusExt,
    process::{Command, Stdio},
};

use bytes::Bytes;
use store::{
    Store,
    sqlite::{SqliteOptions, SqliteStore},
};

const ACKS_BEFORE_KILL: usize = 3000;

/// Must equal `value_for` in `src/bin/store-crash-writer.rs`.
fn value_for(key: &str) -> Bytes {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    Bytes::from(key.repeat(1 + (hash % 64) as usize))
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_store-crash-writer"))
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut acked = Vec::new();
    let mut line = String::new();
    while acked.len() < ACKS_BEFORE_KILL {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "writer exited early: {:?}",
            child.wait()
        );
        acked.push(line.trim_end().to_owned());
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "writer was not killed but ended: {status}"
    );
    // Acknowledgements still in the pipe count too; a line cut short by the kill does not.
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    acked.extend(
        rest.split_inclusive('\n')
            .filter_map(|line| line.strip_suffix('\n'))
            .map(str::to_owned),
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::open(&path, SqliteOptions::default()).unwrap();
        for key in &acked {
            let kv = store.get(key).await.unwrap();
            let kv = kv.unwrap_or_else(|| panic!("acknowledged {key} is missing"));
            assert_eq!(kv.value, value_for(key), "{key}");
            assert_eq!(kv.create_revision, kv.mod_revision, "{key}");
        }
        // Only creates were written, so the stored revision counts exactly the keys: the revision
        // and the rows of every batch were committed together or not at all.
        let (kvs, revision) = store.list("/crash/").await.unwrap();
        assert!(kvs.len() >= acked.len());
        assert_eq!(kvs.len() as u64, revision);
        assert_eq!(store.revision(), revision);
        for kv in &kvs {
            assert_eq!(kv.value, value_for(&kv.key), "{}", kv.key);
        }
        let after = store
            .create("/after-crash", Bytes::from_static(b"ok"))
            .await
            .unwrap();
        assert_eq!(after.mod_revision, revision + 1);
        assert_eq!(store.get("/after-crash").await.unwrap(), Some(after));
        eprintln!(
            "{} acknowledged before the kill, {} keys after reopen",
            acked.len(),
            kvs.len()
        );
    });
}
