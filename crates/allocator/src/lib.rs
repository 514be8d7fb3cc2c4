//! mimalloc's settings for a long-running rollwright process.
//!
//! mimalloc hands memory it has not used for a while back to the OS (`purge_delay`, one second
//! by default). A rollout frees and allocates in waves a few seconds apart, so each wave found
//! its pages handed back and faulted them in again, the kernel zeroing every one (2 MiB at a
//! time where transparent huge pages back the heap): 10% of `rollwright bench phases`' CPU was
//! `clear_page_erms` under mimalloc's fresh-page path. Keeping freed memory for ten seconds
//! keeps it across waves, and still returns it to the OS once the cluster is quiet. Measured in
//! BENCHMARKS.md (session 14): page faults 5,700-7,800 -> about 2,450 per run, system time
//! 2.6-3.0 -> 1.8-1.9 s, peak RSS unchanged.

use std::{ffi::c_long, time::Duration};

/// How long mimalloc keeps memory that is no longer used before returning it to the OS.
pub const PURGE_DELAY: Duration = Duration::from_secs(10);

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (mimalloc.h, v3: the sixteenth option,
/// after `mi_option_deprecated_eager_commit_delay`), which libmimalloc-sys does not name.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// The environment variables through which mimalloc lets a user set the delay; when one is
/// set, the user's value stands.
const PURGE_DELAY_ENV: [&str; 2] = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];

/// Applies [`PURGE_DELAY`], unless the environment sets mimalloc's purge delay. Call it first
/// thing in `main`, before any other thread starts: mimalloc's options are plain variables,
/// read without synchronisation by every thread that frees memory.
pub fn configure() {
    if set_by_environment() {
        return;
    }
    let millis = c_long::try_from(PURGE_DELAY.as_millis()).unwrap_or(c_long::MAX);
    set_option(MI_OPTION_PURGE_DELAY, millis);
}

/// Whether the user set the purge delay through mimalloc's environment variables.
fn set_by_environment() -> bool {
    PURGE_DELAY_ENV
        .iter()
        .any(|name| std::env::var_os(name).is_some())
}

#[allow(unsafe_code)]
fn set_option(option: libmimalloc_sys::mi_option_t, value: c_long) {
    // SAFETY: `mi_option_set` takes plain integers and bounds-checks the option index; callers
    // run before other threads exist (see `configure`), so no thread reads the option meanwhile.
    unsafe { libmimalloc_sys::mi_option_set(option, value) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(unsafe_code)]
    fn purge_delay_millis() -> c_long {
        // SAFETY: `mi_option_get` takes a plain integer and bounds-checks the option index.
        unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
    }

    /// The index names the purge delay: mimalloc's default for it (1,000 ms in v3) is what the
    /// option reads before it is set, and it reads the new value after.
    #[test]
    fn the_option_index_is_mimallocs_purge_delay() {
        if set_by_environment() {
            return;
        }
        assert_eq!(purge_delay_millis(), 1_000);
        configure();
        assert_eq!(purge_delay_millis(), 10_000);
    }
}
