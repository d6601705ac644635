//! Python prometheus_client's value spelling.
//!
//! Every sample value and every `le` bound in vLLM's exposition goes through
//! `prometheus_client.utils.floatToGoString`, which is Python's `repr(float)` with a Go-style
//! exponent bolted on from seven integer digits up. Rust's `Display` never uses an exponent and
//! `Debug` uses a different one, so both steps are rebuilt here from Rust's shortest round-trip
//! digits, re-rounded the way Python's repr breaks ties.

use std::fmt::Write as _;

/// Python prometheus_client's `floatToGoString`: `0.0`, `999999.0`, `1e+06`, `1.234567e+06`,
/// `1.7563046412320957e+09`, `0.0421875`, `NaN`, `+Inf`, `-Inf`.
///
/// Faithful to its quirks: negative numbers keep Python's repr (`-1234567.0`), and ten or more
/// integer digits give a three-digit exponent (`1e+010`) because the original pastes `"e+0"` in
/// front of the digit count.
pub fn format_float(v: f64) -> String {
    let mut out = String::with_capacity(24);
    write_float(&mut out, v);
    out
}

/// [`format_float`] appending to a buffer, so rendering a 500 KB body does not allocate per value.
pub(crate) fn write_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
        return;
    }
    if v == f64::INFINITY {
        out.push_str("+Inf");
        return;
    }
    if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
        return;
    }
    let start = out.len();
    write_python_repr(out, v);
    if v > 0.0
        && let Some(dot) = out[start..].find('.')
        && dot > 6
    {
        // Go would print 1e+06 where Python prints 1000000.0; prometheus_client rewrites it as
        // s[0] + "." + s[1:dot] + s[dot+1:], strips trailing '0'/'.', then appends "e+0{dot-1}".
        let repr = out.split_off(start);
        let mut mantissa = String::with_capacity(repr.len() + 1);
        mantissa.push_str(&repr[..1]);
        mantissa.push('.');
        mantissa.push_str(&repr[1..dot]);
        mantissa.push_str(&repr[dot + 1..]);
        out.push_str(mantissa.trim_end_matches(['0', '.']));
        let _ = write!(out, "e+0{}", dot - 1);
    }
}

/// Python's `repr(float)` for a finite value: fixed notation while the decimal exponent is in
/// -4..16 (always with a fractional part, `3.0`), otherwise `d.ddde±XX` with at least two
/// exponent digits (`1e-05`, `1e+16`).
fn write_python_repr(out: &mut String, v: f64) {
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    // `{:e}` yields the shortest round-trip digit count, but on a tie between two shortest
    // candidates it can pick the other one than Python (which takes the nearer, then the even
    // one). Re-rounding exactly to that many digits, half-to-even, gives Python's choice.
    let shortest = format!("{v:e}");
    let mantissa_len = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.bytes().filter(u8::is_ascii_digit).count());
    let sci = format!("{v:.*e}", mantissa_len.saturating_sub(1));
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let digits = match digits.trim_end_matches('0') {
        "" => "0",
        d => d,
    };
    if negative {
        out.push('-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{exp:+03}");
    }
}

/// prometheus-cpp's `WriteValue(double)` (Triton): a C++ stream at precision 16 in the default
/// float field, i.e. `printf("%.16g")`: `3`, `0.87`, `117386`, `618.1`, `1e+16`, `1e-05`, with
/// prometheus-cpp's own spellings `Nan`, `+Inf`, `-Inf`.
pub fn format_cpp_double(v: f64) -> String {
    let mut out = String::with_capacity(24);
    write_cpp_double(&mut out, v);
    out
}

/// [`format_cpp_double`] appending to a buffer.
pub(crate) fn write_cpp_double(out: &mut String, v: f64) {
    const PRECISION: i32 = 16;
    if v.is_nan() {
        out.push_str("Nan");
        return;
    }
    if v.is_infinite() {
        out.push_str(if v < 0.0 { "-Inf" } else { "+Inf" });
        return;
    }
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // %g: X is the exponent %e would print at precision P-1; fixed notation when -4 <= X < P.
    let sci = format!("{v:.*e}", (PRECISION - 1) as usize);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..PRECISION).contains(&exp) {
        let fixed = format!("{v:.*}", (PRECISION - 1 - exp) as usize);
        out.push_str(strip_fraction_zeros(&fixed));
    } else {
        out.push_str(strip_fraction_zeros(mantissa));
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    }
}

/// `%g` drops trailing zeros of the fraction, and the point when nothing is left after it.
fn strip_fraction_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Go's `fmt.Sprintf("%f", v)` (dcgm-exporter's double fields): always six decimals, `NaN`,
/// `+Inf`, `-Inf`.
pub(crate) fn write_go_f(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v < 0.0 { "-Inf" } else { "+Inf" });
    } else {
        let _ = write!(out, "{v:.6}");
    }
}

#[cfg(test)]
mod tests {
    use super::format_float;

    #[test]
    fn reference_cases_from_signals_md() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (999_999.0, "999999.0"),
            (1_000_000.0, "1e+06"),
            (16_384.0, "16384.0"),
            (0.0421875, "0.0421875"),
            (1_234_567.0, "1.234567e+06"),
            (1.756_304_641_232_095_7e9, "1.7563046412320957e+09"),
            (1.756_304_641_232_123_1e9, "1.7563046412321231e+09"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (3.0, "3.0"),
            (1.0, "1.0"),
            (2560.0, "2560.0"),
            (0.001, "0.001"),
            (53.96019025041359, "53.96019025041359"),
        ];
        for (v, want) in cases {
            assert_eq!(format_float(*v), *want, "value {v:?}");
        }
    }

    #[test]
    // The tie cases are exact binary values written out in full on purpose.
    #[allow(clippy::excessive_precision)]
    fn python_repr_edges_and_go_exponent_quirks() {
        let cases: &[(f64, &str)] = &[
            (-0.0, "-0.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (-2.5, "-2.5"),
            // Negatives never get the Go exponent.
            (-1_234_567.0, "-1234567.0"),
            (2.809856e7, "2.809856e+07"),
            (1.79599586266e9, "1.79599586266e+09"),
            (0.12000000000000001, "0.12000000000000001"),
            // The `e+0{dot-1}` paste gives three digits from 1e10 up.
            (1e10, "1e+010"),
            (12_345_678_901.5, "1.23456789015e+010"),
            (9_999_999_999_999_998.0, "9.999999999999998e+015"),
            // From 1e16 Python's repr already has an exponent and is kept as is.
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (1e300, "1e+300"),
            (-1e-300, "-1e-300"),
            (1_048_576.0, "1.048576e+06"),
            (1_000_000.5, "1.0000005e+06"),
            (100_000.25, "100000.25"),
            // Exact ties between two shortest spellings: Python keeps the even last digit.
            (1_819_666_288_299_395.25, "1.8196662882993952e+015"),
            (-180_741_443_747_837.625, "-180741443747837.62"),
            (5e-324, "5e-324"),
            (1e22, "1e+22"),
        ];
        for (v, want) in cases {
            assert_eq!(format_float(*v), *want, "value {v:?}");
        }
    }

    #[test]
    fn cpp_precision_16_like_prometheus_cpp() {
        use super::format_cpp_double;
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (3.0, "3"),
            (161.0, "161"),
            (0.87, "0.87"),
            (117_386.0, "117386"),
            (10_771.0, "10771"),
            (618.1, "618.1"),
            (0.1 + 0.2, "0.3"),
            (1.0 / 3.0, "0.3333333333333333"),
            (1_799.999_999_999_999_8, "1800"),
            (85_520_809_984.0, "85520809984"),
            (1e15, "1000000000000000"),
            (1e16, "1e+16"),
            (1.5e17, "1.5e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (f64::NAN, "Nan"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
        ];
        for (v, want) in cases {
            assert_eq!(format_cpp_double(*v), *want, "value {v:?}");
        }
    }

    #[test]
    fn go_percent_f() {
        let mut s = String::new();
        for v in [0.853211, 612.345, 0.0, 1.0 / 3.0] {
            super::write_go_f(&mut s, v);
            s.push(' ');
        }
        assert_eq!(s, "0.853211 612.345000 0.000000 0.333333 ");
    }
}
