//! How upstream's checks word their details (`policy/helpers.go` and Go's `%q`).

/// `singular` for one, `plural` otherwise.
pub(crate) fn pluralize<'a>(singular: &'a str, plural: &'a str, count: usize) -> &'a str {
    if count == 1 { singular } else { plural }
}

/// `"a", "b", "c"`: each item in double quotes, as upstream's `joinQuote` (which quotes without
/// escaping).
pub(crate) fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    quoted.join(", ")
}

/// `s` as Go's `%q` prints it. Hand-written: Go's escaping differs from JSON's and Rust's
/// `{:?}` (`\x01`, `\a`, `\v`). Non-printable is approximated by Unicode control characters.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_as_upstream() {
        assert_eq!(pluralize("container", "containers", 1), "container");
        assert_eq!(pluralize("container", "containers", 2), "containers");
        assert_eq!(join_quote(["a", "b"]), r#""a", "b""#);
        assert_eq!(join_quote(Vec::<String>::new()), "");
        assert_eq!(go_quote("unconfined"), r#""unconfined""#);
        assert_eq!(go_quote("a\"b\\\u{1}\u{7f}\té"), r#""a\"b\\\x01\x7f\té""#);
    }
}
