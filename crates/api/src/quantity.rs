//! Resource quantities (`100m`, `1.5`, `2Gi`, `1e3`), as upstream's `resource.Quantity` reads them.
//!
//! Validation compares container requests with limits and the scheduler sums requests against a
//! node's allocatable, so both need one exact number per quantity. A quantity is kept as a count
//! of nano-units in an `i128`: that holds everything up to the exa suffixes without rounding, and
//! the rare value finer than a nano-unit is rounded away from zero, as upstream rounds.

use std::{cmp::Ordering, fmt, str::FromStr};
use thiserror::Error;

/// Why a string is not a quantity; the messages are upstream's.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// The string does not have the shape of a quantity at all.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// The number before the suffix is malformed (e.g. two dots).
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    /// The suffix is not one upstream knows.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The value does not fit the range this crate can hold (beyond about 10^29).
    #[error("quantity is too large")]
    TooLarge,
}

/// An exact resource amount, comparable and summable.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// How a suffix scales the number in front of it.
enum Scale {
    /// Multiply by 2^n.
    Binary(u32),
    /// Multiply by 10^n (n may be negative).
    Decimal(i32),
}

impl Quantity {
    /// Reads a quantity in any of upstream's three notations (binary SI, decimal SI, exponent).
    pub fn parse(s: &str) -> Result<Self, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::Format);
        }
        let (negative, rest) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(QuantityError::Format);
        }
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => (i, f),
            None => (number, ""),
        };
        if frac_part.contains('.') || (int_part.is_empty() && frac_part.is_empty()) {
            return Err(QuantityError::Numeric);
        }
        let scale = parse_suffix(suffix)?;

        // mantissa = all digits as one integer; value = mantissa * 10^-frac_len * scale.
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(b - b'0')))
                .ok_or(QuantityError::TooLarge)?;
        }
        let frac_len = i32::try_from(frac_part.len()).map_err(|_| QuantityError::TooLarge)?;

        // Work out numerator/denominator so that nanos = ceil(mantissa * num / den).
        let (mut num, mut den): (i128, i128) = (NANOS_PER_UNIT, 1);
        let mut decimal_exp = -frac_len;
        match scale {
            Scale::Binary(bits) => {
                num = num
                    .checked_mul(1i128 << bits)
                    .ok_or(QuantityError::TooLarge)?;
            }
            Scale::Decimal(exp) => decimal_exp = decimal_exp.saturating_add(exp),
        }
        if decimal_exp >= 0 {
            let factor = pow10(decimal_exp).ok_or(QuantityError::TooLarge)?;
            num = num.checked_mul(factor).ok_or(QuantityError::TooLarge)?;
        } else {
            match decimal_exp.checked_neg().and_then(pow10) {
                Some(factor) => den = factor,
                // Smaller than anything representable: upstream rounds a non-zero value up.
                None => {
                    return Ok(Self {
                        nanos: if mantissa == 0 {
                            0
                        } else if negative {
                            -1
                        } else {
                            1
                        },
                    });
                }
            }
        }
        let product = mantissa.checked_mul(num).ok_or(QuantityError::TooLarge)?;
        let magnitude = product / den + i128::from(product % den != 0);
        Ok(Self {
            nanos: if negative { -magnitude } else { magnitude },
        })
    }

    /// A quantity of `milli` thousandths, e.g. CPU millicores.
    pub fn from_milli(milli: i64) -> Self {
        Self {
            nanos: i128::from(milli) * 1_000_000,
        }
    }

    /// The value in thousandths, rounded away from zero like upstream's `MilliValue()`.
    pub fn milli_value(&self) -> i64 {
        saturate(div_away_from_zero(self.nanos, 1_000_000))
    }

    /// The value in whole units, rounded away from zero like upstream's `Value()`.
    pub fn value(&self) -> i64 {
        saturate(div_away_from_zero(self.nanos, NANOS_PER_UNIT))
    }

    /// Whether the amount is below zero (requests and limits may not be).
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// Whether the amount is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The sum, clamped at the representable range, for totalling requests.
    pub fn saturating_add(self, other: Self) -> Self {
        Self {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// The difference, clamped at the representable range, for free capacity.
    pub fn saturating_sub(self, other: Self) -> Self {
        Self {
            nanos: self.nanos.saturating_sub(other.nanos),
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Prints the value in a plain decimal form (`1.5`, `0.1`, `2147483648`); not upstream's
/// canonical suffix form, which is only needed when echoing quantities back to clients.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let abs = self.nanos.unsigned_abs();
        let whole = abs / NANOS_PER_UNIT as u128;
        let frac = abs % NANOS_PER_UNIT as u128;
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

fn parse_suffix(suffix: &str) -> Result<Scale, QuantityError> {
    let scale = match suffix {
        "" => Scale::Decimal(0),
        "Ki" => Scale::Binary(10),
        "Mi" => Scale::Binary(20),
        "Gi" => Scale::Binary(30),
        "Ti" => Scale::Binary(40),
        "Pi" => Scale::Binary(50),
        "Ei" => Scale::Binary(60),
        "n" => Scale::Decimal(-9),
        "u" => Scale::Decimal(-6),
        "m" => Scale::Decimal(-3),
        "k" => Scale::Decimal(3),
        "M" => Scale::Decimal(6),
        "G" => Scale::Decimal(9),
        "T" => Scale::Decimal(12),
        "P" => Scale::Decimal(15),
        "E" => Scale::Decimal(18),
        _ => {
            let exp = suffix
                .strip_prefix(['e', 'E'])
                .ok_or_else(|| suffix_error(suffix))?;
            let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(suffix_error(suffix));
            }
            Scale::Decimal(exp.parse::<i32>().map_err(|_| QuantityError::TooLarge)?)
        }
    };
    Ok(scale)
}

/// Distinguishes a suffix that breaks the overall shape from one that merely is not known.
fn suffix_error(suffix: &str) -> QuantityError {
    let shape_ok = {
        let letters = suffix
            .bytes()
            .take_while(|b| b"eEinumkKMGTP".contains(b))
            .count();
        let rest = &suffix[letters..];
        let rest = rest.strip_prefix(['+', '-']).unwrap_or(rest);
        rest.bytes().all(|b| b.is_ascii_digit())
    };
    if shape_ok {
        QuantityError::Suffix
    } else {
        QuantityError::Format
    }
}

fn pow10(exp: i32) -> Option<i128> {
    10i128.checked_pow(u32::try_from(exp).ok()?)
}

fn div_away_from_zero(n: i128, d: i128) -> i128 {
    let q = n / d;
    if n % d == 0 {
        q
    } else if n < 0 {
        q - 1
    } else {
        q + 1
    }
}

fn saturate(v: i128) -> i64 {
    match v.cmp(&0) {
        Ordering::Less => i64::try_from(v).unwrap_or(i64::MIN),
        _ => i64::try_from(v).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_notations() {
        // (input, milli_value, value)
        let cases: &[(&str, i64, i64)] = &[
            ("100m", 100, 1),
            ("1", 1000, 1),
            ("1.5", 1500, 2),
            ("0.1", 100, 1),
            (".5", 500, 1),
            ("2Gi", 2 * 1024 * 1024 * 1024 * 1000, 2 * 1024 * 1024 * 1024),
            ("500Mi", 500 * 1024 * 1024 * 1000, 500 * 1024 * 1024),
            ("1Ki", 1_024_000, 1024),
            ("1e3", 1_000_000, 1000),
            ("1E3", 1_000_000, 1000),
            ("1e-3", 1, 1),
            ("1k", 1_000_000, 1000),
            ("1M", 1_000_000_000, 1_000_000),
            ("1G", 1_000_000_000_000, 1_000_000_000),
            ("250u", 1, 1),
            ("1n", 1, 1),
            ("0", 0, 0),
            ("-1", -1000, -1),
            ("+2", 2000, 2),
            ("1.", 1000, 1),
            ("1Ei", i64::MAX, 1_152_921_504_606_846_976),
        ];
        for (input, milli, value) in cases {
            let q = Quantity::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.milli_value(), *milli, "milli of {input}");
            assert_eq!(q.value(), *value, "value of {input}");
        }
    }

    #[test]
    fn rejects_malformed_quantities() {
        let cases: &[(&str, QuantityError)] = &[
            ("", QuantityError::Format),
            ("abc", QuantityError::Format),
            ("1 Gi", QuantityError::Format),
            ("Gi", QuantityError::Format),
            ("1..2", QuantityError::Numeric),
            ("1.2.3", QuantityError::Numeric),
            ("1Gb", QuantityError::Format),
            ("1ki", QuantityError::Suffix),
            ("1iK", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1e5000", QuantityError::TooLarge),
        ];
        for (input, err) in cases {
            assert_eq!(Quantity::parse(input), Err(err.clone()), "{input}");
        }
    }

    #[test]
    fn compares_across_notations() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1k"), q("1e3"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("500m") < q("1"));
        assert!(q("-1").is_negative());
        assert_eq!(q("1").saturating_add(q("500m")), q("1.5"));
        assert_eq!(Quantity::from_milli(250), q("250m"));
    }

    #[test]
    fn displays_plain_decimal() {
        assert_eq!(Quantity::parse("1500m").unwrap().to_string(), "1.5");
        assert_eq!(Quantity::parse("2Ki").unwrap().to_string(), "2048");
        assert_eq!(Quantity::parse("-100m").unwrap().to_string(), "-0.1");
    }
}
