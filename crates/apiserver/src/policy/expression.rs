//! CEL as Kubernetes' admission expressions see it (`apiserver/pkg/cel/environment`, version
//! 1.27 for new expressions in 1.28): the standard library and macros, the strings extension,
//! and Kubernetes' `lists` and `regex` libraries; objects as CEL maps.
//!
//! The `lists` and `regex` functions are hand-written here: they are Kubernetes' own libraries,
//! which no crate provides; `authorizer` is in [`super::authorizer`], `url` in [`super::urls`].
//! `quantity()` is not provided (1.28 allows it only in stored expressions).

use std::{sync::Arc, sync::OnceLock};

use cel::{
    Context, Env, ExecutionError, Value,
    common::{
        types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE},
        value::CowVal,
    },
};

use super::{
    cost::{self, Instrumented},
    values::{Out, args_of, out},
};

/// The environment every admission expression compiles and runs in.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Each registration names a distinct overload; a failure would be a programming error
        // caught by this module's tests, so it is logged rather than propagated.
        let results = [
            env.add_extension(cel::extensions::strings),
            env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted),
            env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum),
            env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min),
            env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max),
            env.add_member_overload(
                "indexOf",
                "list_index_of",
                LIST_TYPE,
                vec![DYN_TYPE],
                index_of,
            ),
            env.add_member_overload(
                "lastIndexOf",
                "list_last_index_of",
                LIST_TYPE,
                vec![DYN_TYPE],
                last_index_of,
            ),
            env.add_member_overload("find", "string_find", STRING_TYPE, vec![STRING_TYPE], find),
            env.add_member_overload(
                "findAll",
                "string_find_all",
                STRING_TYPE,
                vec![STRING_TYPE],
                find_all,
            ),
            env.add_member_overload(
                "findAll",
                "string_find_all_n",
                STRING_TYPE,
                vec![STRING_TYPE, INT_TYPE],
                find_all_n,
            ),
            super::authorizer::register(&mut env),
            super::urls::register(&mut env),
            env.add_overload(
                super::cost::CHARGE,
                "cost_charge",
                vec![DYN_TYPE, INT_TYPE],
                super::cost::charge,
            ),
            env.add_overload(
                super::cost::EQUALS,
                "cost_equals",
                vec![DYN_TYPE, DYN_TYPE, INT_TYPE],
                super::cost::equals,
            ),
            env.add_overload(
                super::cost::NOT_EQUALS,
                "cost_not_equals",
                vec![DYN_TYPE, DYN_TYPE, INT_TYPE],
                super::cost::not_equals,
            ),
        ];
        for r in results {
            if let Err(e) = r {
                tracing::error!(error = %e, "CEL library registration failed");
            }
        }
        Arc::new(env)
    })
}

/// Why `source` does not parse, if it does not.
pub(crate) fn compile_error(source: &str) -> Option<String> {
    compile(source).err()
}

/// `source` compiled, within cel-go's parse limits ([`super::parse_limits`]) and on a stack
/// deep enough for what those limits let through; instrumented to count its cost.
fn compile(source: &str) -> Result<Instrumented, String> {
    super::parse_limits::check(source)?;
    super::evaluator::on_large_stack(|| {
        env()
            .compile(source)
            .map(|p| cost::instrument(p.expression().clone()))
            .map_err(|e| e.to_string())
    })
    .unwrap_or_else(|| Err("the expression could not be compiled".into()))
}

/// A compiled expression, or why it does not compile (upstream's `compilation error: ...`).
pub(crate) struct Compiled {
    source: String,
    program: Result<Instrumented, String>,
}

/// An expression's value (or error, as upstream's filter words it) and what it cost.
pub(crate) struct Evaluated {
    pub(crate) value: Result<Value, String>,
    pub(crate) cost: u64,
}

impl Compiled {
    pub(crate) fn new(source: &str) -> Self {
        Compiled {
            source: source.to_string(),
            program: compile(source).map_err(|e| format!("compilation error: {e}")),
        }
    }

    /// The expression's value with `vars` bound; errors as upstream's filter words them.
    #[cfg(test)]
    pub(crate) fn eval(&self, vars: &[(&str, &Value)]) -> Result<Value, String> {
        self.eval_metered(vars).value
    }

    /// The expression's value with `vars` bound and what it cost, stopped past
    /// [`cost::PER_CALL_LIMIT`] (cel-go's `CostLimit`, which upstream sets for every
    /// admission expression).
    pub(crate) fn eval_metered(&self, vars: &[(&str, &Value)]) -> Evaluated {
        let program = match &self.program {
            Ok(p) => p,
            Err(e) => {
                return Evaluated {
                    value: Err(e.clone()),
                    cost: 0,
                };
            }
        };
        let mut ctx = Context::with_env(env().clone());
        for (name, value) in vars {
            ctx.add_variable_from_value(*name, (*value).clone());
        }
        let (value, spent) = cost::metered(program, cost::PER_CALL_LIMIT, || {
            Value::resolve(&program.expr, &ctx)
        });
        let error = |e: &str| format!("expression '{}' resulted in error: {e}", self.source);
        let value = if spent.exceeded {
            Err(error(cost::LIMIT_EXCEEDED))
        } else {
            value.map_err(|e| error(&describe(&e)))
        };
        Evaluated {
            value,
            cost: spent.cost,
        }
    }
}

fn describe(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        other => other.to_string(),
    }
}

fn list_arg(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(Vec<Value>, Vec<Value>), ExecutionError> {
    let mut values = args_of(function, args)?;
    if values.is_empty() {
        return Err(ExecutionError::function_error(function, "missing receiver"));
    }
    match values.remove(0) {
        Value::List(l) => Ok((l.as_ref().clone(), values)),
        other => Err(ExecutionError::function_error(
            function,
            format!("not a list: {other:?}"),
        )),
    }
}

fn compare(function: &str, a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    a.partial_cmp(b).ok_or_else(|| {
        ExecutionError::function_error(function, format!("cannot compare {a:?} and {b:?}"))
    })
}

/// `list.isSorted()`.
fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (list, _) = list_arg("isSorted", &args)?;
    for pair in list.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == std::cmp::Ordering::Greater {
            return out("isSorted", Value::Bool(false));
        }
    }
    out("isSorted", Value::Bool(true))
}

/// `list.sum()`: 0 of the elements' type for an empty list (int for an untyped one).
fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (list, _) = list_arg("sum", &args)?;
    let mut total = match list.first() {
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(Value::Duration(_)) => Value::Duration(Default::default()),
        _ => Value::Int(0),
    };
    for v in list {
        total = match (total, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => Value::Duration(a + b),
            (a, b) => {
                return Err(ExecutionError::function_error(
                    "sum",
                    format!("cannot add {a:?} and {b:?}"),
                ));
            }
        };
    }
    out("sum", total)
}

fn extreme<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
    keep: std::cmp::Ordering,
) -> Out<'b, 'v> {
    let (list, _) = list_arg(function, &args)?;
    let mut it = list.into_iter();
    let Some(mut best) = it.next() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    for v in it {
        if compare(function, &v, &best)? == keep {
            best = v;
        }
    }
    out(function, best)
}

/// `list.min()`.
fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    extreme("min", args, std::cmp::Ordering::Less)
}

/// `list.max()`.
fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    extreme("max", args, std::cmp::Ordering::Greater)
}

/// `list.indexOf(x)`: -1 when absent.
fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (list, rest) = list_arg("indexOf", &args)?;
    let i = rest
        .first()
        .and_then(|x| list.iter().position(|v| v == x))
        .map_or(-1, |i| i as i64);
    out("indexOf", Value::Int(i))
}

/// `list.lastIndexOf(x)`: -1 when absent.
fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (list, rest) = list_arg("lastIndexOf", &args)?;
    let i = rest
        .first()
        .and_then(|x| list.iter().rposition(|v| v == x))
        .map_or(-1, |i| i as i64);
    out("lastIndexOf", Value::Int(i))
}

fn strings_of(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(String, regex::Regex, Option<i64>), ExecutionError> {
    let values = args_of(function, args)?;
    match values.as_slice() {
        [Value::String(s), Value::String(re), rest @ ..] => {
            let re = regex::Regex::new(re)
                .map_err(|e| ExecutionError::function_error(function, e.to_string()))?;
            let n = match rest {
                [Value::Int(n)] => Some(*n),
                _ => None,
            };
            Ok((s.to_string(), re, n))
        }
        _ => Err(ExecutionError::function_error(
            function,
            "expected string arguments",
        )),
    }
}

/// `string.find(regex)`: the first match, or `""`.
fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, re, _) = strings_of("find", &args)?;
    let found = re
        .find(&s)
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    out("find", Value::String(Arc::new(found)))
}

fn all_matches(s: &str, re: &regex::Regex, n: Option<i64>) -> Value {
    let limit = match n {
        Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    Value::List(Arc::new(
        re.find_iter(s)
            .take(limit)
            .map(|m| Value::String(Arc::new(m.as_str().to_string())))
            .collect(),
    ))
}

/// `string.findAll(regex)`.
fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, re, _) = strings_of("findAll", &args)?;
    out("findAll", all_matches(&s, &re, None))
}

/// `string.findAll(regex, n)`: at most `n` matches (all for a negative `n`).
fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (s, re, n) = strings_of("findAll", &args)?;
    out("findAll", all_matches(&s, &re, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::values::value_of;
    use serde_json::json;

    fn eval(src: &str, object: serde_json::Value) -> Result<Value, String> {
        let o = value_of(&object);
        Compiled::new(src).eval(&[("object", &o)])
    }

    #[test]
    fn kubernetes_libraries_evaluate() {
        let obj = json!({"spec": {"replicas": 3, "xs": [1, 2, 3], "name": "abc-123-def-45"}});
        let cases = [
            ("object.spec.replicas <= 5", true),
            ("object.spec.xs.isSorted()", true),
            ("object.spec.xs.sum() == 6", true),
            (
                "object.spec.xs.min() == 1 && object.spec.xs.max() == 3",
                true,
            ),
            (
                "object.spec.xs.indexOf(2) == 1 && object.spec.xs.lastIndexOf(9) == -1",
                true,
            ),
            ("object.spec.name.find('[0-9]+') == '123'", true),
            ("object.spec.name.findAll('[0-9]+') == ['123', '45']", true),
            ("object.spec.name.findAll('[0-9]+', 1) == ['123']", true),
            (
                "object.spec.name.upperAscii().lowerAscii() == object.spec.name",
                true,
            ),
            ("object.spec.name.split('-').size() == 4", true),
            (
                "object.spec.xs.all(x, x > 0) && object.spec.xs.exists_one(x, x == 2)",
                true,
            ),
            (
                "object.spec.xs.map(x, x * 2).filter(x, x > 2) == [4, 6]",
                true,
            ),
            (
                "has(object.spec.replicas) && !has(object.spec.paused)",
                true,
            ),
            (
                "object.spec.name.matches('^abc') && object.spec.name.startsWith('abc')",
                true,
            ),
            ("duration('1h') < duration('2h')", true),
        ];
        for (src, want) in cases {
            assert_eq!(eval(src, obj.clone()), Ok(Value::Bool(want)), "{src}");
        }
    }

    /// The examples of upstream's `lists.go` and `regex.go` documentation (the regex ones with
    /// `+`: with `*`, Go's `FindString` answers the empty match at 0, as the regex crate does).
    #[test]
    fn upstreams_documented_library_examples() {
        let cases = [
            "[1, 2, 3].isSorted() && ['a', 'b', 'b', 'c'].isSorted() && ![2.0, 1.0].isSorted()",
            "[1, 3].sum() == 4",
            "[1.0, 3.0].sum() == 4.0",
            "[duration('1m'), duration('1s')].sum() == duration('61s')",
            "[].sum() == 0",
            "[1, 3].min() == 1 && [1, 3].max() == 3 && [1].min() == 1",
            "[1, 2, 2, 3].indexOf(2) == 1",
            "['a', 'b', 'b', 'c'].lastIndexOf('b') == 2",
            "[1.0].indexOf(1.1) == -1",
            "[].indexOf('string') == -1",
            "'abc 123'.find('[0-9]+') == '123'",
            "'abc 123'.find('xyz') == ''",
            "'123 abc 456'.findAll('[0-9]+') == ['123', '456']",
            "'123 abc 456'.findAll('[0-9]+', 1) == ['123']",
            "'123 abc 456'.findAll('xyz') == []",
        ];
        for src in cases {
            assert_eq!(Compiled::new(src).eval(&[]), Ok(Value::Bool(true)), "{src}");
        }
        assert!(Compiled::new("[].min()").eval(&[]).is_err());
    }

    #[test]
    fn errors_are_worded_as_upstreams_filter() {
        let e = eval("object.spec.missing == 1", json!({"spec": {}})).unwrap_err();
        assert!(
            e.starts_with("expression 'object.spec.missing == 1' resulted in error: "),
            "{e}"
        );
        let e = eval("object.spec.(", json!({})).unwrap_err();
        assert!(e.starts_with("compilation error: "), "{e}");
    }
}
