//! Formatting of the figures people read: counts with separators, bytes in binary units; and the
//! kernel's small text formats read on both sides of the house (a CPU list: `cpu_list`).

pub mod cpu_list;

/// 1234567 -> "1,234,567".
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    // Digits left before the next separator: the leading group holds len % 3 (or 3).
    let mut group_left = match digits.len() % 3 {
        0 => 3,
        k => k,
    };
    for c in digits.chars() {
        if group_left == 0 {
            out.push(',');
            group_left = 3;
        }
        out.push(c);
        group_left -= 1;
    }
    out
}

/// Bytes as "37.4 GiB", "512 MiB", "9.6 KiB".
pub fn bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = b;
    let mut unit = 0;
    while value.abs() >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.abs() >= 100.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// A probe figure in its unit: counts as numbers, ns as time, bytes in binary units.
pub fn in_unit(value: f64, unit: &str) -> String {
    match unit {
        "ns" if value >= 1e9 => format!("{:.2} s", value / 1e9),
        "ns" if value >= 1e6 => format!("{:.1} ms", value / 1e6),
        "ns" if value >= 1e3 => format!("{:.1} µs", value / 1e3),
        "ns" => format!("{value:.0} ns"),
        "bytes" => bytes(value),
        _ if value.fract() == 0.0 => count(value as u64),
        _ => format!("{value:.2}"),
    }
}

/// Parses a byte count for conductor flags: digits with an optional K/M/G/T (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(split);
    let multiplier: u64 = match suffix {
        "" => 1,
        "k" | "K" | "KiB" => 1 << 10,
        "m" | "M" | "MiB" => 1 << 20,
        "g" | "G" | "GiB" => 1 << 30,
        "t" | "T" | "TiB" => 1 << 40,
        _ => return Err(format!("'{text}' is not a byte count like 512M or 8G")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(multiplier))
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("'{text}' is not a byte count like 512M or 8G"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(9830.0), "9.6 KiB");
        assert_eq!(bytes(37.4 * (1u64 << 30) as f64), "37.4 GiB");
        assert_eq!(bytes(200.0 * (1u64 << 20) as f64), "200 MiB");
    }

    #[test]
    fn parses_byte_counts() {
        assert_eq!(parse_bytes("512M"), Ok(512 << 20));
        assert_eq!(parse_bytes("8G"), Ok(8 << 30));
        assert!(parse_bytes("0").is_err());
        assert!(parse_bytes("12q").is_err());
        assert!(parse_bytes("99999999999T").is_err());
    }
}
