//! Kubernetes' CEL `url` library (`apiserver/pkg/cel/library/urls.go`): `url()`, `isURL()` and a
//! URL's `getScheme()`, `getHost()`, `getHostname()`, `getPort()`, `getEscapedPath()`,
//! `getQuery()`.
//!
//! Hand-written after Go's `url.ParseRequestURI`, which the library uses: the `url` crate
//! normalizes (default ports, empty paths, case), which Kubernetes' documented answers do not.
//! A URL is a CEL map tagged with a hidden key holding its parsed parts.

use std::sync::Arc;

use cel::{
    ExecutionError, Value,
    common::{
        types::{MAP_TYPE, STRING_TYPE},
        value::CowVal,
    },
    objects::Key,
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use super::values::{args_of, map_of, out};

const TAG: &str = "@url";

/// What Go's `EscapedPath` leaves alone: unreserved characters and `$&+,/:;=@`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'$')
    .remove(b'&')
    .remove(b'+')
    .remove(b',')
    .remove(b'/')
    .remove(b':')
    .remove(b';')
    .remove(b'=')
    .remove(b'@');

/// A parsed URL's parts.
#[derive(Debug, Default, PartialEq)]
struct Parts {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

/// Go's `url.ParseRequestURI`: an absolute URI or an absolute path.
fn parse(raw: &str) -> Result<Parts, String> {
    let bad = |why: &str| format!("parse {raw:?}: {why}");
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(bad("net/url: invalid control character in URL"));
    }
    let (scheme, rest) = match raw.split_once(':') {
        Some((s, rest))
            if s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (s.to_string(), rest)
        }
        _ if raw.starts_with('/') => (String::new(), raw),
        _ => return Err(bad("invalid URI for request")),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, q.to_string()),
        None => (rest, String::new()),
    };
    let (host, path) = match rest.strip_prefix("//") {
        Some(authority_and_path) if !scheme.is_empty() || raw.starts_with("//") => {
            let end = authority_and_path
                .find('/')
                .unwrap_or(authority_and_path.len());
            let (authority, path) = authority_and_path.split_at(end);
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            check_host(host).map_err(|why| bad(&why))?;
            (host.to_string(), path)
        }
        _ => {
            if scheme.is_empty() || rest.starts_with('/') {
                (String::new(), rest)
            } else {
                return Err(bad("invalid URI for request"));
            }
        }
    };
    let path = percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| bad("invalid URL escape"))?;
    Ok(Parts {
        scheme,
        host,
        path: path.into_owned(),
        query,
    })
}

/// Go's `parseHost`: a bracketed IPv6 address or a name, then an optional numeric port.
fn check_host(host: &str) -> Result<(), String> {
    let port = if let Some(rest) = host.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        &rest[close + 1..]
    } else {
        host.rfind(':').map_or("", |i| &host[i..])
    };
    match port.strip_prefix(':') {
        None if port.is_empty() => Ok(()),
        Some(digits) if digits.chars().all(|c| c.is_ascii_digit()) => Ok(()),
        _ => Err(format!("invalid port {port:?} after host")),
    }
}

fn hostname_and_port(host: &str) -> (String, String) {
    if let Some(rest) = host.strip_prefix('[') {
        let close = rest.find(']').unwrap_or(rest.len());
        let port = rest[close..].strip_prefix("]:").unwrap_or_default();
        return (rest[..close].to_string(), port.to_string());
    }
    match host.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.to_string()),
        None => (host.to_string(), String::new()),
    }
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

fn url_value(p: &Parts) -> Value {
    let (hostname, port) = hostname_and_port(&p.host);
    let escaped_path = utf8_percent_encode(&p.path, PATH).to_string();
    map_of([
        (TAG.to_string(), Value::Bool(true)),
        ("scheme".to_string(), text(&p.scheme)),
        ("host".to_string(), text(&p.host)),
        ("hostname".to_string(), text(&hostname)),
        ("port".to_string(), text(&port)),
        ("escapedPath".to_string(), text(&escaped_path)),
        ("query".to_string(), query_value(&p.query)),
    ])
}

/// Go's `url.ParseQuery`: `&`-separated `key=value` pairs, unescaped (`+` is a space); pairs
/// that do not unescape are dropped.
fn query_value(query: &str) -> Value {
    let unescape = |s: &str| {
        percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|s| s.into_owned())
    };
    let mut keys: Vec<(String, Vec<Value>)> = Vec::new();
    for pair in query
        .split('&')
        .filter(|p| !p.is_empty() && !p.contains(';'))
    {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(k), Some(v)) = (unescape(k), unescape(v)) else {
            continue;
        };
        match keys.iter_mut().find(|(key, _)| *key == k) {
            Some((_, values)) => values.push(text(&v)),
            None => keys.push((k, vec![text(&v)])),
        }
    }
    map_of(keys.into_iter().map(|(k, v)| (k, Value::List(Arc::new(v)))))
}

/// Registers the library.
pub(crate) fn register(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    env.add_overload("url", "string_to_url", vec![STRING_TYPE], url)?;
    env.add_overload("isURL", "is_url_string", vec![STRING_TYPE], is_url)?;
    for (name, f) in [
        ("getScheme", get_scheme as cel::common::functions::Function),
        ("getHost", get_host),
        ("getHostname", get_hostname),
        ("getPort", get_port),
        ("getEscapedPath", get_escaped_path),
        ("getQuery", get_query),
    ] {
        env.add_member_overload(name, &format!("url_{name}"), MAP_TYPE, vec![], f)?;
    }
    Ok(())
}

type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn string_arg(function: &str, args: &[CowVal<'_, '_>]) -> Result<String, ExecutionError> {
    match args_of(function, args)?.into_iter().next() {
        Some(Value::String(s)) => Ok(s.to_string()),
        _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
    }
}

fn url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let raw = string_arg("url", &args)?;
    let parts = parse(&raw).map_err(|e| ExecutionError::function_error("url", e))?;
    out("url", url_value(&parts))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let raw = string_arg("isURL", &args)?;
    out("isURL", Value::Bool(parse(&raw).is_ok()))
}

fn field<'b, 'v>(function: &str, key: &str, args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let receiver = args_of(function, &args)?.into_iter().next();
    let Some(Value::Map(m)) = receiver else {
        return Err(ExecutionError::no_such_overload(function, Vec::new()));
    };
    if !m.map.contains_key(&Key::String(Arc::new(TAG.to_string()))) {
        return Err(ExecutionError::no_such_overload(function, Vec::new()));
    }
    let value = m
        .map
        .get(&Key::String(Arc::new(key.to_string())))
        .cloned()
        .unwrap_or(Value::Null);
    out(function, value)
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getScheme", "scheme", args)
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getHost", "host", args)
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getHostname", "hostname", args)
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getPort", "port", args)
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getEscapedPath", "escapedPath", args)
}

fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    field("getQuery", "query", args)
}

#[cfg(test)]
mod tests {
    use super::super::expression::Compiled;
    use cel::Value;

    /// The examples of upstream's `urls.go` documentation.
    #[test]
    fn upstreams_documented_examples() {
        let cases = [
            "isURL('https://user:pass@example.com:80/path?query=val#fragment')",
            "isURL('/absolute-path')",
            "!isURL('https://a:b:c/')",
            "!isURL('../relative-path')",
            "url('/path').getScheme() == ''",
            "url('https://example.com/').getScheme() == 'https'",
            "url('https://example.com:80/').getHost() == 'example.com:80'",
            "url('https://example.com/').getHost() == 'example.com'",
            "url('https://[::1]:80/').getHost() == '[::1]:80'",
            "url('https://[::1]/').getHost() == '[::1]'",
            "url('/path').getHost() == ''",
            "url('https://example.com:80/').getHostname() == 'example.com'",
            "url('https://127.0.0.1:80/').getHostname() == '127.0.0.1'",
            "url('https://[::1]:80/').getHostname() == '::1'",
            "url('/path').getHostname() == ''",
            "url('https://example.com:80/').getPort() == '80'",
            "url('https://example.com/').getPort() == ''",
            "url('/path').getPort() == ''",
            "url('https://example.com/path').getEscapedPath() == '/path'",
            "url('https://example.com/path with spaces/').getEscapedPath() == '/path%20with%20spaces/'",
            "url('https://example.com').getEscapedPath() == ''",
            "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
            "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key with spaces': ['value with spaces']}",
            "url('https://example.com/path?').getQuery() == {}",
            "url('https://example.com/path').getQuery() == {}",
        ];
        for src in cases {
            assert_eq!(Compiled::new(src).eval(&[]), Ok(Value::Bool(true)), "{src}");
        }
        assert!(Compiled::new("url('../relative-path')").eval(&[]).is_err());
    }
}
