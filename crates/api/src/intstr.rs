//! Int-or-percent values (`maxSurge: 1`, `maxUnavailable: "25%"`) and the rollout arithmetic over them.
//!
//! Upstream's `intstr.GetScaledValueFromIntOrPercent` and the Deployment controller's
//! `ResolveFenceposts`, over the JSON values the API server stores. The rounding direction is part
//! of the contract: Deployments round `maxSurge` up and `maxUnavailable` down so that a percentage
//! never lets a small Deployment stall (see SEMANTICS.md, "Int-or-percent").

use serde_json::Value;
use thiserror::Error;

/// A count given either absolutely or as a percentage of a total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// An absolute count.
    Int(i32),
    /// A percentage, `25` for `"25%"`.
    Percent(i32),
}

/// Why a value cannot be used as an int-or-percent; messages follow upstream's `intstr`.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum IntOrPercentError {
    /// A string without a trailing `%` (upstream refuses to scale those).
    #[error("invalid type: string is not a percentage")]
    NotPercent,
    /// A string ending in `%` whose number does not parse.
    #[error("invalid value for IntOrString: invalid value {0:?}")]
    BadPercent(String),
    /// Neither a number nor a string.
    #[error("invalid type for IntOrString: {0}")]
    WrongType(String),
    /// A number that is not an `int32`.
    #[error("invalid value for IntOrString: {0} is not a 32-bit integer")]
    OutOfRange(String),
}

impl IntOrPercent {
    /// Reads a JSON number or a `"N%"` string.
    pub fn parse(v: &Value) -> Result<Self, IntOrPercentError> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .map(IntOrPercent::Int)
                .ok_or_else(|| IntOrPercentError::OutOfRange(n.to_string())),
            Value::String(s) => {
                let digits = s.strip_suffix('%').ok_or(IntOrPercentError::NotPercent)?;
                digits
                    .parse::<i32>()
                    .map(IntOrPercent::Percent)
                    .map_err(|_| IntOrPercentError::BadPercent(s.clone()))
            }
            other => Err(IntOrPercentError::WrongType(other.to_string())),
        }
    }

    /// The bare number, whether count or percentage (upstream's `getIntOrPercentValue`, used
    /// by validation to ask "is this zero?").
    pub fn raw(self) -> i32 {
        match self {
            IntOrPercent::Int(v) | IntOrPercent::Percent(v) => v,
        }
    }
}

/// Resolves `v` against `total`: a count as is, a percentage of `total` rounded up or down.
pub fn scaled_value(v: &IntOrPercent, total: i32, round_up: bool) -> i32 {
    match *v {
        IntOrPercent::Int(i) => i,
        IntOrPercent::Percent(p) => {
            let product = i64::from(p) * i64::from(total);
            let scaled = if round_up {
                -(-product).div_euclid(100)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(scaled).unwrap_or(if scaled < 0 { i32::MIN } else { i32::MAX })
        }
    }
}

/// Like [`scaled_value`] for an optional JSON field, with `default` when it is absent or null.
pub fn scaled_value_or(
    v: Option<&Value>,
    default: IntOrPercent,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    let parsed = match v {
        None | Some(Value::Null) => default,
        Some(v) => IntOrPercent::parse(v)?,
    };
    Ok(scaled_value(&parsed, total, round_up))
}

/// A Deployment's `(maxSurge, maxUnavailable)` for `desired` replicas, as upstream's
/// `ResolveFenceposts`: surge rounds up, unavailable rounds down, absent values count as 0, and
/// if both come out 0 unavailable becomes 1 so that the rollout can always make progress.
pub fn resolve_fenceposts(
    max_surge: Option<&Value>,
    max_unavailable: Option<&Value>,
    desired: i32,
) -> Result<(i32, i32), IntOrPercentError> {
    let surge = scaled_value_or(max_surge, IntOrPercent::Int(0), desired, true)?;
    let mut unavailable = scaled_value_or(max_unavailable, IntOrPercent::Int(0), desired, false)?;
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_numbers_and_percent_strings() {
        let cases: Vec<(Value, Result<IntOrPercent, IntOrPercentError>)> = vec![
            (json!(3), Ok(IntOrPercent::Int(3))),
            (json!(0), Ok(IntOrPercent::Int(0))),
            (json!("25%"), Ok(IntOrPercent::Percent(25))),
            (json!("0%"), Ok(IntOrPercent::Percent(0))),
            (json!("-5%"), Ok(IntOrPercent::Percent(-5))),
            (json!("5"), Err(IntOrPercentError::NotPercent)),
            (json!("x%"), Err(IntOrPercentError::BadPercent("x%".into()))),
            (json!(1.5), Err(IntOrPercentError::OutOfRange("1.5".into()))),
            (
                json!(4_294_967_296i64),
                Err(IntOrPercentError::OutOfRange("4294967296".into())),
            ),
            (
                json!(true),
                Err(IntOrPercentError::WrongType("true".into())),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(IntOrPercent::parse(&input), want, "{input}");
        }
    }

    #[test]
    fn scales_with_rounding() {
        let cases = [
            (IntOrPercent::Int(3), 10, true, 3),
            (IntOrPercent::Percent(25), 10, true, 3),
            (IntOrPercent::Percent(25), 10, false, 2),
            (IntOrPercent::Percent(25), 1, true, 1),
            (IntOrPercent::Percent(25), 1, false, 0),
            (IntOrPercent::Percent(50), 4, false, 2),
            (IntOrPercent::Percent(100), 7, false, 7),
            (IntOrPercent::Percent(33), 0, true, 0),
        ];
        for (v, total, up, want) in cases {
            assert_eq!(
                scaled_value(&v, total, up),
                want,
                "{v:?} of {total} up={up}"
            );
        }
    }

    #[test]
    fn resolves_deployment_fenceposts() {
        type Case = (Option<Value>, Option<Value>, i32, (i32, i32));
        let cases: Vec<Case> = vec![
            (Some(json!("25%")), Some(json!("25%")), 10, (3, 2)),
            (Some(json!("25%")), Some(json!("25%")), 1, (1, 0)),
            (Some(json!(0)), Some(json!(0)), 5, (0, 1)),
            (Some(json!("0%")), Some(json!("0%")), 10, (0, 1)),
            (None, None, 3, (0, 1)),
            (Some(json!(2)), Some(json!("10%")), 5, (2, 0)),
        ];
        for (surge, unavailable, desired, want) in cases {
            let got = resolve_fenceposts(surge.as_ref(), unavailable.as_ref(), desired).unwrap();
            assert_eq!(got, want, "{surge:?}/{unavailable:?} of {desired}");
        }
        assert_eq!(
            resolve_fenceposts(Some(&json!("3")), None, 3),
            Err(IntOrPercentError::NotPercent)
        );
    }

    #[test]
    fn scaled_value_or_uses_default_for_absent_and_null() {
        let one = IntOrPercent::Int(1);
        assert_eq!(scaled_value_or(None, one, 10, true), Ok(1));
        assert_eq!(scaled_value_or(Some(&Value::Null), one, 10, true), Ok(1));
        assert_eq!(scaled_value_or(Some(&json!("10%")), one, 15, true), Ok(2));
    }
}
