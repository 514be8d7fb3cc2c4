//! Helper for the crash test (`tests/crash.rs`): opens a [`SqliteStore`] at the path given as the
//! only argument and creates keys from many concurrent tasks, printing each key on its own line
//! once its create is acknowledged. The test kills it with SIGKILL mid-stream and then checks that
//! every printed key survived, so a line must never be printed before the write returned.
//!
//! The value of a key is [`value_for`] of it; `tests/crash.rs` keeps a copy of that function.

use std::{
    error::Error,
    io::Write,
    path::PathBuf,
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use store::{
    Store,
    sqlite::{SqliteOptions, SqliteStore},
};

const TASKS: usize = 32;
/// An upper bound, so an orphaned writer stops on its own.
const WRITES_PER_TASK: usize = 100_000;

/// The value written under `key`: the key repeated 1 to 64 times (by an FNV-1a hash of the key),
/// so values differ in size and a torn or misplaced value cannot pass for the right one.
fn value_for(key: &str) -> Bytes {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    Bytes::from(key.repeat(1 + (hash % 64) as usize))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn Error + Send + Sync>> {
    let path: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: store-crash-writer PATH")?
        .into();
    let store = Arc::new(SqliteStore::open(&path, SqliteOptions::default())?);
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let store = Arc::clone(&store);
            let stdout = Arc::clone(&stdout);
            tokio::spawn(async move {
                for i in 0..WRITES_PER_TASK {
                    let key = format!("/crash/{task}/{i}");
                    store.create(&key, value_for(&key)).await?;
                    // A failed print means the test is gone (closed pipe): stop.
                    let mut out = stdout.lock().map_err(|_| "stdout lock poisoned")?;
                    writeln!(out, "{key}")?;
                    out.flush()?;
                }
                Ok::<_, Box<dyn Error + Send + Sync>>(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}
