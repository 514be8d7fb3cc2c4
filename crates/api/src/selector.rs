//! Label and field selectors: the `labelSelector` / `fieldSelector` query parameters and the
//! `metav1.LabelSelector` of workload specs.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/labels` and `pkg/fields`: the same grammar, the same
//! validation of keys and values, the same canonical string form and the same matching rules
//! (notably, `!=` and `notin` match objects that lack the label, and a field selector treats an
//! absent field as the empty string).

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value};
use std::{collections::BTreeMap, collections::BTreeSet, fmt};

/// Why a selector was rejected; messages follow upstream's parser and validation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The text does not follow the selector grammar.
    #[error("{0}")]
    Syntax(String),
    /// The selector is well formed but a key, value, operator or value count is invalid.
    #[error("{0}")]
    Invalid(String),
}

/// A parsed label selector: requirements that must all hold, sorted by key as upstream sorts them.
///
/// An empty selector matches everything. Upstream treats a *nil* `*LabelSelector` in a workload
/// spec as matching nothing; that case has no value here, so callers holding an `Option` decide.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and without duplicates.
    values: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl LabelSelector {
    /// Parses the query-string form, e.g. `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let tokens = lex(s);
        let mut parser = Parser {
            tokens: &tokens,
            position: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Converts a workload's `metav1.LabelSelector` (`matchLabels` and `matchExpressions`).
    pub fn from_label_selector(sel: &meta::LabelSelector) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for (key, value) in sel.match_labels.iter().flatten() {
            requirements.push(Requirement::new(
                key,
                Operator::Equals,
                std::slice::from_ref(value),
            )?);
        }
        for expr in sel.match_expressions.iter().flatten() {
            let operator = match expr.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::Invalid(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            let values = expr.values.as_deref().unwrap_or_default();
            requirements.push(Requirement::new(&expr.key, operator, values)?);
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Converts the raw JSON form of a `metav1.LabelSelector`, as stored objects carry it.
    pub fn from_json(v: &Value) -> Result<Self, SelectorError> {
        let sel: meta::LabelSelector = serde_json::from_value(v.clone())
            .map_err(|e| SelectorError::Invalid(format!("invalid label selector: {e}")))?;
        Self::from_label_selector(&sel)
    }

    /// Whether labels looked up through `label` satisfy every requirement.
    pub fn matches<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        self.requirements.iter().all(|r| r.matches(label(&r.key)))
    }

    /// [`matches`](Self::matches) over a JSON `metadata.labels` map; non-string values count as
    /// absent.
    pub fn matches_map(&self, labels: &Map<String, Value>) -> bool {
        self.matches(|k| labels.get(k).and_then(Value::as_str))
    }

    /// [`matches`](Self::matches) over the labels of a typed `ObjectMeta`.
    pub fn matches_labels(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        self.matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
    }

    /// Whether the selector has no requirements, and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The `key=value` requirements (`=`, `==`, `in` with one value), which an index can serve.
    pub fn exact_values(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements
            .iter()
            .filter_map(|r| match (r.operator, r.values.as_slice()) {
                (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => {
                    Some((r.key.as_str(), value.as_str()))
                }
                _ => None,
            })
    }
}

impl fmt::Display for LabelSelector {
    /// The canonical form, upstream's `String()`: requirements sorted by key, values sorted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl Requirement {
    /// Upstream `NewRequirement`: validates the key, the values and their count.
    fn new(key: &str, operator: Operator, values: &[String]) -> Result<Self, SelectorError> {
        let mut errors = Vec::new();
        if let Err(detail) = validate_qualified_name(key) {
            errors.push(invalid("key", key, &detail));
        }
        let count_error = match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            Operator::GreaterThan | Operator::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_error {
            errors.push(format!(
                "values: Invalid value: {}: {detail}",
                go_string_slice(values)
            ));
        }
        for (i, value) in values.iter().enumerate() {
            if matches!(operator, Operator::GreaterThan | Operator::LessThan)
                && value.parse::<i64>().is_err()
            {
                errors.push(invalid(
                    &format!("values[{i}]"),
                    value,
                    "for 'Gt', 'Lt' operators, the value must be an integer",
                ));
            }
            if let Err(detail) = validate_label_value(value) {
                errors.push(invalid(&format!("values[{i}][{key}]"), value, &detail));
            }
        }
        match errors.len() {
            0 => {}
            1 => return Err(SelectorError::Invalid(errors.remove(0))),
            _ => return Err(SelectorError::Invalid(format!("[{}]", errors.join(", ")))),
        }
        let values: BTreeSet<&String> = values.iter().collect();
        Ok(Requirement {
            key: key.to_owned(),
            operator,
            values: values.into_iter().cloned().collect(),
        })
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    fn matches(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(Ok(have)), Some(Ok(want))) = (
                    value.map(str::parse::<i64>),
                    self.values.first().map(|v| v.parse::<i64>()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (op, parens) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => ("=", false),
            Operator::DoubleEquals => ("==", false),
            Operator::NotEquals => ("!=", false),
            Operator::GreaterThan => (">", false),
            Operator::LessThan => ("<", false),
            Operator::In => (" in ", true),
            Operator::NotIn => (" notin ", true),
        };
        f.write_str(op)?;
        if parens {
            f.write_str("(")?;
        }
        f.write_str(&self.values.join(","))?;
        if parens {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A lexer token of the label selector grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Identifier,
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    DoesNotExist,
    GreaterThan,
    LessThan,
    OpenPar,
    ClosedPar,
    Comma,
    End,
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Upstream's lexer: special symbols (longest match of `==` and `!=`), keywords `in` and `notin`,
/// and identifiers running up to whitespace or a special symbol.
fn lex(s: &str) -> Vec<(Token, &str)> {
    let bytes = s.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && is_whitespace(bytes[i]) {
            i += 1;
        }
        let Some(&b) = bytes.get(i) else {
            tokens.push((Token::End, ""));
            return tokens;
        };
        let start = i;
        if is_special(b) {
            let two = bytes.get(i + 1).map(|&n| (b, n));
            let token = match two {
                Some((b'=', b'=')) => Token::DoubleEquals,
                Some((b'!', b'=')) => Token::NotEquals,
                _ => match b {
                    b'=' => Token::Equals,
                    b'!' => Token::DoesNotExist,
                    b'(' => Token::OpenPar,
                    b')' => Token::ClosedPar,
                    b',' => Token::Comma,
                    b'>' => Token::GreaterThan,
                    _ => Token::LessThan,
                },
            };
            i += if matches!(token, Token::DoubleEquals | Token::NotEquals) {
                2
            } else {
                1
            };
            tokens.push((token, &s[start..i]));
        } else {
            while i < bytes.len() && !is_special(bytes[i]) && !is_whitespace(bytes[i]) {
                i += 1;
            }
            let word = &s[start..i];
            let token = match word {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier,
            };
            tokens.push((token, word));
        }
    }
}

/// Whether `in` / `notin` are keywords (after a key) or plain values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'t, 's> {
    tokens: &'t [(Token, &'s str)],
    position: usize,
}

impl<'s> Parser<'_, 's> {
    fn lookahead(&self, context: Context) -> (Token, &'s str) {
        let (token, literal) = self
            .tokens
            .get(self.position)
            .copied()
            .unwrap_or((Token::End, ""));
        match token {
            Token::In | Token::NotIn if context == Context::Values => (Token::Identifier, literal),
            _ => (token, literal),
        }
    }

    fn consume(&mut self, context: Context) -> (Token, &'s str) {
        let item = self.lookahead(context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self.parse_requirement().map_err(|e| match e {
                        SelectorError::Syntax(m) => {
                            SelectorError::Syntax(format!("unable to parse requirement: {m}"))
                        }
                        SelectorError::Invalid(m) => {
                            SelectorError::Invalid(format!("unable to parse requirement: {m}"))
                        }
                    })?;
                    requirements.push(r);
                    let (token, literal) = self.consume(Context::Values);
                    match token {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let (next, literal) = self.lookahead(Context::Values);
                            if next != Token::Identifier && next != Token::DoesNotExist {
                                return Err(syntax(format!(
                                    "found '{literal}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(syntax(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(syntax(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut operator = None;
        let (mut token, mut key) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(Operator::DoesNotExist);
            (token, key) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(syntax(format!("found '{key}', expected: identifier")));
        }
        if let Err(detail) = validate_qualified_name(key) {
            return Err(SelectorError::Invalid(invalid("key", key, &detail)));
        }
        let (next, _) = self.lookahead(Context::Values);
        if let Some(operator) = operator {
            // `!key` takes no operator; whatever follows is the caller's to reject.
            return Requirement::new(key, operator, &[]);
        }
        if matches!(next, Token::End | Token::Comma) {
            return Requirement::new(key, Operator::Exists, &[]);
        }
        let operator = self.parse_operator()?;
        let values: Vec<String> = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        }
        .into_iter()
        .collect();
        Requirement::new(key, operator, &values)
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(syntax(format!(
                    "found '{literal}', expected: '=', '!=', '==', 'in', notin'"
                )));
            }
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(syntax(format!("found '{literal}' expected: '('")));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                let (token, _) = self.consume(Context::Values);
                if token != Token::ClosedPar {
                    return Err(syntax(format!("found '{literal}', expected: ')'")));
                }
                Ok(values)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(syntax(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            ))),
        }
    }

    /// A comma-separated list of possibly empty values: `(a,,b)` holds `a`, `` and `b`.
    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal.to_owned());
                    let (next, literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(values),
                        _ => {
                            return Err(syntax(format!("found '{literal}', expected: ',' or ')'")));
                        }
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Token::ClosedPar {
                        values.insert(String::new());
                        return Ok(values);
                    }
                    if next == Token::Comma {
                        self.consume(Context::Values);
                        values.insert(String::new());
                    }
                }
                _ => {
                    return Err(syntax(format!(
                        "found '{literal}', expected: ',', or identifier"
                    )));
                }
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let (token, _) = self.lookahead(Context::Values);
        if matches!(token, Token::End | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            return Ok(BTreeSet::from([literal.to_owned()]));
        }
        Err(syntax(format!("found '{literal}', expected: identifier")))
    }
}

fn syntax(message: String) -> SelectorError {
    SelectorError::Syntax(message)
}

/// An upstream `field.Invalid` message for a string value.
fn invalid(field: &str, value: &str, detail: &str) -> String {
    format!("{field}: Invalid value: {value:?}: {detail}")
}

/// Go's `%#v` of a `[]string`, as upstream prints invalid value lists.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
const LABEL_VALUE_MAX_LENGTH: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
const QUALIFIED_NAME_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const DNS1123_SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_VALUE_ERROR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`: the name part of a label key and a non-empty
/// label value.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Upstream `IsDNS1123Subdomain`: dot-separated lowercase RFC 1123 labels.
fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if s.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(format!(
            "must be no more than {DNS1123_SUBDOMAIN_MAX_LENGTH} characters"
        ));
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                (first.is_ascii_lowercase() || first.is_ascii_digit())
                    && (last.is_ascii_lowercase() || last.is_ascii_digit())
                    && b.iter()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
            }
            _ => false,
        }
    };
    if !s.split('.').all(label_ok) {
        errors.push(DNS1123_SUBDOMAIN_ERROR.to_owned());
    }
    errors
}

/// Upstream `IsQualifiedName`: `[prefix/]name`, the errors joined by `; `.
fn validate_qualified_name(s: &str) -> Result<(), String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_owned());
            } else {
                errors.extend(
                    dns1123_subdomain_errors(prefix)
                        .into_iter()
                        .map(|e| format!("prefix part {e}")),
                );
            }
            *name
        }
        _ => {
            return Err(format!(
                "a qualified name {QUALIFIED_NAME_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ));
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errors.push(format!(
            "name part must be no more than {QUALIFIED_NAME_MAX_LENGTH} characters"
        ));
    }
    if !is_qualified_name_part(name) {
        errors.push(format!("name part {QUALIFIED_NAME_ERROR}"));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Upstream `IsValidLabelValue`.
fn validate_label_value(s: &str) -> Result<(), String> {
    let mut errors = Vec::new();
    if s.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(format!(
            "must be no more than {LABEL_VALUE_MAX_LENGTH} characters"
        ));
    }
    if !s.is_empty() && !is_qualified_name_part(s) {
        errors.push(LABEL_VALUE_ERROR.to_owned());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// A parsed field selector: `field=value` / `field==value` / `field!=value` terms, all of which
/// must hold. Which fields exist is the server's concern ([`fields`](Self::fields) lists them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    /// Sorted by their text, as upstream sorts the terms.
    terms: Vec<FieldTerm>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    value: String,
    equal: bool,
}

impl FieldSelector {
    /// Parses `metadata.name=x,spec.nodeName!=,status.phase==Running`; values may escape `\,`,
    /// `\=` and `\\`. No whitespace is trimmed, as upstream.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((field, op, raw)) = split_term(part) else {
                return Err(SelectorError::Syntax(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldTerm {
                field: field.to_owned(),
                value: unescape_value(raw)?,
                equal: op != "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the object's fields, looked up through `field`, satisfy every term. An absent
    /// field (`None`) compares as the empty string, as upstream's `fields.Set` does.
    pub fn matches(&self, field: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = field(&t.field);
            let have = have.as_deref().unwrap_or("");
            (have == t.value) == t.equal
        })
    }

    /// The field names used, so the server can reject those a resource does not support.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// The value of a `field=value` term, so the server can serve it from an index.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.equal && t.field == field)
            .map(|t| t.value.as_str())
    }

    /// Whether the selector has no terms, and so matches everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

impl fmt::Display for FieldSelector {
    /// Upstream's `String()`: `field=value` / `field!=value`, values escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(&t.field)?;
            f.write_str(if t.equal { "=" } else { "!=" })?;
            for c in t.value.chars() {
                if matches!(c, '\\' | ',' | '=') {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// Splits on commas not escaped by a backslash; escapes stay in the terms.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator; `!=` and `==` are tried before `=`.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError::Syntax(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(SelectorError::Syntax(format!(
                    "invalid field selector: unescaped character in value: {c}"
                )));
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err(SelectorError::Syntax(
            "invalid field selector: invalid escape sequence: \\".to_owned(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn parses_and_prints_canonically() {
        let cases = [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a==b"),
            ("  a = b ,  c != d ", "a=b,c!=d"),
            (
                "x in (foo,,baz),y,z notin ()",
                "x in (,baz,foo),y,z notin ()",
            ),
            ("e in (y, x, x)", "e in (x,y)"),
            ("f notin (z)", "f notin (z)"),
            ("!h,g", "g,!h"),
            ("a!=", "a!="),
            ("a=", "a="),
            ("in in (in,notin)", "in in (in,notin)"),
            ("example.com/app=web", "example.com/app=web"),
            ("a>1,b<10", "a>1,b<10"),
            ("b=2,a=1,b!=3", "a=1,b=2,b!=3"),
            ("x in (a),y", "x in (a),y"),
        ];
        for (input, canonical) in cases {
            let sel = LabelSelector::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} should parse: {e}"));
            assert_eq!(sel.to_string(), canonical, "{input:?}");
            let again = LabelSelector::parse(canonical)
                .unwrap_or_else(|e| panic!("{canonical:?} should parse: {e}"));
            assert_eq!(again, sel, "round trip of {input:?}");
        }
    }

    #[test]
    fn rejects_invalid_label_selectors() {
        let name_regex = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let cases = [
            ("a=b,", "found '', expected: identifier after ','".to_owned()),
            ("a=b c", "found 'c', expected: ',' or 'end of string'".to_owned()),
            ("=a", "found '=', expected: !, identifier, or 'end of string'".to_owned()),
            ("a=b,,c", "found ',', expected: identifier after ','".to_owned()),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: '=', '!=', '==', 'in', notin'"
                    .to_owned(),
            ),
            (
                "x in a",
                "unable to parse requirement: found 'a' expected: '('".to_owned(),
            ),
            (
                "x in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'".to_owned(),
            ),
            (
                "x in (a",
                "unable to parse requirement: found '', expected: ',' or ')'".to_owned(),
            ),
            (
                "x in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier"
                    .to_owned(),
            ),
            (
                "a=(b)",
                "unable to parse requirement: found '(', expected: identifier".to_owned(),
            ),
            ("!a=b", "found '=', expected: ',' or 'end of string'".to_owned()),
            (
                "-a=b",
                format!("unable to parse requirement: key: Invalid value: \"-a\": {name_regex}"),
            ),
            (
                "a/b/c",
                "unable to parse requirement: key: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned(),
            ),
            (
                "/a",
                "unable to parse requirement: key: Invalid value: \"/a\": prefix part must be non-empty".to_owned(),
            ),
            (
                "a=b_",
                "unable to parse requirement: values[0][a]: Invalid value: \"b_\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_owned(),
            ),
            (
                "a>x",
                "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer".to_owned(),
            ),
        ];
        for (input, message) in cases {
            match LabelSelector::parse(input) {
                Ok(sel) => panic!("{input:?} should fail, got {sel}"),
                Err(e) => assert_eq!(e.to_string(), message, "{input:?}"),
            }
        }
        let long = format!("a={}", "v".repeat(64));
        assert!(LabelSelector::parse(&long).is_err());
        let long_key = format!("{}=v", "k".repeat(64));
        assert!(LabelSelector::parse(&long_key).is_err());
    }

    #[test]
    fn matches_as_upstream() {
        let pod = labels(&[("app", "web"), ("tier", "front"), ("n", "5"), ("empty", "")]);
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app=db", false),
            ("app!=db", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("missing=x", false),
            ("app in (db,web)", true),
            ("app in (db)", false),
            ("missing in (x)", false),
            ("app notin (db)", true),
            ("app notin (web)", false),
            ("missing notin (x)", true),
            ("app", true),
            ("missing", false),
            ("!missing", true),
            ("!app", false),
            ("empty=", true),
            ("empty", true),
            ("n>4", true),
            ("n>5", false),
            ("n<6", true),
            ("app>1", false),
            ("missing<1", false),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
        ];
        let map = json!({"app": "web", "tier": "front", "n": "5", "empty": "", "bad": 1});
        let map = map.as_object().cloned().unwrap_or_default();
        for (input, expected) in cases {
            let sel = LabelSelector::parse(input).unwrap();
            assert_eq!(sel.matches_labels(Some(&pod)), expected, "{input:?}");
            assert_eq!(sel.matches_map(&map), expected, "{input:?} over JSON");
            assert_eq!(
                sel.matches(|k| pod.get(k).map(String::as_str)),
                expected,
                "{input:?} via closure"
            );
        }
        // A non-string JSON label value counts as absent.
        let sel = LabelSelector::parse("!bad").unwrap();
        assert!(sel.matches_map(&map));
        assert!(LabelSelector::default().matches_labels(None));
        assert!(!LabelSelector::parse("app").unwrap().matches_labels(None));
    }

    #[test]
    fn converts_metav1_label_selectors() {
        let cases = [
            (json!({}), Ok("")),
            (json!({"matchLabels": {"b": "2", "a": "1"}}), Ok("a=1,b=2")),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["b", "a"]},
                    {"key": "env", "operator": "NotIn", "values": ["prod"]},
                    {"key": "x", "operator": "Exists"},
                    {"key": "y", "operator": "DoesNotExist", "values": []}
                ]}),
                Ok("app=web,env notin (prod),tier in (a,b),x,!y"),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                Err(
                    "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
                ),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}),
                Err(
                    "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty",
                ),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                Err(
                    "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist",
                ),
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
                Err("\"Gt\" is not a valid label selector operator"),
            ),
            (
                json!({"matchLabels": {"a": "not valid"}}),
                Err(
                    "values[0][a]: Invalid value: \"not valid\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue', or 'my_value', or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                ),
            ),
        ];
        for (raw, expected) in cases {
            let from_json = LabelSelector::from_json(&raw);
            let typed: meta::LabelSelector = serde_json::from_value(raw.clone()).unwrap();
            let from_typed = LabelSelector::from_label_selector(&typed);
            assert_eq!(from_json, from_typed, "{raw}");
            let got = from_json.map(|s| s.to_string()).map_err(|e| e.to_string());
            assert_eq!(
                got,
                expected.map(str::to_owned).map_err(str::to_owned),
                "{raw}"
            );
        }
        assert!(LabelSelector::from_json(&json!(null)).is_err());
        assert!(LabelSelector::from_json(&json!({"matchLabels": {"a": 1}})).is_err());
    }

    #[test]
    fn exact_values_serve_indexes() {
        let sel = LabelSelector::parse("a=1,b==2,c in (3),d in (4,5),e!=6,f").unwrap();
        let exact: Vec<(&str, &str)> = sel.exact_values().collect();
        assert_eq!(exact, vec![("a", "1"), ("b", "2"), ("c", "3")]);
        assert!(LabelSelector::parse("").unwrap().is_empty());
        assert!(!sel.is_empty());
    }

    #[test]
    fn parses_field_selectors() {
        let cases = [
            ("", Ok("")),
            ("metadata.name=x", Ok("metadata.name=x")),
            (
                "status.phase==Running,spec.nodeName!=",
                Ok("spec.nodeName!=,status.phase=Running"),
            ),
            ("a=x\\,y,b=\\=\\\\", Ok("a=x\\,y,b=\\=\\\\")),
            (",a=b,", Ok("a=b")),
            ("a==", Ok("a=")),
            (
                "a=b=c",
                Err("invalid field selector: unescaped character in value: ="),
            ),
            (
                "abc",
                Err("invalid selector: 'abc'; can't understand 'abc'"),
            ),
            (
                "a=\\x",
                Err("invalid field selector: invalid escape sequence: \\x"),
            ),
            (
                "a=x\\",
                Err("invalid field selector: invalid escape sequence: \\"),
            ),
        ];
        for (input, expected) in cases {
            let got = FieldSelector::parse(input)
                .map(|s| s.to_string())
                .map_err(|e| e.to_string());
            assert_eq!(
                got,
                expected.map(str::to_owned).map_err(str::to_owned),
                "{input:?}"
            );
            if let Ok(canonical) = got {
                let a = FieldSelector::parse(input).unwrap();
                assert_eq!(FieldSelector::parse(&canonical).unwrap(), a, "round trip");
            }
        }
    }

    #[test]
    fn matches_fields() {
        let pod = |field: &str| -> Option<String> {
            match field {
                "metadata.name" => Some("web-0".to_owned()),
                "status.phase" => Some("Running".to_owned()),
                "spec.nodeName" => Some(String::new()),
                "metadata.namespace" => Some("a,b=c".to_owned()),
                _ => None,
            }
        };
        let cases = [
            ("", true),
            ("metadata.name=web-0", true),
            ("metadata.name=web-1", false),
            ("metadata.name!=web-1", true),
            ("status.phase==Running,metadata.name=web-0", true),
            ("status.phase=Running,metadata.name!=web-0", false),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("unknown.field=", true),
            ("unknown.field!=x", true),
            ("metadata.namespace=a\\,b\\=c", true),
        ];
        for (input, expected) in cases {
            let sel = FieldSelector::parse(input).unwrap();
            assert_eq!(sel.matches(pod), expected, "{input:?}");
        }
        let sel = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed").unwrap();
        assert_eq!(sel.exact("spec.nodeName"), Some("n1"));
        assert_eq!(sel.exact("status.phase"), None);
        assert_eq!(
            sel.fields().collect::<Vec<_>>(),
            vec!["spec.nodeName", "status.phase"]
        );
    }
}
