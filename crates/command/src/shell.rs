//! A parser for the small part of the POSIX shell language that container commands in tests and
//! manifests are written in: simple commands, `;` and newlines, `&&` and `||`, `!`, `if`/`elif`/
//! `else`, `while`/`until`, `for`, `[[ ... ]]`, quoting, `$VAR`, `${VAR}` and `$(( ... ))`, and
//! output redirections. Anything else (pipes, background jobs, functions, `case`, command
//! substitution, subshells and groups) is [`Unsupported`]: the simulator does not guess what such
//! a script does, and the container keeps the profile's behaviour.

/// A construct the simulator does not interpret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl Unsupported {
    fn new(what: impl Into<String>) -> Unsupported {
        Unsupported(what.into())
    }
}

/// One piece of a word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// Text as written (quotes removed).
    Lit(String),
    /// `$NAME`, `${NAME}`, `$?`, `$1`.
    Var(String),
    /// `$(( expression ))`, the expression's text.
    Arith(String),
}

/// A word: its parts and whether any of it was quoted (a quoted word is never a keyword).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Word {
    /// The parts, in order.
    pub parts: Vec<Part>,
    /// Some of it was quoted or escaped.
    pub quoted: bool,
}

impl Word {
    /// The word's text if it is plain literal text without quotes.
    pub fn literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Lit(s)] if !self.quoted => Some(s),
            _ => None,
        }
    }

    fn is(&self, keyword: &str) -> bool {
        self.literal() == Some(keyword)
    }
}

/// What a redirection does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedirectKind {
    /// `>` or `>|`: create or truncate.
    Out,
    /// `>>`: create or append.
    Append,
    /// `<`: read (the file must exist).
    In,
    /// `>&N`, `<&N`, `&>`: duplicate a descriptor (no file is touched unless it is a path).
    Dup,
}

/// `[fd]op target`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// What it does.
    pub kind: RedirectKind,
    /// The file (or descriptor for [`RedirectKind::Dup`]).
    pub target: Word,
    /// The descriptor redirected when one is written (`2>`); `None` for the operator's own
    /// (standard output for `>`, input for `<`), and for `&>`, which takes both outputs.
    pub fd: Option<u32>,
    /// `&>`: standard output and standard error both go to the target.
    pub both: bool,
}

/// A command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `NAME=value ... word ... [redirections]`.
    Simple {
        /// Leading assignments.
        assigns: Vec<(String, Word)>,
        /// The command and its arguments.
        words: Vec<Word>,
        /// Redirections.
        redirects: Vec<Redirect>,
    },
    /// `[[ ... ]]`.
    Test(Vec<Word>),
    /// `if c; then a; elif d; then b; else e; fi`.
    If {
        /// (condition, body) pairs.
        branches: Vec<(List, List)>,
        /// The `else` body.
        otherwise: Option<List>,
    },
    /// `while c; do b; done` (`until` negates the condition).
    While {
        /// The condition.
        cond: List,
        /// The body.
        body: List,
        /// `until` rather than `while`.
        until: bool,
    },
    /// `for NAME in words; do b; done`.
    For {
        /// The loop variable.
        var: String,
        /// The words iterated over.
        words: Vec<Word>,
        /// The body.
        body: List,
    },
}

/// `[!] command`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipeline {
    /// `!` inverts the status.
    pub negate: bool,
    /// The command.
    pub command: Command,
}

/// `&&` or `||`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connector {
    /// Run the next if the last succeeded.
    And,
    /// Run the next if the last failed.
    Or,
}

/// `a && b || c`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AndOr {
    /// The first pipeline.
    pub first: Pipeline,
    /// The rest, each with its connector.
    pub rest: Vec<(Connector, Pipeline)>,
}

/// Commands separated by `;` or newlines.
pub type List = Vec<AndOr>;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(Word),
    Semi,
    Newline,
    And,
    Or,
    /// The operator, the descriptor written before it, and whether it is `&>`.
    Redirect(RedirectKind, Option<u32>, bool),
}

const KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "while", "until", "do", "done", "for", "in", "case",
    "esac", "function", "{", "}", "!", "[[", "]]", "select", "time", "coproc",
];

/// Parses a script.
pub fn parse(script: &str) -> Result<List, Unsupported> {
    let toks = tokenize(script)?;
    let mut p = Parser { toks, pos: 0 };
    let list = p.list(&[])?;
    match p.peek() {
        None => Ok(list),
        Some(t) => Err(Unsupported::new(format!("unexpected {t:?}"))),
    }
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn tokenize(src: &str) -> Result<Vec<Tok>, Unsupported> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' => i += 1,
            '\\' if chars.get(i + 1) == Some(&'\n') => i += 2,
            '\n' => {
                toks.push(Tok::Newline);
                i += 1;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ';' => {
                if chars.get(i + 1) == Some(&';') {
                    return Err(Unsupported::new(";;"));
                }
                toks.push(Tok::Semi);
                i += 1;
            }
            '&' => match chars.get(i + 1) {
                Some('&') => {
                    toks.push(Tok::And);
                    i += 2;
                }
                Some('>') => {
                    toks.push(Tok::Redirect(RedirectKind::Dup, None, true));
                    i += if chars.get(i + 2) == Some(&'>') { 3 } else { 2 };
                }
                _ => return Err(Unsupported::new("background job (&)")),
            },
            '|' => {
                if chars.get(i + 1) == Some(&'|') {
                    toks.push(Tok::Or);
                    i += 2;
                } else {
                    return Err(Unsupported::new("pipe (|)"));
                }
            }
            '(' | ')' => return Err(Unsupported::new("subshell or function")),
            '>' | '<' => {
                let (kind, len) = redirect_op(&chars[i..]);
                toks.push(Tok::Redirect(kind, None, false));
                i += len;
            }
            _ => {
                let (word, next) = read_word(&chars, i)?;
                i = next;
                // `2>file`, `2>&1`: a descriptor number glued to a redirection.
                if matches!(chars.get(i), Some('>' | '<'))
                    && let Some(fd) = word
                        .literal()
                        .filter(|w| w.chars().all(|c| c.is_ascii_digit()))
                        .and_then(|w| w.parse::<u32>().ok())
                {
                    let (kind, len) = redirect_op(&chars[i..]);
                    toks.push(Tok::Redirect(kind, Some(fd), false));
                    i += len;
                    continue;
                }
                toks.push(Tok::Word(word));
            }
        }
    }
    Ok(toks)
}

fn redirect_op(rest: &[char]) -> (RedirectKind, usize) {
    match rest {
        ['>', '>', ..] => (RedirectKind::Append, 2),
        ['>', '&', ..] | ['<', '&', ..] => (RedirectKind::Dup, 2),
        ['>', '|', ..] => (RedirectKind::Out, 2),
        ['>', ..] => (RedirectKind::Out, 1),
        _ => (RedirectKind::In, 1),
    }
}

fn push_lit(parts: &mut Vec<Part>, c: char) {
    if let Some(Part::Lit(s)) = parts.last_mut() {
        s.push(c);
    } else {
        parts.push(Part::Lit(c.to_string()));
    }
}

/// Reads a `$...` expansion starting at `i` (which holds `$`); returns the part (or `None` for a
/// literal `$`) and the index after it.
fn read_dollar(chars: &[char], i: usize) -> Result<(Option<Part>, usize), Unsupported> {
    match chars.get(i + 1) {
        Some('(') if chars.get(i + 2) == Some(&'(') => {
            let mut depth = 0i32;
            let mut j = i + 3;
            let start = j;
            while j < chars.len() {
                match chars[j] {
                    '(' => depth += 1,
                    ')' if depth > 0 => depth -= 1,
                    ')' if chars.get(j + 1) == Some(&')') => {
                        let text: String = chars[start..j].iter().collect();
                        return Ok((Some(Part::Arith(text)), j + 2));
                    }
                    ')' => return Err(Unsupported::new("unbalanced $(( ))")),
                    _ => {}
                }
                j += 1;
            }
            Err(Unsupported::new("unterminated $(( ))"))
        }
        Some('(') => Err(Unsupported::new("command substitution")),
        Some('{') => {
            let end = chars[i + 2..]
                .iter()
                .position(|&c| c == '}')
                .ok_or_else(|| Unsupported::new("unterminated ${"))?;
            let name: String = chars[i + 2..i + 2 + end].iter().collect();
            if !(is_name(&name) || name.chars().all(|c| c.is_ascii_digit()) || name == "?") {
                return Err(Unsupported::new(format!("parameter expansion ${{{name}}}")));
            }
            Ok((Some(Part::Var(name)), i + 3 + end))
        }
        Some(&c) if c == '?' || c == '#' || c.is_ascii_digit() => {
            Ok((Some(Part::Var(c.to_string())), i + 2))
        }
        Some(&c) if c == '@' || c == '*' || c == '$' || c == '!' || c == '-' => {
            Err(Unsupported::new(format!("special parameter ${c}")))
        }
        Some(&c) if c.is_ascii_alphabetic() || c == '_' => {
            let mut j = i + 1;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            let name: String = chars[i + 1..j].iter().collect();
            Ok((Some(Part::Var(name)), j))
        }
        _ => Ok((None, i + 1)),
    }
}

fn read_word(chars: &[char], mut i: usize) -> Result<(Word, usize), Unsupported> {
    let mut word = Word::default();
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\r' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' => break,
            '\\' => {
                match chars.get(i + 1) {
                    Some('\n') => {}
                    Some(&n) => {
                        push_lit(&mut word.parts, n);
                        word.quoted = true;
                    }
                    None => {}
                }
                i += 2;
            }
            '\'' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '\'')
                    .ok_or_else(|| Unsupported::new("unterminated '"))?;
                word.quoted = true;
                if end == 0 && word.parts.is_empty() {
                    word.parts.push(Part::Lit(String::new()));
                }
                for &c in &chars[i + 1..i + 1 + end] {
                    push_lit(&mut word.parts, c);
                }
                i += end + 2;
            }
            '"' => {
                word.quoted = true;
                if word.parts.is_empty() {
                    word.parts.push(Part::Lit(String::new()));
                }
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(Unsupported::new("unterminated \"")),
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('\\') => {
                            match chars.get(i + 1) {
                                Some(&n @ ('"' | '\\' | '$' | '`')) => push_lit(&mut word.parts, n),
                                Some('\n') => {}
                                Some(&n) => {
                                    push_lit(&mut word.parts, '\\');
                                    push_lit(&mut word.parts, n);
                                }
                                None => return Err(Unsupported::new("unterminated \"")),
                            }
                            i += 2;
                        }
                        Some('`') => return Err(Unsupported::new("command substitution")),
                        Some('$') => {
                            let (part, next) = read_dollar(chars, i)?;
                            match part {
                                Some(p) => word.parts.push(p),
                                None => push_lit(&mut word.parts, '$'),
                            }
                            i = next;
                        }
                        Some(&c) => {
                            push_lit(&mut word.parts, c);
                            i += 1;
                        }
                    }
                }
            }
            '`' => return Err(Unsupported::new("command substitution")),
            '$' => {
                let (part, next) = read_dollar(chars, i)?;
                match part {
                    Some(p) => word.parts.push(p),
                    None => push_lit(&mut word.parts, '$'),
                }
                i = next;
            }
            _ => {
                push_lit(&mut word.parts, c);
                i += 1;
            }
        }
    }
    Ok((word, i))
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_word_is(&self, keyword: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.is(keyword))
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn skip_newlines(&mut self) {
        while matches!(self.peek(), Some(Tok::Newline)) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, keyword: &str) -> Result<(), Unsupported> {
        self.skip_newlines();
        if self.peek_word_is(keyword) {
            self.pos += 1;
            Ok(())
        } else {
            Err(Unsupported::new(format!("expected {keyword}")))
        }
    }

    /// Commands up to one of `stops` (a keyword in command position) or the end.
    fn list(&mut self, stops: &[&str]) -> Result<List, Unsupported> {
        let mut list = Vec::new();
        loop {
            while matches!(self.peek(), Some(Tok::Newline | Tok::Semi)) {
                self.pos += 1;
            }
            match self.peek() {
                None => break,
                Some(Tok::Word(w)) if stops.iter().any(|s| w.is(s)) => break,
                _ => {}
            }
            list.push(self.and_or()?);
            match self.peek() {
                None | Some(Tok::Semi | Tok::Newline) => {}
                Some(Tok::Word(w)) if stops.iter().any(|s| w.is(s)) => {}
                Some(t) => return Err(Unsupported::new(format!("unexpected {t:?}"))),
            }
        }
        Ok(list)
    }

    fn and_or(&mut self) -> Result<AndOr, Unsupported> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            let connector = match self.peek() {
                Some(Tok::And) => Connector::And,
                Some(Tok::Or) => Connector::Or,
                _ => break,
            };
            self.pos += 1;
            self.skip_newlines();
            rest.push((connector, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Pipeline, Unsupported> {
        let mut negate = false;
        while self.peek_word_is("!") {
            negate = !negate;
            self.pos += 1;
        }
        Ok(Pipeline {
            negate,
            command: self.command()?,
        })
    }

    fn command(&mut self) -> Result<Command, Unsupported> {
        let Some(Tok::Word(w)) = self.peek().cloned() else {
            return self.simple();
        };
        match w.literal() {
            Some("if") => {
                self.pos += 1;
                let mut branches = Vec::new();
                let mut otherwise = None;
                loop {
                    let cond = self.list(&["then"])?;
                    self.expect("then")?;
                    let body = self.list(&["elif", "else", "fi"])?;
                    branches.push((cond, body));
                    match self.next() {
                        Some(Tok::Word(k)) if k.is("elif") => continue,
                        Some(Tok::Word(k)) if k.is("else") => {
                            otherwise = Some(self.list(&["fi"])?);
                            self.expect("fi")?;
                            break;
                        }
                        Some(Tok::Word(k)) if k.is("fi") => break,
                        _ => return Err(Unsupported::new("unterminated if")),
                    }
                }
                self.no_trailing_redirect()?;
                Ok(Command::If {
                    branches,
                    otherwise,
                })
            }
            Some(kw @ ("while" | "until")) => {
                let until = kw == "until";
                self.pos += 1;
                let cond = self.list(&["do"])?;
                self.expect("do")?;
                let body = self.list(&["done"])?;
                self.expect("done")?;
                self.no_trailing_redirect()?;
                Ok(Command::While { cond, body, until })
            }
            Some("for") => {
                self.pos += 1;
                let var = match self.next() {
                    Some(Tok::Word(v)) => v
                        .literal()
                        .filter(|v| is_name(v))
                        .map(str::to_string)
                        .ok_or_else(|| Unsupported::new("for without a name"))?,
                    _ => return Err(Unsupported::new("for without a name")),
                };
                self.skip_newlines();
                if !self.peek_word_is("in") {
                    return Err(Unsupported::new("for without in"));
                }
                self.pos += 1;
                let mut words = Vec::new();
                while let Some(Tok::Word(w)) = self.peek() {
                    words.push(w.clone());
                    self.pos += 1;
                }
                if matches!(self.peek(), Some(Tok::Semi)) {
                    self.pos += 1;
                }
                self.expect("do")?;
                let body = self.list(&["done"])?;
                self.expect("done")?;
                self.no_trailing_redirect()?;
                Ok(Command::For { var, words, body })
            }
            Some("[[") => {
                self.pos += 1;
                let mut words = Vec::new();
                loop {
                    match self.next() {
                        Some(Tok::Word(w)) if w.is("]]") => break,
                        Some(Tok::Word(w)) => words.push(w),
                        _ => return Err(Unsupported::new("[[ with operators")),
                    }
                }
                Ok(Command::Test(words))
            }
            Some(k) if KEYWORDS.contains(&k) => Err(Unsupported::new(format!("keyword {k}"))),
            _ => self.simple(),
        }
    }

    fn no_trailing_redirect(&self) -> Result<(), Unsupported> {
        match self.peek() {
            Some(Tok::Redirect(..)) => Err(Unsupported::new("redirected compound command")),
            _ => Ok(()),
        }
    }

    fn simple(&mut self) -> Result<Command, Unsupported> {
        let mut assigns = Vec::new();
        let mut words: Vec<Word> = Vec::new();
        let mut redirects = Vec::new();
        loop {
            match self.peek().cloned() {
                Some(Tok::Word(w)) => {
                    self.pos += 1;
                    if words.is_empty()
                        && let Some((name, value)) = assignment(&w)
                    {
                        assigns.push((name, value));
                    } else {
                        words.push(w);
                    }
                }
                Some(Tok::Redirect(kind, fd, both)) => {
                    self.pos += 1;
                    match self.next() {
                        Some(Tok::Word(target)) => redirects.push(Redirect {
                            kind,
                            target,
                            fd,
                            both,
                        }),
                        _ => return Err(Unsupported::new("redirection without a target")),
                    }
                }
                _ => break,
            }
        }
        if assigns.is_empty() && words.is_empty() && redirects.is_empty() {
            return Err(Unsupported::new("empty command"));
        }
        Ok(Command::Simple {
            assigns,
            words,
            redirects,
        })
    }
}

/// `NAME=value` as (name, value), if the word is an assignment.
fn assignment(w: &Word) -> Option<(String, Word)> {
    let Some(Part::Lit(first)) = w.parts.first() else {
        return None;
    };
    let eq = first.find('=')?;
    let name = &first[..eq];
    if !is_name(name) {
        return None;
    }
    let mut parts = w.parts.clone();
    parts[0] = Part::Lit(first[eq + 1..].to_string());
    if matches!(&parts[0], Part::Lit(s) if s.is_empty()) && parts.len() > 1 {
        parts.remove(0);
    }
    Some((
        name.to_string(),
        Word {
            parts,
            quoted: w.quoted,
        },
    ))
}
