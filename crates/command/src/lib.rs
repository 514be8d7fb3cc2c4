//! What a container's command plainly says about how long it runs, how it ends and what it
//! prints.
//!
//! A simulated kubelet runs no processes, but many commands state their outcome outright:
//! `sleep 300`, `sh -c "sleep 10; exit 1"`, `/bin/false`, `agnhost pause`, upstream's Job
//! fixtures (`exit $(( $RANDOM / 16384 ))`, `if [[ -r /data/foo ]] ; then exit 0 ; else touch
//! /data/foo ; exit 1 ; fi`). Honouring them is what lets a test keep a Job's pod running, or make
//! it fail, the way it would on a real node. A [`Program`] is read from the container spec once;
//! each run of the container [`Program::run`]s it on simulated time (a `sleep` adds to the run's
//! length, nothing waits) and reports a [`Run`], or `None` when the command is beyond what the
//! simulator interprets (see `shell` and `eval` for the exact subset), in which case the container
//! keeps the fault profile's behaviour.
//!
//! What a run prints (`echo`, `printf`, `pwd`, unless redirected to a file) is kept with the
//! time it was printed at, so the API server can answer `pods/log` for a simulated container
//! from its spec alone ([`Program::transcript`]); anything else prints nothing here.
//!
//! Files are modelled only as far as such scripts need them: a file made in an `emptyDir` lasts
//! as long as the pod (so a container restarted in place sees it), one made under a `hostPath`
//! lasts as long as the simulator and is seen by every pod on the node (a simulated host starts
//! with no files), one made elsewhere lasts for the run. A run's file changes all happen when it
//! starts. Reading what the simulator cannot know (the image's files, a ConfigMap volume, an
//! environment variable from a Secret) makes the command uninterpreted.

mod eval;
mod shell;
#[cfg(test)]
mod tests;

use eval::{End, Fs, Mount, Storage, normalize};
use k8s_openapi::api::core::v1::{Container, Pod};
use rand::RngCore;
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    time::Duration,
};

/// How one run of a container goes, as its command states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Run {
    /// It exits with `code` after `after`.
    Exits {
        /// How long it runs.
        after: Duration,
        /// Its exit code.
        code: i32,
    },
    /// It runs until it is killed.
    Forever,
}

/// The files runs of a pod's containers see: the pod's volumes and the node's host paths.
pub struct Files<'a> {
    /// The pod's (`emptyDir`) files.
    pub pod: &'a mut HashSet<String>,
    /// The node's (`hostPath`) files.
    pub node: &'a mut HashSet<String>,
}

/// A container's command, with what it needs to run: the environment variables whose values
/// are known and the volumes it mounts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    mounts: Vec<Mount>,
}

/// Images whose entrypoint is empty, so `args` alone are the command line.
fn no_entrypoint(image: &str) -> bool {
    let name = image.rsplit('/').next().unwrap_or(image);
    let name = name.split([':', '@']).next().unwrap_or(name);
    name == "busybox"
}

/// agnhost's entrypoint is the agnhost binary: `args` name a subcommand.
fn is_agnhost(image: &str) -> bool {
    let name = image.rsplit('/').next().unwrap_or(image);
    name.split([':', '@']).next() == Some("agnhost")
}

/// The value of a downward-API field reference, where the pod spec says it.
fn field_value(pod: &Pod, path: &str) -> Option<String> {
    let meta = &pod.metadata;
    let keyed = |prefix: &str, map: Option<&BTreeMap<String, String>>| {
        let key = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(map?.get(key).cloned().unwrap_or_default())
    };
    match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => pod.spec.as_ref()?.node_name.clone(),
        "spec.serviceAccountName" => pod.spec.as_ref()?.service_account_name.clone(),
        _ => keyed("metadata.annotations['", meta.annotations.as_ref())
            .or_else(|| keyed("metadata.labels['", meta.labels.as_ref())),
    }
}

/// Expands the kubelet's `$(VAR)` references in a command, argument or variable value; `None`
/// if one names a variable whose value is unknown here (it is substituted, with what we cannot
/// say). A reference to a variable that is not defined stays as written, as the kubelet leaves it.
fn expand_references(
    s: &str,
    env: &BTreeMap<String, String>,
    unknown: &dyn Fn(&str) -> bool,
) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            // `$$` is a literal `$`.
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match env.get(name) {
                Some(v) => out.push_str(v),
                None if unknown(name) => return None,
                None => out.push_str(&rest[at..at + 3 + end]),
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Some(out)
}

/// `raw` with the kubelet's `$(VAR)` references expanded, and the environment whose values are
/// known; `None` if a reference names a variable whose value is unknown.
fn expand(
    raw: &[String],
    container: &Container,
    pod: &Pod,
) -> Option<(Vec<String>, BTreeMap<String, String>)> {
    // Variables from ConfigMaps and Secrets (`envFrom`) may define any name.
    let from_elsewhere = container.env_from.as_ref().is_some_and(|e| !e.is_empty());
    let mut env = BTreeMap::new();
    let mut unknown = HashSet::new();
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => {
                let is_unknown = |n: &str| from_elsewhere || unknown.contains(n);
                expand_references(v, &env, &is_unknown)
            }
            (None, Some(from)) => from
                .field_ref
                .as_ref()
                .and_then(|f| field_value(pod, &f.field_path)),
            (None, None) => Some(String::new()),
        };
        match value {
            Some(v) => {
                unknown.remove(&var.name);
                env.insert(var.name.clone(), v);
            }
            None => {
                env.remove(&var.name);
                unknown.insert(var.name.clone());
            }
        }
    }
    let is_unknown = |n: &str| from_elsewhere || unknown.contains(n);
    let argv = raw
        .iter()
        .map(|a| expand_references(a, &env, &is_unknown))
        .collect::<Option<Vec<_>>>()?;
    Some((argv, env))
}

/// The container's `command` and `args` as the kubelet passes them to the image's entrypoint,
/// each `$(VAR)` expanded from the environment the spec states (values and downward-API
/// fields); `None` if one names a variable whose value the spec does not say.
pub fn expanded_args(container: &Container, pod: &Pod) -> Option<(Vec<String>, Vec<String>)> {
    let command = container.command.clone().unwrap_or_default();
    let args = container.args.clone().unwrap_or_default();
    let (command, _) = expand(&command, container, pod)?;
    let (args, _) = expand(&args, container, pod)?;
    Some((command, args))
}

impl Program {
    /// The program of `container` in `pod`; `None` if it states nothing the simulator reads
    /// (no command, or only the image's own entrypoint).
    pub fn of(container: &Container, pod: &Pod) -> Option<Program> {
        let command = container.command.as_deref().unwrap_or_default();
        let args = container.args.as_deref().unwrap_or_default();
        let image = container.image.as_deref().unwrap_or_default();
        let raw: Vec<String> = if !command.is_empty() {
            command.iter().chain(args).cloned().collect()
        } else if args.is_empty() {
            return None;
        } else if is_agnhost(image) {
            std::iter::once("agnhost".to_string())
                .chain(args.iter().cloned())
                .collect()
        } else if no_entrypoint(image) {
            args.to_vec()
        } else {
            return None;
        };
        let (argv, env) = expand(&raw, container, pod)?;
        Some(Program {
            argv,
            env,
            mounts: mounts(container, pod),
        })
    }

    /// The command line (after the kubelet's `$(VAR)` expansion).
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// Runs the command once against `files`, keeping its file changes if it is interpreted to
    /// the end; `Err` says what the simulator could not interpret.
    pub fn run(&self, files: Files<'_>, rng: &mut dyn RngCore) -> Result<Run, String> {
        let env: HashMap<String, String> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut fs = Fs::new(&self.mounts, files.pod, files.node);
        let outcome = eval::run(&self.argv, &env, &mut fs, rng).map_err(|e| e.0)?;
        let (pod_changes, node_changes) = fs.into_changes();
        for (changes, set) in [(pod_changes, files.pod), (node_changes, files.node)] {
            for (key, present) in changes {
                if present {
                    set.insert(key);
                } else {
                    set.remove(&key);
                }
            }
        }
        Ok(outcome.run())
    }

    /// What one run of the command prints and how it ends, run on files as a fresh pod has them
    /// (none), `Err` saying what the simulator could not interpret. Output is the log a kubelet
    /// would keep: standard output and standard error together, each piece at the time since
    /// the container started that it was printed.
    pub fn transcript(&self, rng: &mut dyn RngCore) -> Result<Transcript, String> {
        let env: HashMap<String, String> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (pod, node) = (HashSet::new(), HashSet::new());
        let mut fs = Fs::new(&self.mounts, &pod, &node);
        let outcome = eval::run(&self.argv, &env, &mut fs, rng).map_err(|e| e.0)?;
        Ok(Transcript {
            run: outcome.run(),
            printed: outcome.printed,
        })
    }
}

/// One run's output and end (see [`Program::transcript`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transcript {
    /// How the run goes.
    pub run: Run,
    /// What it printed, each piece with the time since the start it was printed at.
    pub printed: Vec<(Duration, String)>,
}

impl eval::Outcome {
    fn run(&self) -> Run {
        match self.end {
            End::Forever => Run::Forever,
            End::Exit(code) => Run::Exits {
                after: self.elapsed,
                code,
            },
        }
    }
}

/// The container's volume mounts with what backs each.
fn mounts(container: &Container, pod: &Pod) -> Vec<Mount> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| {
            let sub = m.sub_path.as_deref().unwrap_or("");
            let volume = volumes.and_then(|vs| vs.iter().find(|v| v.name == m.name));
            let storage = match volume {
                Some(v) if v.empty_dir.is_some() => {
                    Storage::Pod(normalize(&format!("{}/{sub}", v.name), "/"))
                }
                Some(v) => match &v.host_path {
                    Some(h) => Storage::Node(normalize(&format!("{}/{sub}", h.path), "/")),
                    None => Storage::Other,
                },
                None => Storage::Other,
            };
            Mount {
                path: normalize(&m.mount_path, "/"),
                storage,
            }
        })
        .collect()
}
