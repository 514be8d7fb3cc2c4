//! Kubernetes' CEL `authorizer` library (`apiserver/pkg/cel/library/authz.go`):
//! `authorizer.group(g).resource(r).subresource(s).namespace(n).name(x).check(verb)`,
//! `authorizer.path(p).check(verb)`, `authorizer.serviceAccount(ns, name)`,
//! `authorizer.requestResource`, and a decision's `allowed()`, `reason()`, `errored()`,
//! `error()`.
//!
//! Hand-written: Kubernetes' own library. Its values are CEL maps tagged with a hidden kind
//! (the crate's opaque values cannot carry member functions of their own); `check` asks the
//! server's authorizer, reached through a thread-local set around one evaluation (evaluations
//! are synchronous).

use std::{cell::RefCell, sync::Arc};

use authz::{Attributes, Decision, UserInfo};
use cel::{
    ExecutionError, Value,
    common::{
        types::{MAP_TYPE, STRING_TYPE},
        value::CowVal,
    },
    objects::Key,
};

use super::values::{args_of, map_of, out};

/// Asks the server's authorizer.
pub(crate) type Authorize = Arc<dyn Fn(&Attributes) -> Decision + Send + Sync>;

thread_local! {
    static CURRENT: RefCell<Option<(UserInfo, Authorize)>> = const { RefCell::new(None) };
}

/// Runs `f` with `check` answering for `user` through `authorize`.
pub(crate) fn with<R>(user: &UserInfo, authorize: &Authorize, f: impl FnOnce() -> R) -> R {
    CURRENT.with(|c| *c.borrow_mut() = Some((user.clone(), authorize.clone())));
    let r = f();
    CURRENT.with(|c| *c.borrow_mut() = None);
    r
}

const TAG: &str = "@authz";
const SA: &str = "@serviceAccount";

/// The `authorizer` variable.
pub(crate) fn authorizer() -> Value {
    tagged("authorizer", [])
}

/// The `authorizer.requestResource` value: the request's own resource.
pub(crate) fn request_resource(
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: &str,
    name: &str,
) -> Value {
    tagged(
        "resource",
        [
            ("group", group),
            ("resource", resource),
            ("subresource", subresource),
            ("namespace", namespace),
            ("name", name),
        ],
    )
}

fn text(s: &str) -> Value {
    Value::String(Arc::new(s.to_string()))
}

fn tagged<'a>(kind: &str, fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    map_of(
        std::iter::once((TAG.to_string(), text(kind)))
            .chain(fields.into_iter().map(|(k, v)| (k.to_string(), text(v)))),
    )
}

/// Registers the library's member functions.
pub(crate) fn register(env: &mut cel::Env) -> Result<(), cel::DeclarationError> {
    let one = |name: &str| (name.to_string(), vec![STRING_TYPE]);
    for (name, args, f) in [
        (
            "path",
            one("path").1,
            path as cel::common::functions::Function,
        ),
        ("group", one("group").1, group),
        ("resource", one("resource").1, resource),
        ("subresource", one("subresource").1, subresource),
        ("namespace", one("namespace").1, namespace),
        ("name", one("name").1, name),
        ("check", one("check").1, check),
        (
            "serviceAccount",
            vec![STRING_TYPE, STRING_TYPE],
            service_account,
        ),
        ("allowed", vec![], allowed),
        ("reason", vec![], reason),
        ("errored", vec![], errored),
        ("error", vec![], error),
    ] {
        env.add_member_overload(name, &format!("authz_{name}"), MAP_TYPE, args, f)?;
    }
    Ok(())
}

type Fields = std::collections::HashMap<Key, Value>;

/// The receiver's fields, if it is a value of `kind`, and the string arguments.
fn receiver(
    function: &str,
    kind: &str,
    args: &[CowVal<'_, '_>],
) -> Result<(Fields, Vec<String>), ExecutionError> {
    let values = args_of(function, args)?;
    let mut it = values.into_iter();
    let fields = match it.next() {
        Some(Value::Map(m)) => m.map.as_ref().clone(),
        _ => return Err(ExecutionError::no_such_overload(function, Vec::new())),
    };
    if get(&fields, TAG) != kind {
        return Err(ExecutionError::no_such_overload(function, Vec::new()));
    }
    let strings = it
        .map(|v| match v {
            Value::String(s) => Ok(s.to_string()),
            _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
        })
        .collect::<Result<_, _>>()?;
    Ok((fields, strings))
}

fn get(fields: &Fields, key: &str) -> String {
    match fields.get(&Key::String(Arc::new(key.to_string()))) {
        Some(Value::String(s)) => s.to_string(),
        _ => String::new(),
    }
}

fn with_fields<'b, 'v>(
    function: &str,
    mut fields: Fields,
    kind: &str,
    set: &[(&str, String)],
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    fields.insert(Key::String(Arc::new(TAG.to_string())), text(kind));
    for (k, v) in set {
        fields.insert(Key::String(Arc::new(k.to_string())), text(v));
    }
    out(function, Value::Map(fields.into()))
}

type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) = receiver("path", "authorizer", &args)?;
    if a[0].trim().is_empty() {
        return Err(ExecutionError::function_error(
            "path",
            "path must not be empty",
        ));
    }
    with_fields("path", fields, "path", &[("path", a[0].clone())])
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) = receiver("group", "authorizer", &args)?;
    with_fields("group", fields, "group", &[("group", a[0].clone())])
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) = receiver("serviceAccount", "authorizer", &args)?;
    let dns_label = regex::Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$").ok();
    let valid = |s: &str| s.len() <= 63 && dns_label.as_ref().is_some_and(|r| r.is_match(s));
    if !valid(&a[0]) {
        return Err(ExecutionError::function_error(
            "serviceAccount",
            "Invalid service account namespace",
        ));
    }
    if a[1].is_empty() || a[1].len() > 253 {
        return Err(ExecutionError::function_error(
            "serviceAccount",
            "Invalid service account name",
        ));
    }
    with_fields(
        "serviceAccount",
        fields,
        "authorizer",
        &[(SA, format!("{}:{}", a[0], a[1]))],
    )
}

fn resource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) = receiver("resource", "group", &args)?;
    if a[0].trim().is_empty() {
        return Err(ExecutionError::function_error(
            "resource",
            "resource must not be empty",
        ));
    }
    with_fields(
        "resource",
        fields,
        "resource",
        &[("resource", a[0].clone())],
    )
}

fn narrowing<'b, 'v>(function: &'static str, args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) = receiver(function, "resource", &args)?;
    with_fields(function, fields, "resource", &[(function, a[0].clone())])
}

fn subresource<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    narrowing("subresource", args)
}

fn namespace<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    narrowing("namespace", args)
}

fn name<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    narrowing("name", args)
}

/// `check(verb)` on a path or resource check: the authorizer's decision.
fn check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let (fields, a) =
        receiver("check", "path", &args).or_else(|_| receiver("check", "resource", &args))?;
    let Some((user, authorize)) = CURRENT.with(|c| c.borrow().clone()) else {
        return Err(ExecutionError::function_error("check", "no authorizer"));
    };
    let sa = get(&fields, SA);
    let user = match sa.split_once(':') {
        Some((ns, name)) => UserInfo::new(
            format!("system:serviceaccount:{ns}:{name}"),
            &[
                "system:serviceaccounts",
                &format!("system:serviceaccounts:{ns}"),
                authz::AUTHENTICATED_GROUP,
            ],
        ),
        None => user,
    };
    let is_path = get(&fields, TAG) == "path";
    let attrs = Attributes {
        user,
        verb: a[0].clone(),
        resource_request: !is_path,
        api_group: get(&fields, "group"),
        api_version: if is_path { String::new() } else { "*".into() },
        resource: get(&fields, "resource"),
        subresource: get(&fields, "subresource"),
        namespace: get(&fields, "namespace"),
        name: get(&fields, "name"),
        path: get(&fields, "path"),
    };
    let decision = authorize(&attrs);
    out(
        "check",
        map_of([
            (TAG.to_string(), text("decision")),
            ("allowed".to_string(), Value::Bool(decision.allowed())),
            ("reason".to_string(), text(decision.reason())),
        ]),
    )
}

fn decision_field<'b, 'v>(
    function: &str,
    args: Vec<CowVal<'b, 'v>>,
) -> Result<Fields, ExecutionError> {
    let values = args_of(function, &args)?;
    match values.into_iter().next() {
        Some(Value::Map(m)) if get(&m.map, TAG) == "decision" => Ok(m.map.as_ref().clone()),
        _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
    }
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let fields = decision_field("allowed", args)?;
    let allowed = matches!(
        fields.get(&Key::String(Arc::new("allowed".into()))),
        Some(Value::Bool(true))
    );
    out("allowed", Value::Bool(allowed))
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    let fields = decision_field("reason", args)?;
    out("reason", text(&get(&fields, "reason")))
}

/// rollwright's authorizer does not fail: never errored.
fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    decision_field("errored", args)?;
    out("errored", Value::Bool(false))
}

fn error<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Out<'b, 'v> {
    decision_field("error", args)?;
    out("error", text(""))
}
