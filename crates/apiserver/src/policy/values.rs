//! Values as CEL sees them: JSON converted to CEL values, and the conversions the hand-written
//! library functions ([`super::expression`], [`super::authorizer`], [`super::urls`]) share.

use std::{collections::HashMap, sync::Arc};

use cel::{
    ExecutionError, Value,
    common::value::{CowVal, Val},
    objects::Key,
};

/// A JSON value as CEL sees it: integers as `int`, other numbers as `double`, objects as maps
/// with string keys.
pub(crate) fn value_of(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or_default()),
        },
        serde_json::Value::String(s) => Value::String(Arc::new(s.clone())),
        serde_json::Value::Array(a) => Value::List(Arc::new(a.iter().map(value_of).collect())),
        serde_json::Value::Object(m) => {
            let map: HashMap<Key, Value> = m
                .iter()
                .map(|(k, v)| (Key::from(k.clone()), value_of(v)))
                .collect();
            Value::Map(map.into())
        }
    }
}

/// A map of named values (for `variables`, `request`...).
pub(crate) fn map_of(entries: impl IntoIterator<Item = (String, Value)>) -> Value {
    let map: HashMap<Key, Value> = entries
        .into_iter()
        .map(|(k, v)| (Key::from(k), v))
        .collect();
    Value::Map(map.into())
}

pub(super) type Out<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

pub(super) fn args_of(
    function: &str,
    args: &[CowVal<'_, '_>],
) -> Result<Vec<Value>, ExecutionError> {
    args.iter()
        .map(|a| {
            Value::try_from(a.as_ref())
                .map_err(|e| ExecutionError::function_error(function, e.to_string()))
        })
        .collect()
}

pub(super) fn out<'b, 'v>(function: &str, v: Value) -> Out<'b, 'v> {
    let boxed: Box<dyn Val> = Box::<dyn Val>::try_from(v)
        .map_err(|e| ExecutionError::function_error(function, e.to_string()))?;
    Ok(CowVal::Owned(boxed))
}
