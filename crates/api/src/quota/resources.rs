//! Resource lists as quota counts them (upstream's `k8s.io/apiserver/pkg/quota/v1` helpers):
//! exact sums, masks, comparisons, and quantities printed in upstream's canonical form.
//!
//! A ResourceQuota's `status.used` is read by people (`kubectl describe quota`) and by tests that
//! compare it with what they created, so sums keep the notation of what was summed, as upstream's
//! `Quantity.Add` does: `252Mi` of memory plus `100Mi` is `352Mi`, not `369098752`.

use crate::quantity::{Quantity, QuantityError};
use std::{collections::BTreeMap, fmt};

/// The notation a quantity is printed in (upstream's `resource.Format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// `500m`, `1`, `2k`, `3M`.
    #[default]
    DecimalSI,
    /// `1Ki`, `252Mi`, `2Gi` (whole multiples of 1024 only; anything else prints as decimal).
    BinarySI,
    /// `1e3`, `5e-3`.
    DecimalExponent,
}

/// An exact amount and the notation it prints in.
#[derive(Clone, Copy, Debug, Default)]
pub struct Amount {
    /// The value.
    pub value: Quantity,
    /// How it prints.
    pub format: Format,
}

/// Two amounts are equal when their values are (upstream's semantic equality ignores notation).
impl PartialEq for Amount {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Amount {}

impl Amount {
    /// Reads a quantity and remembers its notation from its suffix.
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        let value = Quantity::parse(s)?;
        let suffix = s.trim_start_matches([
            '+', '-', '.', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9',
        ]);
        let format = if suffix.ends_with('i') {
            Format::BinarySI
        } else if suffix.starts_with(['e', 'E']) {
            Format::DecimalExponent
        } else {
            Format::DecimalSI
        };
        Ok(Self { value, format })
    }

    /// A count (`pods`, `count/secrets`): a whole number in decimal notation.
    pub fn count(n: i64) -> Self {
        Self {
            value: Quantity::from_milli(n.saturating_mul(1000)),
            format: Format::DecimalSI,
        }
    }

    /// Zero, which takes the notation of whatever is added to it.
    pub fn zero() -> Self {
        Self::default()
    }

    /// The sum; it keeps this amount's notation unless this amount is zero (upstream's
    /// `Quantity.Add`).
    pub fn plus(self, other: Amount) -> Self {
        let format = if self.value.is_zero() {
            other.format
        } else {
            self.format
        };
        Self {
            value: self.value.saturating_add(other.value),
            format,
        }
    }

    /// The difference, in this amount's notation.
    pub fn minus(self, other: Amount) -> Self {
        Self {
            value: self.value.saturating_sub(other.value),
            format: self.format,
        }
    }

    /// The larger of two amounts (init containers run one at a time).
    pub fn max(self, other: Amount) -> Self {
        if other.value > self.value {
            other
        } else {
            self
        }
    }
}

/// Upstream's canonical form (`Quantity.String()`): the largest suffix that keeps the number
/// whole, `0` for zero.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = nanos(&self.value);
        if nanos == 0 {
            return f.write_str("0");
        }
        let binary = self.format == Format::BinarySI
            && nanos.unsigned_abs() >= 1024 * NANOS
            && nanos % NANOS as i128 == 0;
        if binary {
            let mut n = nanos / NANOS as i128;
            let mut power = 0;
            while power < BINARY.len() - 1 && n % 1024 == 0 {
                n /= 1024;
                power += 1;
            }
            return write!(f, "{n}{}", BINARY[power]);
        }
        // Decimal: exponents -9, -6, ..., 18 over the nano-unit count.
        let mut n = nanos;
        let mut step = 0;
        while step < DECIMAL.len() - 1 && n % 1000 == 0 {
            n /= 1000;
            step += 1;
        }
        let exponent = i32::try_from(step).unwrap_or(0) * 3 - 9;
        if self.format == Format::DecimalExponent {
            if exponent == 0 {
                write!(f, "{n}")
            } else {
                write!(f, "{n}e{exponent}")
            }
        } else {
            write!(f, "{n}{}", DECIMAL[step])
        }
    }
}

const NANOS: u128 = 1_000_000_000;
const BINARY: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const DECIMAL: [&str; 10] = ["n", "u", "m", "", "k", "M", "G", "T", "P", "E"];

/// The exact value in nano-units, read back from the quantity's exact decimal form.
fn nanos(q: &Quantity) -> i128 {
    let text = q.to_string();
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let whole: i128 = whole.parse().unwrap_or(0);
    let frac: i128 = format!("{frac:0<9}")
        .get(..9)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    let n = whole.saturating_mul(NANOS as i128).saturating_add(frac);
    if negative { -n } else { n }
}

/// Resource name to amount (upstream's `ResourceList`), ordered by name.
pub type ResourceList = BTreeMap<String, Amount>;

/// Reads a wire resource list; entries that are not quantities are left out (validation refuses
/// them before anything is stored).
pub fn from_wire(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> ResourceList {
    list.into_iter()
        .flatten()
        .filter_map(|(k, v)| Amount::parse(&v.0).ok().map(|a| (k.clone(), a)))
        .collect()
}

/// The wire form, each amount in canonical notation.
pub fn to_wire(
    list: &ResourceList,
) -> BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity> {
    list.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(v.to_string()),
            )
        })
        .collect()
}

/// `a + b`, per resource (upstream's `quota.Add`).
pub fn add(a: &ResourceList, b: &ResourceList) -> ResourceList {
    let mut out = a.clone();
    for (k, v) in b {
        let sum = out.get(k).map_or(*v, |have| have.plus(*v));
        out.insert(k.clone(), sum);
    }
    out
}

/// `a - b` for the resources of `a`, never below zero (upstream's
/// `SubtractWithNonNegativeResult`).
pub fn subtract_non_negative(a: &ResourceList, b: &ResourceList) -> ResourceList {
    a.iter()
        .map(|(k, v)| {
            let mut d = match b.get(k) {
                Some(other) => v.minus(*other),
                None => *v,
            };
            if d.value.is_negative() {
                d.value = Quantity::default();
            }
            (k.clone(), d)
        })
        .collect()
}

/// Only the resources named in `names` (upstream's `quota.Mask`).
pub fn mask<'a>(list: &ResourceList, names: impl IntoIterator<Item = &'a String>) -> ResourceList {
    names
        .into_iter()
        .filter_map(|n| list.get(n).map(|v| (n.clone(), *v)))
        .collect()
}

/// Without the zero amounts (upstream's `quota.RemoveZeros`).
pub fn remove_zeros(list: &ResourceList) -> ResourceList {
    list.iter()
        .filter(|(_, v)| !v.value.is_zero())
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// The names whose amount is below zero, sorted.
pub fn negative(list: &ResourceList) -> Vec<String> {
    list.iter()
        .filter(|(_, v)| v.value.is_negative())
        .map(|(k, _)| k.clone())
        .collect()
}

/// The resources of `a` that exceed their limit in `b` (a resource `b` does not limit never
/// does); empty when `a <= b` (upstream's `quota.LessThanOrEqual`).
pub fn exceeding(a: &ResourceList, b: &ResourceList) -> Vec<String> {
    a.iter()
        .filter(|(k, v)| b.get(*k).is_some_and(|limit| v.value > limit.value))
        .map(|(k, _)| k.clone())
        .collect()
}

/// The same resources with equal amounts (upstream's `quota.Equals`).
pub fn equals(a: &ResourceList, b: &ResourceList) -> bool {
    a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v))
}

/// `a=1,b=2`, sorted by name, for messages (upstream's `prettyPrint`).
pub fn pretty(list: &ResourceList) -> String {
    list.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn a(s: &str) -> Amount {
        Amount::parse(s).unwrap()
    }

    #[test]
    fn prints_canonically_as_upstream() {
        let cases = [
            ("0", "0"),
            ("500m", "500m"),
            ("0.5", "500m"),
            ("1", "1"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1.5", "1500m"),
            ("2k", "2k"),
            ("252Mi", "252Mi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("30Gi", "30Gi"),
            ("1Ki", "1Ki"),
            ("100", "100"),
            ("1e3", "1e3"),
            ("10Gi", "10Gi"),
            ("-1", "-1"),
            ("1n", "1n"),
            ("250u", "250u"),
        ];
        for (input, want) in cases {
            assert_eq!(a(input).to_string(), want, "{input}");
        }
        // A binary amount below 1024 or fractional prints as decimal.
        assert_eq!(a("1Ki").minus(a("1000")).to_string(), "24");
        assert_eq!(a("0.5Ki").to_string(), "512");
    }

    #[test]
    fn sums_keep_the_first_non_zero_notation() {
        let sum = Amount::zero().plus(a("252Mi")).plus(a("100Mi"));
        assert_eq!(sum.to_string(), "352Mi");
        assert_eq!(a("500m").plus(a("600m")).to_string(), "1100m");
        assert_eq!(Amount::count(2).plus(Amount::count(1)).to_string(), "3");
    }

    #[test]
    fn list_math() {
        let used: ResourceList =
            [("cpu".to_string(), a("500m")), ("pods".to_string(), a("1"))].into();
        let hard: ResourceList = [("cpu".to_string(), a("1")), ("pods".to_string(), a("5"))].into();
        let more: ResourceList = [("cpu".to_string(), a("600m"))].into();
        let total = add(&used, &more);
        assert_eq!(exceeding(&total, &hard), vec!["cpu".to_string()]);
        assert!(exceeding(&used, &hard).is_empty());
        assert_eq!(
            pretty(&mask(&total, ["cpu".to_string()].iter())),
            "cpu=1100m"
        );
        let less = subtract_non_negative(&more, &total);
        assert!(less["cpu"].value.is_zero());
        assert!(remove_zeros(&less).is_empty());
        assert!(equals(&used, &used.clone()));
        assert!(!equals(&used, &hard));
    }
}
