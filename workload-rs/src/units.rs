//! Parsing of the flag values both workloads share, with the same grammar as goroutines-go/units.go:
//! whole numbers, durations with a unit, and byte sizes with an optional binary suffix. The cases
//! both must pass are schema/units.tsv.

/// A whole number in `min..=max`, digits only (no sign, no exponent, no separators).
pub fn parse_count(text: &str, min: u64, max: u64) -> Result<u64, String> {
    let range = format!("must be a whole number from {min} to {max}");
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(range);
    }
    match text.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        _ => Err(range),
    }
}

/// A duration such as `1s`, `500ms`, `1.5s` or `1m30s`: one or more `<number><unit>` groups with
/// unit ns, us, µs, ms, s, m or h. A bare number is refused: the unit is never guessed.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    const WANT: &str =
        "must be a duration with a unit (ns, us, ms, s, m, h), like 500ms, 1s or 1m30s";
    if text.is_empty() {
        return Err(WANT.into());
    }
    let mut total: u128 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let unit_ns: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(WANT.into()),
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !digits_ok(whole)
            || !digits_ok(frac)
            || (number.contains('.') && frac.is_empty())
        {
            return Err(WANT.into());
        }
        let whole: u128 = whole.parse().map_err(|_| "is too large".to_string())?;
        let mut group = whole.checked_mul(unit_ns).ok_or("is too large")?;
        // Fractions are exact to the nanosecond: digits beyond that are dropped.
        let mut scale = unit_ns;
        for digit in frac.bytes() {
            scale /= 10;
            group += u128::from(digit - b'0') * scale;
        }
        total = total.checked_add(group).ok_or("is too large")?;
        rest = next;
    }
    u64::try_from(total).map_err(|_| "is too large".to_string())
}

/// A byte count: digits with an optional suffix k/K/KiB, m/M/MiB or g/G/GiB (all powers of 1024).
pub fn parse_bytes(text: &str, max: u64) -> Result<u64, String> {
    let want = "must be a byte count like 65536, 64K or 2MiB".to_string();
    let digits_len = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_len);
    let multiplier: u64 = match suffix {
        "" => 1,
        "k" | "K" | "KiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        _ => return Err(want),
    };
    if digits.is_empty() {
        return Err(want);
    }
    let too_large = format!("is larger than {max} bytes");
    let value = digits.parse::<u64>().map_err(|_| too_large.clone())?;
    match value.checked_mul(multiplier) {
        Some(bytes) if bytes <= max => Ok(bytes),
        _ => Err(too_large),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables;

    /// Every row of schema/units.tsv, which goroutines-go/units_test.go checks too.
    #[test]
    fn table() {
        let mut failures = Vec::new();
        for row in tables::rows("units.tsv", 5, 60) {
            let [parser, input, bound, outcome, value] = &row[..] else {
                unreachable!()
            };
            let got = match parser.as_str() {
                "count" => {
                    let (min, max) = bound.split_once("..").expect("count bound MIN..MAX");
                    parse_count(input, min.parse().unwrap(), max.parse().unwrap())
                }
                "duration" => parse_duration_ns(input),
                "bytes" => parse_bytes(input, bound.parse().unwrap()),
                other => panic!("units.tsv: unknown parser {other:?}"),
            };
            let want = match outcome.as_str() {
                "ok" => Ok(value.parse::<u64>().unwrap()),
                "err" => Err(value.clone()),
                other => panic!("units.tsv: unknown outcome {other:?}"),
            };
            if got != want {
                failures.push(format!(
                    "{parser} {input:?} ({bound}): got {got:?}, want {want:?}"
                ));
            }
        }
        tables::assert_all("units.tsv", &failures);
    }
}
