//! mimalloc's settings for a long-running rollwright process.
//!
//! - **Purge delay.** mimalloc hands memory it has not used for a while back to the OS
//!   (`purge_delay`, one second by default). A rollout frees and allocates in waves a few seconds
//!   apart, so each wave found its pages handed back and faulted them in again, the kernel zeroing
//!   every one (2 MiB at a time where transparent huge pages back the heap): 10% of `rollwright
//!   bench phases`' CPU was `clear_page_erms` under mimalloc's fresh-page path. Keeping freed
//!   memory for ten seconds keeps it across waves, and still returns it to the OS once the
//!   cluster is quiet. Measured in BENCHMARKS.md (session 14): page faults 5,700-7,800 -> about
//!   2,450 per run, system time 2.6-3.0 -> 1.8-1.9 s, peak RSS unchanged.
//! - **No transparent huge pages.** mimalloc asks the kernel for huge pages on its arenas
//!   (`allow_thp`). The heap is many small objects (JSON trees, cached pods), so a huge page
//!   mostly holds memory nobody uses yet, and the kernel zeroes all 2 MiB of it on first touch:
//!   on the benchmark machine that was still 9% of `bench phases`' CPU after the purge delay.
//!   Without them (BENCHMARKS.md, session 16): system time 2.2-2.4 -> 1.5-1.6 s, whole-process
//!   CPU -6%, peak RSS 45-60 MiB lower per phase.

use std::{ffi::c_long, time::Duration};

/// How long mimalloc keeps memory that is no longer used before returning it to the OS.
pub const PURGE_DELAY: Duration = Duration::from_secs(10);

/// One of mimalloc's options, as rollwright sets it.
struct Setting {
    /// Its index in mimalloc's `mi_option_e` (mimalloc.h, v3), which libmimalloc-sys does not
    /// name.
    option: libmimalloc_sys::mi_option_t,
    value: c_long,
    /// The environment variables through which mimalloc lets a user set it; when one is set,
    /// the user's value stands.
    environment: &'static [&'static str],
}

/// `mi_option_purge_delay`: the sixteenth option, after
/// `mi_option_deprecated_eager_commit_delay`.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// `mi_option_allow_thp`: after `mi_option_page_cross_thread_max_reclaim`.
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

fn settings() -> [Setting; 2] {
    [
        Setting {
            option: MI_OPTION_PURGE_DELAY,
            value: c_long::try_from(PURGE_DELAY.as_millis()).unwrap_or(c_long::MAX),
            environment: &["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"],
        },
        Setting {
            option: MI_OPTION_ALLOW_THP,
            value: 0,
            environment: &["MIMALLOC_ALLOW_THP"],
        },
    ]
}

/// Applies the settings, each unless the environment sets it. Call it first thing in `main`,
/// before any other thread starts: mimalloc's options are plain variables, read without
/// synchronisation by every thread that allocates or frees memory.
pub fn configure() {
    for setting in settings() {
        if !set_by_environment(&setting) {
            set_option(setting.option, setting.value);
            if setting.option == MI_OPTION_ALLOW_THP {
                no_huge_pages();
            }
        }
    }
}

/// Turns transparent huge pages off for the whole process, as mimalloc itself does when
/// `MIMALLOC_ALLOW_THP=0` is set before it starts. Setting the option from `main` is too late
/// for the arena mimalloc reserved (and advised for huge pages) at the first allocation, before
/// `main`; the kernel's per-process switch covers that arena too, since it is checked at every
/// fault.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn no_huge_pages() {
    // SAFETY: `prctl` with `PR_SET_THP_DISABLE` takes plain integers and touches no memory of
    // ours. It fails only on kernels without the switch, where huge pages then stay as they were.
    let _ = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
}

#[cfg(not(target_os = "linux"))]
fn no_huge_pages() {}

/// Whether the user set `setting` through mimalloc's environment variables.
fn set_by_environment(setting: &Setting) -> bool {
    setting
        .environment
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
    fn get(option: libmimalloc_sys::mi_option_t) -> c_long {
        // SAFETY: `mi_option_get` takes a plain integer and bounds-checks the option index.
        unsafe { libmimalloc_sys::mi_option_get(option) }
    }

    /// The indices name the options meant: mimalloc's defaults for them (a purge delay of
    /// 1,000 ms and huge pages allowed, in v3) are what they read before they are set, and they
    /// read the new values after.
    #[test]
    fn the_option_indices_are_mimallocs_purge_delay_and_huge_pages() {
        if settings().iter().any(set_by_environment) {
            return;
        }
        assert_eq!(get(MI_OPTION_PURGE_DELAY), 1_000);
        assert_eq!(get(MI_OPTION_ALLOW_THP), 1);
        configure();
        assert_eq!(get(MI_OPTION_PURGE_DELAY), 10_000);
        assert_eq!(get(MI_OPTION_ALLOW_THP), 0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: as in `no_huge_pages`; this reads the switch.
            #[allow(unsafe_code)]
            let disabled = unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
            assert_eq!(disabled, 1, "huge pages are off for the process");
        }
    }
}
