//! Parsing of the flag values both workloads share, with the same grammar as goroutines-go/units.go:
//! whole numbers, durations with a unit, and byte sizes with an optional binary suffix.

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

    #[test]
    fn counts() {
        assert_eq!(parse_count("42", 1, 100), Ok(42));
        for bad in [
            "",
            "0",
            "101",
            "-5",
            "+5",
            "1.5",
            "1e3",
            "4 2",
            "99999999999999999999999",
        ] {
            assert!(parse_count(bad, 1, 100).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns("1.5s"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ns("1m30s"), Ok(90_000_000_000));
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("0s"), Ok(0));
        assert_eq!(parse_duration_ns("0.000000001s"), Ok(1));
        for bad in [
            "",
            "5",
            "5x",
            "-1s",
            "s",
            "1.s",
            ".5s",
            "1s2",
            "1 s",
            "99999999999999999999h",
        ] {
            assert!(parse_duration_ns(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn bytes() {
        assert_eq!(parse_bytes("65536", u64::MAX), Ok(65536));
        assert_eq!(parse_bytes("64K", u64::MAX), Ok(65536));
        assert_eq!(parse_bytes("2MiB", u64::MAX), Ok(2 << 20));
        assert_eq!(parse_bytes("1g", u64::MAX), Ok(1 << 30));
        for bad in ["", "K", "2q", "-1", "1.5M", "1 M"] {
            assert!(
                parse_bytes(bad, u64::MAX).is_err(),
                "{bad} should be refused"
            );
        }
        assert!(parse_bytes("2G", 1 << 30).is_err());
    }
}
