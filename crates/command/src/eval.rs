//! Runs a parsed command on simulated time: `sleep` adds to the run's length instead of
//! waiting, `exit` and the last status give the exit code, files live in the pod's volumes, the
//! node's host paths or the container's own filesystem (see [`Fs`]). A construct whose outcome
//! the simulator cannot know (an unknown program, a variable it was not told, a file in a volume
//! it does not model) stops the run with [`Unsupported`].

use super::shell::{self, AndOr, Command, Connector, List, Part, RedirectKind, Unsupported, Word};
use rand::{Rng, RngCore};
use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

/// Commands one run may execute before a loop is taken to spin for ever.
const STEP_BUDGET: u32 = 100_000;
/// A run longer than this (about 30 years) is taken to run for ever.
const FOREVER: Duration = Duration::from_secs(1_000_000_000);
/// Directories every Linux image has, for `[ -d ... ]` and `cd`.
const STANDARD_DIRS: &[&str] = &[
    "/", "/bin", "/dev", "/etc", "/home", "/proc", "/root", "/sys", "/tmp", "/usr", "/var",
    "/var/tmp",
];

/// Where the files under a mount point live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// An `emptyDir`: the pod's, kept across container restarts; the key names the volume.
    Pod(String),
    /// A `hostPath`: the node's, shared by every pod on it; the key is the host path.
    Node(String),
    /// Any other volume (its content is not modelled).
    Other,
}

/// A volume mounted in the container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The mount path, normalized.
    pub path: String,
    /// What backs it.
    pub storage: Storage,
}

/// Where one path lives.
enum Place {
    Pod(String),
    Node(String),
    Local(String),
    /// `/dev/null` and friends: writes vanish, the file is there.
    Device,
    Unknown,
}

/// The files a run sees: the pod's and node's as they were, and its changes, which are kept only
/// if the run is interpreted to the end.
pub struct Fs<'a> {
    mounts: &'a [Mount],
    pod: &'a HashSet<String>,
    node: &'a HashSet<String>,
    pod_changes: HashMap<String, bool>,
    node_changes: HashMap<String, bool>,
    local: HashMap<String, bool>,
}

impl<'a> Fs<'a> {
    /// A view of `pod` and `node` files through `mounts`.
    pub fn new(mounts: &'a [Mount], pod: &'a HashSet<String>, node: &'a HashSet<String>) -> Self {
        Fs {
            mounts,
            pod,
            node,
            pod_changes: HashMap::new(),
            node_changes: HashMap::new(),
            local: HashMap::new(),
        }
    }

    /// The changes to the pod's and the node's files: (key, present).
    pub fn into_changes(self) -> (HashMap<String, bool>, HashMap<String, bool>) {
        (self.pod_changes, self.node_changes)
    }

    fn place(&self, path: &str) -> Place {
        if path == "/dev/null" || path == "/dev/stdout" || path == "/dev/stderr" {
            return Place::Device;
        }
        let mount = self
            .mounts
            .iter()
            .filter(|m| under(path, &m.path))
            .max_by_key(|m| m.path.len());
        let Some(m) = mount else {
            if path.starts_with("/proc/") || path.starts_with("/sys/") || path.starts_with("/dev/")
            {
                return Place::Unknown;
            }
            return Place::Local(path.to_string());
        };
        let rel = path[m.path.len()..].trim_start_matches('/');
        let key = |base: &str| normalize(&format!("{base}/{rel}"), "/");
        match &m.storage {
            Storage::Pod(v) => Place::Pod(key(v)),
            Storage::Node(h) => Place::Node(key(h)),
            Storage::Other => Place::Unknown,
        }
    }

    fn lookup(&self, place: &Place) -> Option<bool> {
        match place {
            Place::Pod(k) => Some(
                self.pod_changes
                    .get(k)
                    .copied()
                    .unwrap_or_else(|| self.pod.contains(k)),
            ),
            Place::Node(k) => Some(
                self.node_changes
                    .get(k)
                    .copied()
                    .unwrap_or_else(|| self.node.contains(k)),
            ),
            Place::Local(k) => self.local.get(k).copied(),
            Place::Device => Some(true),
            Place::Unknown => None,
        }
    }

    fn set(&mut self, place: Place, present: bool) -> Result<(), Unsupported> {
        match place {
            Place::Pod(k) => {
                self.pod_changes.insert(k, present);
            }
            Place::Node(k) => {
                self.node_changes.insert(k, present);
            }
            Place::Local(k) => {
                self.local.insert(k, present);
            }
            Place::Device => {}
            Place::Unknown => return Err(Unsupported("a write to an unmodelled volume".into())),
        }
        Ok(())
    }

    /// Whether a regular file exists at `path`.
    fn file_exists(&self, path: &str) -> Result<bool, Unsupported> {
        let place = self.place(path);
        self.lookup(&place)
            .ok_or_else(|| Unsupported(format!("whether {path} exists")))
    }

    /// Whether a directory exists at `path`: a mount point, a standard directory, one made by
    /// `mkdir`, or the parent of a known file.
    fn dir_exists(&self, path: &str) -> Result<bool, Unsupported> {
        if self.mounts.iter().any(|m| m.path == path)
            || self.mounts.iter().any(|m| under(&m.path, path))
        {
            return Ok(true);
        }
        let dir = format!("{path}/");
        let place = self.place(&dir);
        if let Some(true) = self.lookup(&place) {
            return Ok(true);
        }
        let prefix = match &place {
            Place::Pod(k) | Place::Node(k) | Place::Local(k) => {
                format!("{}/", k.trim_end_matches('/'))
            }
            _ => return Err(Unsupported(format!("whether {path} is a directory"))),
        };
        let has_child = |base: &HashSet<String>, changes: &HashMap<String, bool>| {
            changes.iter().any(|(k, p)| *p && k.starts_with(&prefix))
                || base
                    .iter()
                    .any(|k| k.starts_with(&prefix) && changes.get(k) != Some(&false))
        };
        match place {
            Place::Pod(_) => Ok(has_child(self.pod, &self.pod_changes)),
            Place::Node(_) => Ok(has_child(self.node, &self.node_changes)),
            _ if STANDARD_DIRS.contains(&path) => Ok(true),
            _ if self.local.iter().any(|(k, p)| *p && k.starts_with(&prefix)) => Ok(true),
            _ => Err(Unsupported(format!("whether {path} is a directory"))),
        }
    }

    fn create(&mut self, path: &str) -> Result<(), Unsupported> {
        let place = self.place(path);
        self.set(place, true)
    }

    fn mkdir(&mut self, path: &str) -> Result<(), Unsupported> {
        let place = self.place(&format!("{path}/"));
        self.set(place, true)
    }

    /// Removes a file (and, `recursive`, a directory's content); whether anything was there.
    fn remove(&mut self, path: &str, recursive: bool) -> Result<bool, Unsupported> {
        let existed = self.file_exists(path)?;
        let place = self.place(path);
        self.set(place, false)?;
        if !recursive {
            return Ok(existed);
        }
        let dir_existed = self.dir_exists(path)?;
        let prefix = match self.place(&format!("{path}/")) {
            Place::Pod(k) | Place::Node(k) | Place::Local(k) => k,
            _ => return Ok(existed || dir_existed),
        };
        let doomed = |base: &HashSet<String>, changes: &HashMap<String, bool>| -> Vec<String> {
            base.iter()
                .chain(changes.keys())
                .filter(|k| k.starts_with(&prefix))
                .cloned()
                .collect()
        };
        match self.place(path) {
            Place::Pod(_) => {
                for k in doomed(self.pod, &self.pod_changes) {
                    self.pod_changes.insert(k, false);
                }
            }
            Place::Node(_) => {
                for k in doomed(self.node, &self.node_changes) {
                    self.node_changes.insert(k, false);
                }
            }
            _ => {
                let keys: Vec<String> = self
                    .local
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .cloned()
                    .collect();
                for k in keys {
                    self.local.insert(k, false);
                }
            }
        }
        Ok(existed || dir_existed)
    }
}

/// Whether `path` is `dir` or below it.
fn under(path: &str, dir: &str) -> bool {
    dir == "/"
        || path == dir
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `path` made absolute against `cwd` with `.`, `..` and repeated slashes resolved; a trailing
/// slash is kept (it marks a directory key).
pub fn normalize(path: &str, cwd: &str) -> String {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for p in full.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if full.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// It exited with this code.
    Exit(i32),
    /// It never ends on its own.
    Forever,
}

enum Flow {
    Next,
    Exit(i32),
    Forever,
    Break(u32),
    Continue(u32),
}

/// The shared state of one run: time, files, randomness.
struct Machine<'f, 'r> {
    fs: &'f mut Fs<'r>,
    rng: &'f mut dyn RngCore,
    elapsed: Duration,
    steps: u32,
    /// What reached the container's output (its log), each piece at the time it was printed.
    printed: Vec<(Duration, String)>,
    /// Whether standard output goes to a file here (`> file`, `&> /dev/null`).
    stdout_to_file: bool,
}

/// How a run ended and what it printed on the way.
pub struct Outcome {
    /// How long it ran.
    pub elapsed: Duration,
    /// How it ended.
    pub end: End,
    /// What it printed, each piece with the time since the start it was printed at.
    pub printed: Vec<(Duration, String)>,
}

/// One shell's variables and options.
#[derive(Clone)]
struct Frame {
    vars: HashMap<String, String>,
    positional: Vec<String>,
    status: i32,
    errexit: bool,
    cwd: String,
    /// Inside a condition (`if`, `while`, `!`, all but the last of `&&`/`||`): no errexit.
    cond: u32,
}

/// Runs `argv` with the known environment `env`; returns how long it ran and how it ended.
pub fn run(
    argv: &[String],
    env: &HashMap<String, String>,
    fs: &mut Fs<'_>,
    rng: &mut dyn RngCore,
) -> Result<Outcome, Unsupported> {
    let mut m = Machine {
        fs,
        rng,
        elapsed: Duration::ZERO,
        steps: 0,
        printed: Vec::new(),
        stdout_to_file: false,
    };
    let mut frame = Frame {
        vars: env.clone(),
        positional: vec!["sh".into()],
        status: 0,
        errexit: false,
        cwd: "/".into(),
        cond: 0,
    };
    let flow = m.exec(&mut frame, argv)?;
    let end = match flow {
        Flow::Forever => End::Forever,
        Flow::Exit(code) => End::Exit(code),
        Flow::Next | Flow::Break(_) | Flow::Continue(_) => End::Exit(frame.status),
    };
    let end = if m.elapsed >= FOREVER {
        End::Forever
    } else {
        end
    };
    Ok(Outcome {
        elapsed: m.elapsed,
        end,
        printed: m.printed,
    })
}

/// Whether a redirection sends standard output to a file: `>`, `>>` or `>&` with a path for
/// descriptor 1, or `&>` (standard error duplicated onto it, `>&2`, still reaches the log).
fn hides_stdout(kind: RedirectKind, fd: Option<u32>, both: bool, target: &str) -> bool {
    let to_log = matches!(target, "/dev/stdout" | "/dev/stderr" | "/proc/self/fd/1");
    let is_fd = !target.is_empty() && target.chars().all(|c| c.is_ascii_digit());
    match kind {
        RedirectKind::In => false,
        _ if both => !to_log && !is_fd,
        RedirectKind::Out | RedirectKind::Append => matches!(fd, None | Some(1)) && !to_log,
        RedirectKind::Dup => matches!(fd, None | Some(1)) && !is_fd && !to_log,
    }
}

/// `echo`'s output: `-n` leaves out the newline, `-e` reads backslash escapes (busybox's and
/// bash's echo; the options must come first).
fn echo(args: &[String]) -> String {
    let mut newline = true;
    let mut escapes = false;
    let mut rest = args;
    while let Some((first, tail)) = rest.split_first() {
        let Some(opts) = first.strip_prefix('-') else {
            break;
        };
        if opts.is_empty() || !opts.chars().all(|c| matches!(c, 'n' | 'e' | 'E')) {
            break;
        }
        for c in opts.chars() {
            match c {
                'n' => newline = false,
                'e' => escapes = true,
                _ => escapes = false,
            }
        }
        rest = tail;
    }
    let mut out = rest.join(" ");
    if escapes {
        let (text, stop) = unescape(&out);
        out = text;
        if stop {
            return out;
        }
    }
    if newline {
        out.push('\n');
    }
    out
}

/// Backslash escapes as `echo -e` and `printf` read them; the flag says `\c` stopped the output.
fn unescape(s: &str) -> (String, bool) {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('a') => out.push('\u{7}'),
            Some('c') => return (out, true),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    (out, false)
}

/// `printf FORMAT [ARGS...]`: `%s`, `%b`, `%d`/`%i`, `%c` and `%%`, the format reused while
/// arguments remain, as POSIX printf does; `None` for a conversion it does not read.
fn printf(args: &[String]) -> Option<String> {
    let (format, mut rest) = args.split_first()?;
    let (format, _) = unescape(format);
    let mut out = String::new();
    loop {
        let mut used = 0;
        let mut chars = format.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            let conv = chars.next()?;
            let arg = match conv {
                '%' => {
                    out.push('%');
                    continue;
                }
                's' | 'b' | 'd' | 'i' | 'c' => {
                    let a = rest.get(used).cloned().unwrap_or_default();
                    used += 1;
                    a
                }
                _ => return None,
            };
            match conv {
                's' => out.push_str(&arg),
                'b' => out.push_str(&unescape(&arg).0),
                'c' => out.extend(arg.chars().next()),
                _ => {
                    let n: i64 = if arg.is_empty() {
                        0
                    } else {
                        arg.trim().parse().ok()?
                    };
                    out.push_str(&n.to_string());
                }
            }
        }
        if used == 0 || used >= rest.len() {
            return Some(out);
        }
        rest = &rest[used..];
    }
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// `exit N`'s code as the shell reports it (modulo 256).
fn exit_code(n: i64) -> i32 {
    n.rem_euclid(256) as i32
}

/// `sleep`'s arguments: seconds with an optional `s`, `m`, `h` or `d` suffix, summed; `None`
/// for `infinity`.
fn sleep_duration(args: &[String]) -> Result<Option<Duration>, Unsupported> {
    if args.is_empty() {
        return Err(Unsupported("sleep without an argument".into()));
    }
    let mut total = 0f64;
    for a in args {
        if a == "infinity" || a == "inf" {
            return Ok(None);
        }
        let (num, scale) = match a.chars().last() {
            Some('s') => (&a[..a.len() - 1], 1.0),
            Some('m') => (&a[..a.len() - 1], 60.0),
            Some('h') => (&a[..a.len() - 1], 3600.0),
            Some('d') => (&a[..a.len() - 1], 86400.0),
            _ => (a.as_str(), 1.0),
        };
        let v: f64 = num.parse().map_err(|_| Unsupported(format!("sleep {a}")))?;
        if !v.is_finite() || v < 0.0 {
            return Err(Unsupported(format!("sleep {a}")));
        }
        total += v * scale;
    }
    Ok(Some(
        Duration::try_from_secs_f64(total.min(FOREVER.as_secs_f64())).unwrap_or(FOREVER),
    ))
}

/// agnhost subcommands that serve until killed.
const AGNHOST_SERVERS: &[&str] = &[
    "pause",
    "netexec",
    "serve-hostname",
    "test-webserver",
    "porter",
    "nettest",
    "webhook",
    "crd-conversion-webhook",
    "fake-gitserver",
    "liveness",
    "resource-consumer",
];

impl Machine<'_, '_> {
    /// Output of the command running now: to the log unless standard output goes to a file.
    fn print(&mut self, text: String) {
        if !self.stdout_to_file && !text.is_empty() {
            self.printed.push((self.elapsed, text));
        }
    }

    fn step(&mut self) -> Result<(), Unsupported> {
        self.steps += 1;
        if self.steps > STEP_BUDGET {
            return Err(Unsupported("step budget".into()));
        }
        Ok(())
    }

    fn list(&mut self, f: &mut Frame, list: &List) -> Result<Flow, Unsupported> {
        for ao in list {
            match self.and_or(f, ao)? {
                Flow::Next => {}
                other => return Ok(other),
            }
            if self.elapsed >= FOREVER {
                return Ok(Flow::Forever);
            }
        }
        Ok(Flow::Next)
    }

    fn and_or(&mut self, f: &mut Frame, ao: &AndOr) -> Result<Flow, Unsupported> {
        let last = ao.rest.len();
        let run = |m: &mut Self, f: &mut Frame, p: &shell::Pipeline, is_last: bool| {
            let exempt = !is_last || p.negate;
            if exempt {
                f.cond += 1;
            }
            let flow = m.command(f, &p.command);
            if exempt {
                f.cond -= 1;
            }
            let flow = flow?;
            if p.negate && matches!(flow, Flow::Next) {
                f.status = i32::from(f.status == 0);
            }
            Ok::<Flow, Unsupported>(flow)
        };
        let flow = run(self, f, &ao.first, last == 0)?;
        if !matches!(flow, Flow::Next) {
            return Ok(flow);
        }
        for (i, (connector, p)) in ao.rest.iter().enumerate() {
            let go = match connector {
                Connector::And => f.status == 0,
                Connector::Or => f.status != 0,
            };
            if !go {
                continue;
            }
            let flow = run(self, f, p, i + 1 == last)?;
            if !matches!(flow, Flow::Next) {
                return Ok(flow);
            }
        }
        Ok(Flow::Next)
    }

    fn cond(&mut self, f: &mut Frame, list: &List) -> Result<Option<Flow>, Unsupported> {
        f.cond += 1;
        let flow = self.list(f, list);
        f.cond -= 1;
        match flow? {
            Flow::Next => Ok(None),
            other => Ok(Some(other)),
        }
    }

    fn command(&mut self, f: &mut Frame, cmd: &Command) -> Result<Flow, Unsupported> {
        self.step()?;
        match cmd {
            Command::Simple {
                assigns,
                words,
                redirects,
            } => {
                let outer = self.stdout_to_file;
                let flow = self.simple(f, assigns, words, redirects);
                self.stdout_to_file = outer;
                flow
            }
            Command::Test(words) => {
                let args = self.expand_words(f, words)?;
                f.status = self.test(f, &args, true)?;
                Ok(self.after(f))
            }
            Command::If {
                branches,
                otherwise,
            } => {
                for (cond, body) in branches {
                    if let Some(flow) = self.cond(f, cond)? {
                        return Ok(flow);
                    }
                    if f.status == 0 {
                        return self.list(f, body);
                    }
                }
                f.status = 0;
                match otherwise {
                    Some(body) => self.list(f, body),
                    None => Ok(Flow::Next),
                }
            }
            Command::While { cond, body, until } => {
                let mut status = 0;
                loop {
                    if let Some(flow) = self.cond(f, cond)? {
                        return Ok(flow);
                    }
                    if (f.status == 0) == *until {
                        break;
                    }
                    match self.list(f, body)? {
                        Flow::Next | Flow::Continue(1) => {}
                        Flow::Break(1) => break,
                        Flow::Break(n) => return Ok(Flow::Break(n - 1)),
                        Flow::Continue(n) => return Ok(Flow::Continue(n - 1)),
                        other => return Ok(other),
                    }
                    status = f.status;
                    if self.elapsed >= FOREVER {
                        return Ok(Flow::Forever);
                    }
                    if self.steps >= STEP_BUDGET / 2 {
                        // A loop that neither ends nor moves time along spins for ever.
                        return Ok(Flow::Forever);
                    }
                }
                f.status = status;
                Ok(Flow::Next)
            }
            Command::For { var, words, body } => {
                let items = self.expand_words(f, words)?;
                f.status = 0;
                for item in items {
                    f.vars.insert(var.clone(), item);
                    match self.list(f, body)? {
                        Flow::Next | Flow::Continue(1) => {}
                        Flow::Break(1) => break,
                        Flow::Break(n) => return Ok(Flow::Break(n - 1)),
                        Flow::Continue(n) => return Ok(Flow::Continue(n - 1)),
                        other => return Ok(other),
                    }
                }
                Ok(Flow::Next)
            }
        }
    }

    /// A simple command with its assignments and redirections.
    fn simple(
        &mut self,
        f: &mut Frame,
        assigns: &[(String, Word)],
        words: &[Word],
        redirects: &[shell::Redirect],
    ) -> Result<Flow, Unsupported> {
        for r in redirects {
            let target = self.expand(f, &r.target)?;
            if hides_stdout(r.kind, r.fd, r.both, &target) {
                self.stdout_to_file = true;
            }
            match r.kind {
                RedirectKind::Dup if target.chars().all(|c| c.is_ascii_digit()) => {}
                RedirectKind::Dup | RedirectKind::Out | RedirectKind::Append => {
                    let path = normalize(&target, &f.cwd);
                    self.fs.create(&path)?;
                }
                RedirectKind::In => {
                    let path = normalize(&target, &f.cwd);
                    if !self.fs.file_exists(&path)? {
                        f.status = 1;
                        return Ok(self.after(f));
                    }
                }
            }
        }
        let argv = self.expand_words(f, words)?;
        if argv.is_empty() {
            for (name, value) in assigns {
                let v = self.expand(f, value)?;
                f.vars.insert(name.clone(), v);
            }
            f.status = 0;
            return Ok(Flow::Next);
        }
        if !assigns.is_empty() {
            // `A=1 cmd` sets A for cmd only.
            let mut inner = f.clone();
            for (name, value) in assigns {
                let v = self.expand(f, value)?;
                inner.vars.insert(name.clone(), v);
            }
            let flow = self.exec(&mut inner, &argv)?;
            f.status = inner.status;
            return Ok(match flow {
                Flow::Next => self.after(f),
                other => other,
            });
        }
        match self.exec(f, &argv)? {
            Flow::Next => Ok(self.after(f)),
            other => Ok(other),
        }
    }

    /// After a command: `set -e` ends the shell on a failure outside a condition.
    fn after(&self, f: &Frame) -> Flow {
        if f.errexit && f.cond == 0 && f.status != 0 {
            Flow::Exit(f.status)
        } else {
            Flow::Next
        }
    }

    fn var(&mut self, f: &Frame, name: &str) -> Result<String, Unsupported> {
        if name == "?" {
            return Ok(f.status.to_string());
        }
        if name == "#" {
            return Ok(f.positional.len().saturating_sub(1).to_string());
        }
        if let Ok(n) = name.parse::<usize>() {
            return Ok(f.positional.get(n).cloned().unwrap_or_default());
        }
        if name == "RANDOM" && !f.vars.contains_key(name) {
            return Ok(self.rng.random_range(0..32768u32).to_string());
        }
        if name == "PWD" && !f.vars.contains_key(name) {
            return Ok(f.cwd.clone());
        }
        f.vars
            .get(name)
            .cloned()
            .ok_or_else(|| Unsupported(format!("the value of ${name}")))
    }

    fn expand(&mut self, f: &Frame, w: &Word) -> Result<String, Unsupported> {
        let mut out = String::new();
        for p in &w.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(name) => {
                    let v = self.var(f, name)?;
                    if !w.quoted && v.chars().any(char::is_whitespace) {
                        return Err(Unsupported(format!("field splitting of ${name}")));
                    }
                    out.push_str(&v);
                }
                Part::Arith(expr) => out.push_str(&self.arith(f, expr)?.to_string()),
            }
        }
        Ok(out)
    }

    /// Words as arguments: an unquoted expansion that comes out empty is no argument at all.
    fn expand_words(&mut self, f: &Frame, words: &[Word]) -> Result<Vec<String>, Unsupported> {
        let mut out = Vec::new();
        for w in words {
            let s = self.expand(f, w)?;
            if s.is_empty() && !w.quoted && w.parts.iter().all(|p| !matches!(p, Part::Lit(_))) {
                continue;
            }
            out.push(s);
        }
        Ok(out)
    }

    /// Runs one command line.
    fn exec(&mut self, f: &mut Frame, argv: &[String]) -> Result<Flow, Unsupported> {
        let Some(first) = argv.first() else {
            f.status = 0;
            return Ok(Flow::Next);
        };
        let args = &argv[1..];
        let name = basename(first);
        match name {
            "sh" | "bash" | "ash" | "dash" => self.shell(f, args),
            "busybox" => self.exec(f, args),
            "agnhost" => self.agnhost(f, args),
            "sleep" => match sleep_duration(args)? {
                Some(d) => {
                    self.elapsed = self.elapsed.saturating_add(d);
                    f.status = 0;
                    Ok(Flow::Next)
                }
                None => Ok(Flow::Forever),
            },
            "true" | ":" => {
                f.status = 0;
                Ok(Flow::Next)
            }
            "false" => {
                f.status = 1;
                Ok(Flow::Next)
            }
            "exit" => match args {
                [] => Ok(Flow::Exit(f.status)),
                [n] => n
                    .trim()
                    .parse::<i64>()
                    .map(|n| Flow::Exit(exit_code(n)))
                    .map_err(|_| Unsupported(format!("exit {n}"))),
                _ => Err(Unsupported("exit with several arguments".into())),
            },
            "exec" => {
                if args.is_empty() {
                    f.status = 0;
                    return Ok(Flow::Next);
                }
                match self.exec(f, args)? {
                    Flow::Next | Flow::Break(_) | Flow::Continue(_) => Ok(Flow::Exit(f.status)),
                    other => Ok(other),
                }
            }
            "break" | "continue" => {
                let n = match args {
                    [] => 1,
                    [n] => n
                        .parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| Unsupported(format!("{name} {n}")))?,
                    _ => return Err(Unsupported(format!("{name} with several arguments"))),
                };
                f.status = 0;
                Ok(if name == "break" {
                    Flow::Break(n)
                } else {
                    Flow::Continue(n)
                })
            }
            "echo" => {
                let text = echo(args);
                self.print(text);
                f.status = 0;
                Ok(Flow::Next)
            }
            "printf" => {
                // A format the simulator does not read prints what it cannot say: nothing here.
                if let Some(text) = printf(args) {
                    self.print(text);
                }
                f.status = 0;
                Ok(Flow::Next)
            }
            "pwd" => {
                let text = format!("{}\n", f.cwd);
                self.print(text);
                f.status = 0;
                Ok(Flow::Next)
            }
            "date" | "hostname" | "id" | "whoami" | "uname" | "sync" | "trap" | "wait"
            | "readonly" | "unset" => {
                if name == "unset" {
                    for a in args {
                        f.vars.remove(a);
                    }
                }
                f.status = 0;
                Ok(Flow::Next)
            }
            "env" | "printenv" if args.is_empty() => {
                f.status = 0;
                Ok(Flow::Next)
            }
            "export" => {
                for a in args {
                    if let Some((k, v)) = a.split_once('=') {
                        f.vars.insert(k.to_string(), v.to_string());
                    }
                }
                f.status = 0;
                Ok(Flow::Next)
            }
            "set" => {
                for a in args {
                    if let Some(opts) = a.strip_prefix('-') {
                        if opts.contains('e') {
                            f.errexit = true;
                        }
                    } else if let Some(opts) = a.strip_prefix('+')
                        && opts.contains('e')
                    {
                        f.errexit = false;
                    }
                }
                f.status = 0;
                Ok(Flow::Next)
            }
            "cd" => {
                let to = match args {
                    [] => return Err(Unsupported("cd to $HOME".into())),
                    [d] => normalize(d, &f.cwd),
                    _ => return Err(Unsupported("cd with options".into())),
                };
                f.status = if self.fs.dir_exists(&to)? { 0 } else { 1 };
                if f.status == 0 {
                    f.cwd = to;
                }
                Ok(Flow::Next)
            }
            "touch" => {
                for a in args {
                    if a.starts_with('-') {
                        if matches!(a.as_str(), "-a" | "-m" | "-c") {
                            continue;
                        }
                        return Err(Unsupported(format!("touch {a}")));
                    }
                    let path = normalize(a, &f.cwd);
                    self.fs.create(&path)?;
                }
                f.status = 0;
                Ok(Flow::Next)
            }
            "mkdir" => {
                let parents = args.iter().any(|a| a == "-p");
                let mut status = 0;
                for a in args {
                    if a.starts_with('-') {
                        if a == "-p" {
                            continue;
                        }
                        return Err(Unsupported(format!("mkdir {a}")));
                    }
                    let path = normalize(a, &f.cwd);
                    if !parents && self.fs.dir_exists(&path)? {
                        status = 1;
                        continue;
                    }
                    self.fs.mkdir(&path)?;
                }
                f.status = status;
                Ok(Flow::Next)
            }
            "rm" => {
                let mut force = false;
                let mut recursive = false;
                let mut status = 0;
                for a in args {
                    if let Some(flags) = a.strip_prefix('-').filter(|s| !s.is_empty()) {
                        for c in flags.chars() {
                            match c {
                                'f' => force = true,
                                'r' | 'R' => recursive = true,
                                _ => return Err(Unsupported(format!("rm -{c}"))),
                            }
                        }
                        continue;
                    }
                    let path = normalize(a, &f.cwd);
                    if !self.fs.remove(&path, recursive)? && !force {
                        status = 1;
                    }
                }
                f.status = status;
                Ok(Flow::Next)
            }
            "cat" => {
                if args.is_empty() || args.iter().any(|a| a.starts_with('-')) {
                    return Err(Unsupported("cat of standard input".into()));
                }
                let mut status = 0;
                for a in args {
                    if !self.fs.file_exists(&normalize(a, &f.cwd))? {
                        status = 1;
                    }
                }
                f.status = status;
                Ok(Flow::Next)
            }
            "tail"
                if args
                    .iter()
                    .any(|a| a == "-f" || a == "-F" || a.starts_with("--follow")) =>
            {
                Ok(Flow::Forever)
            }
            "test" => {
                f.status = self.test(f, args, false)?;
                Ok(Flow::Next)
            }
            "[" => match args.split_last() {
                Some((last, inner)) if last == "]" => {
                    f.status = self.test(f, inner, false)?;
                    Ok(Flow::Next)
                }
                _ => Err(Unsupported("[ without ]".into())),
            },
            other => Err(Unsupported(format!("the program {other}"))),
        }
    }

    /// `sh [-e] -c SCRIPT [NAME [ARGS...]]`, in a shell of its own (its `exit` ends only it).
    fn shell(&mut self, f: &mut Frame, args: &[String]) -> Result<Flow, Unsupported> {
        let mut inner = Frame {
            vars: f.vars.clone(),
            positional: Vec::new(),
            status: 0,
            errexit: false,
            cwd: f.cwd.clone(),
            cond: 0,
        };
        let mut has_c = false;
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if a == "--" {
                i += 1;
                break;
            }
            if a == "-o" || a == "+o" {
                i += 2;
                continue;
            }
            let Some(opts) = a.strip_prefix('-').or_else(|| a.strip_prefix('+')) else {
                break;
            };
            if opts.is_empty() {
                break;
            }
            has_c |= opts.contains('c');
            if opts.contains('e') {
                inner.errexit = a.starts_with('-');
            }
            i += 1;
        }
        if !has_c {
            return Err(Unsupported("a shell without -c".into()));
        }
        let Some(script) = args.get(i) else {
            return Err(Unsupported("sh -c without a script".into()));
        };
        inner.positional = match args.get(i + 1..) {
            Some(rest) if !rest.is_empty() => rest.to_vec(),
            _ => vec!["sh".into()],
        };
        let parsed = shell::parse(script)?;
        let flow = self.list(&mut inner, &parsed)?;
        f.status = match flow {
            Flow::Forever => return Ok(Flow::Forever),
            Flow::Exit(code) => code,
            Flow::Next | Flow::Break(_) | Flow::Continue(_) => inner.status,
        };
        Ok(Flow::Next)
    }

    fn agnhost(&mut self, f: &mut Frame, args: &[String]) -> Result<Flow, Unsupported> {
        match args.first().map(String::as_str) {
            Some(sub) if AGNHOST_SERVERS.contains(&sub) => Ok(Flow::Forever),
            Some("entrypoint-tester") => {
                f.status = 0;
                Ok(Flow::Next)
            }
            _ => Err(Unsupported(format!("agnhost {}", args.join(" ")))),
        }
    }

    /// `test`, `[ ]` and `[[ ]]`: string, integer and file tests.
    fn test(&mut self, f: &Frame, args: &[String], double: bool) -> Result<i32, Unsupported> {
        let status = |b: bool| if b { 0 } else { 1 };
        if let Some((first, rest)) = args.split_first()
            && first == "!"
            && !rest.is_empty()
        {
            return Ok(1 - self.test(f, rest, double)?);
        }
        match args {
            [] => Ok(1),
            [s] => Ok(status(!s.is_empty())),
            [op, operand] => {
                let path = || normalize(operand, &f.cwd);
                match op.as_str() {
                    "-n" => Ok(status(!operand.is_empty())),
                    "-z" => Ok(status(operand.is_empty())),
                    "-e" | "-f" | "-r" | "-w" => {
                        let p = path();
                        let exists = self.fs.file_exists(&p)?
                            || (op != "-f" && self.fs.dir_exists(&p).unwrap_or(false));
                        Ok(status(exists))
                    }
                    "-d" => Ok(status(self.fs.dir_exists(&path())?)),
                    _ => Err(Unsupported(format!("test {op}"))),
                }
            }
            [a, op, b] => {
                let int = |s: &str| {
                    s.trim()
                        .parse::<i64>()
                        .map_err(|_| Unsupported(format!("integer {s}")))
                };
                match op.as_str() {
                    "=" | "==" => {
                        if double && b.contains(['*', '?', '[']) {
                            return Err(Unsupported("[[ pattern ]]".into()));
                        }
                        Ok(status(a == b))
                    }
                    "!=" => {
                        if double && b.contains(['*', '?', '[']) {
                            return Err(Unsupported("[[ pattern ]]".into()));
                        }
                        Ok(status(a != b))
                    }
                    "-eq" => Ok(status(int(a)? == int(b)?)),
                    "-ne" => Ok(status(int(a)? != int(b)?)),
                    "-lt" => Ok(status(int(a)? < int(b)?)),
                    "-le" => Ok(status(int(a)? <= int(b)?)),
                    "-gt" => Ok(status(int(a)? > int(b)?)),
                    "-ge" => Ok(status(int(a)? >= int(b)?)),
                    _ => Err(Unsupported(format!("test {op}"))),
                }
            }
            _ => Err(Unsupported("a compound test".into())),
        }
    }

    /// `$(( ... ))`: integers, variables, `+ - * / %`, comparisons, `&& ||`, `!`, parentheses.
    fn arith(&mut self, f: &Frame, expr: &str) -> Result<i64, Unsupported> {
        let mut toks = Vec::new();
        let chars: Vec<char> = expr.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c.is_ascii_digit() {
                let start = i;
                while i < chars.len() && chars[i].is_ascii_alphanumeric() {
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                let n = text
                    .parse::<i64>()
                    .map_err(|_| Unsupported(format!("number {text}")))?;
                toks.push(ATok::Num(n));
            } else if c == '$' || c.is_ascii_alphabetic() || c == '_' {
                let braced = c == '$' && chars.get(i + 1) == Some(&'{');
                i += usize::from(c == '$') + usize::from(braced);
                let start = i;
                while i < chars.len()
                    && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == '?')
                {
                    i += 1;
                }
                let name: String = chars[start..i].iter().collect();
                if braced {
                    if chars.get(i) != Some(&'}') {
                        return Err(Unsupported("${...} in arithmetic".into()));
                    }
                    i += 1;
                }
                let value = self.var(f, &name)?;
                let n = if value.trim().is_empty() {
                    0
                } else {
                    value
                        .trim()
                        .parse::<i64>()
                        .map_err(|_| Unsupported(format!("${name} as a number")))?
                };
                toks.push(ATok::Num(n));
            } else {
                let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
                let op = match two.as_str() {
                    "<=" | ">=" | "==" | "!=" | "&&" | "||" => {
                        i += 2;
                        two
                    }
                    _ => {
                        i += 1;
                        c.to_string()
                    }
                };
                if !matches!(
                    op.as_str(),
                    "+" | "-"
                        | "*"
                        | "/"
                        | "%"
                        | "<"
                        | ">"
                        | "<="
                        | ">="
                        | "=="
                        | "!="
                        | "&&"
                        | "||"
                        | "!"
                        | "("
                        | ")"
                ) {
                    return Err(Unsupported(format!("arithmetic operator {op}")));
                }
                toks.push(ATok::Op(op));
            }
        }
        let mut p = Arith { toks, pos: 0 };
        let v = p.expr(0)?;
        if p.pos != p.toks.len() {
            return Err(Unsupported(format!("arithmetic {expr}")));
        }
        Ok(v)
    }
}

#[derive(Clone, Debug)]
enum ATok {
    Num(i64),
    Op(String),
}

struct Arith {
    toks: Vec<ATok>,
    pos: usize,
}

impl Arith {
    fn bin_prec(op: &str) -> Option<u8> {
        Some(match op {
            "||" => 1,
            "&&" => 2,
            "==" | "!=" => 3,
            "<" | ">" | "<=" | ">=" => 4,
            "+" | "-" => 5,
            "*" | "/" | "%" => 6,
            _ => return None,
        })
    }

    fn atom(&mut self) -> Result<i64, Unsupported> {
        let bad = || Unsupported("arithmetic".into());
        let t = self.toks.get(self.pos).cloned().ok_or_else(bad)?;
        self.pos += 1;
        match t {
            ATok::Num(n) => Ok(n),
            ATok::Op(op) => match op.as_str() {
                "(" => {
                    let v = self.expr(0)?;
                    match self.toks.get(self.pos) {
                        Some(ATok::Op(c)) if c == ")" => {
                            self.pos += 1;
                            Ok(v)
                        }
                        _ => Err(bad()),
                    }
                }
                "-" => Ok(self.atom()?.wrapping_neg()),
                "+" => self.atom(),
                "!" => Ok(i64::from(self.atom()? == 0)),
                _ => Err(bad()),
            },
        }
    }

    fn expr(&mut self, min: u8) -> Result<i64, Unsupported> {
        let mut lhs = self.atom()?;
        while let Some(ATok::Op(op)) = self.toks.get(self.pos).cloned() {
            let Some(prec) = Self::bin_prec(&op) else {
                break;
            };
            if prec <= min {
                break;
            }
            self.pos += 1;
            let rhs = self.expr(prec)?;
            lhs = match op.as_str() {
                "||" => i64::from(lhs != 0 || rhs != 0),
                "&&" => i64::from(lhs != 0 && rhs != 0),
                "==" => i64::from(lhs == rhs),
                "!=" => i64::from(lhs != rhs),
                "<" => i64::from(lhs < rhs),
                ">" => i64::from(lhs > rhs),
                "<=" => i64::from(lhs <= rhs),
                ">=" => i64::from(lhs >= rhs),
                "+" => lhs.wrapping_add(rhs),
                "-" => lhs.wrapping_sub(rhs),
                "*" => lhs.wrapping_mul(rhs),
                "/" | "%" if rhs == 0 => return Err(Unsupported("division by zero".into())),
                "/" => lhs.wrapping_div(rhs),
                _ => lhs.wrapping_rem(rhs),
            };
        }
        Ok(lhs)
    }
}
