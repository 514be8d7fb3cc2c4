//! The limits cel-go's parser puts on an expression before it builds anything from it: at most
//! 100,000 code points (`expressionSizeCodePointLimit`), and no grammar rule nested more than
//! 250 deep (`maxRecursionDepth`, counted per rule by its `recursionListener`).
//!
//! The `cel` crate's parser and evaluator recurse once per level of the expression, and its own
//! limit counts only parenthesised nesting, so `1+1+...+1` with 2,000 terms parses and then
//! overflows the evaluating thread's stack (and with 20,000 the parser's). The check here runs
//! first, over the tokens, with recursion bounded by the limit itself.
//!
//! Hand-written: no crate measures CEL's grammar depth the way cel-go's ANTLR listener does. It
//! follows `CEL.g4`: ANTLR enters a rule once per call and once more per operator of a
//! left-recursive rule (`relation`, `calc`, `member`), whose contexts stay open until the rule
//! ends; `conditionalOr` and `conditionalAnd` are loops and do not nest.

/// cel-go's default `expressionSizeCodePointLimit`.
pub(crate) const MAX_CODE_POINTS: usize = 100_000;

/// cel-go's default `maxRecursionDepth`.
pub(crate) const MAX_RECURSION_DEPTH: usize = 250;

/// Why `source` exceeds cel-go's parse limits, worded as cel-go reports it, if it does.
pub(crate) fn check(source: &str) -> Result<(), String> {
    let size = source.chars().count();
    if size > MAX_CODE_POINTS {
        return Err(no_location(&format!(
            "expression code point size exceeds limit: size: {size}, limit {MAX_CODE_POINTS}"
        )));
    }
    let tokens = lex(source);
    let mut probe = Probe {
        tokens: &tokens,
        at: 0,
        depth: [0; RULES],
    };
    match probe.start() {
        Err(TooDeep) => Err(no_location(&format!(
            "expression recursion limit exceeded: {MAX_RECURSION_DEPTH}"
        ))),
        Ok(()) => Ok(()),
    }
}

/// cel-go's rendering of an error without a location.
fn no_location(message: &str) -> String {
    format!("ERROR: <input>:-1:0: {message}")
}

/// What the probe needs of a token; anything else is `Other`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Token {
    Question,
    Colon,
    Or,
    And,
    Relation,
    Additive,
    Multiplicative,
    Not,
    Minus,
    Dot,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Ident,
    Literal,
    Other,
}

/// Splits `source` into tokens; strings (all of CEL's quotings) and comments are skipped whole,
/// so that an operator inside a string counts for nothing.
fn lex(source: &str) -> Vec<Token> {
    let b = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let two = b.get(i + 1).copied();
        let (token, len) = match c {
            b' ' | b'\t' | b'\n' | b'\r' | 0x0c => {
                i += 1;
                continue;
            }
            b'/' if two == Some(b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'?' => (Token::Question, 1),
            b':' => (Token::Colon, 1),
            b'|' if two == Some(b'|') => (Token::Or, 2),
            b'&' if two == Some(b'&') => (Token::And, 2),
            b'=' if two == Some(b'=') => (Token::Relation, 2),
            b'!' if two == Some(b'=') => (Token::Relation, 2),
            b'<' | b'>' if two == Some(b'=') => (Token::Relation, 2),
            b'<' | b'>' => (Token::Relation, 1),
            b'!' => (Token::Not, 1),
            b'-' => (Token::Minus, 1),
            b'+' => (Token::Additive, 1),
            b'*' | b'/' | b'%' => (Token::Multiplicative, 1),
            b'.' if two.is_some_and(|d| d.is_ascii_digit()) => (Token::Literal, number(b, i)),
            b'.' => (Token::Dot, 1),
            b'(' => (Token::LParen, 1),
            b')' => (Token::RParen, 1),
            b'[' => (Token::LBracket, 1),
            b']' => (Token::RBracket, 1),
            b'{' => (Token::LBrace, 1),
            b'}' => (Token::RBrace, 1),
            b',' => (Token::Comma, 1),
            b'0'..=b'9' => (Token::Literal, number(b, i)),
            b'"' | b'\'' => (Token::Literal, string(b, i, 0)),
            b'r' | b'R' | b'b' | b'B' if matches!(two, Some(b'"' | b'\'')) => {
                (Token::Literal, string(b, i + 1, 1))
            }
            b'r' | b'R' | b'b' | b'B'
                if matches!(two, Some(b'r' | b'R' | b'b' | b'B'))
                    && matches!(b.get(i + 2), Some(b'"' | b'\'')) =>
            {
                (Token::Literal, string(b, i + 2, 2))
            }
            b'`' => {
                let end = b[i + 1..]
                    .iter()
                    .position(|&c| c == b'`')
                    .map_or(b.len() - i, |p| p + 2);
                (Token::Ident, end)
            }
            c if c == b'_' || c.is_ascii_alphabetic() => {
                let len = b[i..]
                    .iter()
                    .position(|&c| !(c == b'_' || c.is_ascii_alphanumeric()))
                    .unwrap_or(b.len() - i);
                let word = &source[i..i + len];
                let token = match word {
                    "in" => Token::Relation,
                    "true" | "false" | "null" => Token::Literal,
                    _ => Token::Ident,
                };
                (token, len)
            }
            _ => (
                Token::Other,
                source[i..].chars().next().map_or(1, char::len_utf8),
            ),
        };
        out.push(token);
        i += len.max(1);
    }
    out
}

/// The length of the number at `i` (digits, hex, exponent, `u` suffix).
fn number(b: &[u8], i: usize) -> usize {
    let mut j = i;
    while j < b.len() {
        let c = b[j];
        let exponent_sign = matches!(c, b'+' | b'-') && j > i && matches!(b[j - 1], b'e' | b'E');
        if c.is_ascii_alphanumeric() || c == b'.' || exponent_sign {
            j += 1;
        } else {
            break;
        }
    }
    j - i
}

/// The length of the string literal whose quote is at `q`, plus `prefix` bytes before it;
/// triple quotes and backslash escapes included.
fn string(b: &[u8], q: usize, prefix: usize) -> usize {
    let quote = b[q];
    let triple = b.get(q + 1) == Some(&quote) && b.get(q + 2) == Some(&quote);
    let open = if triple { 3 } else { 1 };
    let mut j = q + open;
    while j < b.len() {
        if b[j] == b'\\' {
            j += 2;
            continue;
        }
        if b[j] == quote
            && (!triple || (b.get(j + 1) == Some(&quote) && b.get(j + 2) == Some(&quote)))
        {
            return j + open - q + prefix;
        }
        if !triple && b[j] == b'\n' {
            break;
        }
        j += 1;
    }
    b.len() - q + prefix
}

/// The grammar's rules whose depth is counted.
#[derive(Clone, Copy)]
enum Rule {
    Expr,
    Or,
    And,
    Relation,
    Calc,
    Unary,
    Member,
    Primary,
    List,
    Literal,
}
const RULES: usize = 10;

/// The limit was reached.
struct TooDeep;

type Probed = Result<(), TooDeep>;

/// Walks the tokens as `CEL.g4` parses them, counting each rule's open contexts.
struct Probe<'a> {
    tokens: &'a [Token],
    at: usize,
    depth: [usize; RULES],
}

impl Probe<'_> {
    fn peek(&self) -> Option<Token> {
        self.tokens.get(self.at).copied()
    }

    fn eat(&mut self, t: Token) -> bool {
        let hit = self.peek() == Some(t);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn enter(&mut self, rule: Rule) -> Probed {
        let d = &mut self.depth[rule as usize];
        *d += 1;
        if *d > MAX_RECURSION_DEPTH {
            return Err(TooDeep);
        }
        Ok(())
    }

    /// Leaves `rule` and the `n - 1` contexts its operators pushed.
    fn leave(&mut self, rule: Rule, n: usize) {
        let d = &mut self.depth[rule as usize];
        *d = d.saturating_sub(n);
    }

    fn start(&mut self) -> Probed {
        // Tokens past a complete expression are a syntax error for the real parser to report.
        self.expr()
    }

    fn expr(&mut self) -> Probed {
        self.enter(Rule::Expr)?;
        self.or()?;
        if self.eat(Token::Question) {
            self.or()?;
            self.eat(Token::Colon);
            self.expr()?;
        }
        self.leave(Rule::Expr, 1);
        Ok(())
    }

    fn or(&mut self) -> Probed {
        self.enter(Rule::Or)?;
        self.and()?;
        while self.eat(Token::Or) {
            self.and()?;
        }
        self.leave(Rule::Or, 1);
        Ok(())
    }

    fn and(&mut self) -> Probed {
        self.enter(Rule::And)?;
        self.relation()?;
        while self.eat(Token::And) {
            self.relation()?;
        }
        self.leave(Rule::And, 1);
        Ok(())
    }

    fn relation(&mut self) -> Probed {
        self.enter(Rule::Relation)?;
        let mut open = 1;
        self.calc(0)?;
        while self.eat(Token::Relation) {
            self.enter(Rule::Relation)?;
            open += 1;
            // The right operand: `relation` at a higher precedence, which takes one `calc`.
            self.enter(Rule::Relation)?;
            self.calc(0)?;
            self.leave(Rule::Relation, 1);
        }
        self.leave(Rule::Relation, open);
        Ok(())
    }

    /// `calc` at precedence `min`: 0 takes `+`/`-` and `*`/`/`/`%`, 1 only the latter.
    fn calc(&mut self, min: u8) -> Probed {
        self.enter(Rule::Calc)?;
        let mut open = 1;
        self.unary()?;
        loop {
            let level = match self.peek() {
                Some(Token::Multiplicative) => 1,
                Some(Token::Additive | Token::Minus) if min == 0 => 0,
                _ => break,
            };
            self.at += 1;
            self.enter(Rule::Calc)?;
            open += 1;
            // The right operand binds tighter: only `*`/`/`/`%` go into it after `+`/`-`.
            if level == 0 {
                self.calc(1)?;
            } else {
                self.enter(Rule::Calc)?;
                self.unary()?;
                self.leave(Rule::Calc, 1);
            }
        }
        self.leave(Rule::Calc, open);
        Ok(())
    }

    fn unary(&mut self) -> Probed {
        self.enter(Rule::Unary)?;
        while self.eat(Token::Not) || self.eat(Token::Minus) {}
        self.member()?;
        self.leave(Rule::Unary, 1);
        Ok(())
    }

    fn member(&mut self) -> Probed {
        self.enter(Rule::Member)?;
        let mut open = 1;
        self.primary()?;
        loop {
            match self.peek() {
                Some(Token::Dot) => {
                    self.at += 1;
                    self.eat(Token::Question);
                    self.eat(Token::Ident);
                    if self.peek() == Some(Token::LParen) {
                        self.at += 1;
                        self.list(Token::RParen)?;
                    }
                }
                Some(Token::LBracket) => {
                    self.at += 1;
                    self.eat(Token::Question);
                    self.expr()?;
                    self.eat(Token::RBracket);
                }
                _ => break,
            }
            self.enter(Rule::Member)?;
            open += 1;
        }
        self.leave(Rule::Member, open);
        Ok(())
    }

    fn primary(&mut self) -> Probed {
        self.enter(Rule::Primary)?;
        match self.peek() {
            Some(Token::Dot | Token::Ident) => {
                self.eat(Token::Dot);
                self.eat(Token::Ident);
                match self.peek() {
                    Some(Token::LParen) => {
                        self.at += 1;
                        self.list(Token::RParen)?;
                    }
                    // A message literal: `Type{field: value}`, its name maybe qualified.
                    Some(Token::LBrace) => {
                        self.at += 1;
                        self.list(Token::RBrace)?;
                    }
                    _ => {}
                }
            }
            Some(Token::LParen) => {
                self.at += 1;
                self.expr()?;
                self.eat(Token::RParen);
            }
            Some(Token::LBracket) => {
                self.at += 1;
                self.list(Token::RBracket)?;
            }
            Some(Token::LBrace) => {
                self.at += 1;
                self.list(Token::RBrace)?;
            }
            Some(Token::Literal) => {
                self.enter(Rule::Literal)?;
                self.at += 1;
                self.leave(Rule::Literal, 1);
            }
            _ => {}
        }
        self.leave(Rule::Primary, 1);
        Ok(())
    }

    /// Comma-separated expressions (map entries and fields as `key : value`) up to `close`.
    fn list(&mut self, close: Token) -> Probed {
        self.enter(Rule::List)?;
        while self.peek().is_some() && !self.eat(close) {
            let before = self.at;
            self.eat(Token::Question);
            self.expr()?;
            if self.eat(Token::Colon) {
                self.eat(Token::Question);
                self.expr()?;
            }
            self.eat(Token::Comma);
            if self.at == before {
                // A token no rule takes: the real parser reports it; skip it here.
                self.at += 1;
            }
        }
        self.leave(Rule::List, 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(terms: usize) -> String {
        format!("{} > 0", vec!["1"; terms].join("+"))
    }

    #[test]
    fn long_operator_chains_exceed_the_recursion_limit() {
        assert_eq!(
            check(&sum(2_000)),
            Err("ERROR: <input>:-1:0: expression recursion limit exceeded: 250".into())
        );
        assert!(check(&sum(200)).is_ok());
        let product = vec!["2"; 300].join(" * ");
        assert!(check(&product).is_err());
        let selections = format!("object{}", ".a".repeat(300));
        assert!(check(&selections).is_err());
        let parens = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        assert!(check(&parens).is_err());
    }

    #[test]
    fn logical_chains_are_loops_and_do_not_nest() {
        let ands = vec!["true"; 2_000].join(" && ");
        assert!(check(&ands).is_ok());
    }

    #[test]
    fn operators_inside_strings_and_comments_count_for_nothing() {
        let s = format!("'{}' == 'x' // {}", "+".repeat(5_000), "(".repeat(5_000));
        assert!(check(&s).is_ok());
        let raw = format!("r\"{}\" == b'''{}'''", "*".repeat(400), "-".repeat(400));
        assert!(check(&raw).is_ok());
    }

    #[test]
    fn real_policies_pass() {
        for src in [
            "object.spec.replicas <= 5",
            "object.spec.template.spec.containers.all(c, c.image.startsWith('registry.example.com/'))",
            "has(object.metadata.labels) && 'env' in object.metadata.labels ? object.metadata.labels['env'] in ['prod', 'dev'] : false",
            "request.userInfo.username == 'admin' || authorizer.group('apps').resource('deployments').namespace(object.metadata.namespace).check('update').allowed()",
            "[1, 2, 3].map(x, x * 2).filter(x, x > 2).size() == 2 && {'a': 1}.a == 1 && -1.5e3 < 0.5",
        ] {
            assert!(check(src).is_ok(), "{src}");
        }
    }

    #[test]
    fn the_size_limit_counts_code_points() {
        let long = format!("'{}' == ''", "é".repeat(MAX_CODE_POINTS));
        assert_eq!(
            check(&long),
            Err(format!(
                "ERROR: <input>:-1:0: expression code point size exceeds limit: size: {}, limit 100000",
                MAX_CODE_POINTS + 8
            ))
        );
    }
}
