//! The Azure LLM inference trace's timestamps, read by hand: `2023-11-16 18:17:03.9799600`.
//!
//! The 2023 files write a date, a time and up to 7 fractional digits with no zone (UTC);
//! the 2024 files may add a `+00:00` offset. Parsing them needs no time-zone database:
//! a civil date maps to a day count by arithmetic alone, and an explicit offset is
//! subtracted so rows written across an offset change still order correctly.

/// A parsed timestamp: nanoseconds since 1970-01-01T00:00:00Z and how many fractional
/// digits it was written with (the file's resolution comes from the most of any row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp {
    /// Nanoseconds since the Unix epoch, UTC.
    pub unix_nanos: i64,
    /// Digits after the decimal point of the seconds (0 when there is none).
    pub fraction_digits: u32,
}

/// Nanoseconds are the finest unit an `i64` can hold over the years any trace spans.
const MAX_FRACTION_DIGITS: usize = 9;

/// The years a timestamp may have: any trace's, and few enough that nanoseconds
/// since 1970 and the difference of any two fit an `i64` (which spans 292 years).
const MIN_YEAR: i64 = 1970;
const MAX_YEAR: i64 = 2200;

/// `YYYY-MM-DD HH:MM:SS[.f…][Z|±HH:MM|±HHMM]` (a `T` may stand for the space), UTC
/// unless an offset says otherwise. The error says what is wrong, for the caller's message.
pub fn parse(text: &str) -> Result<Timestamp, &'static str> {
    const SHAPE: &str = "not `YYYY-MM-DD HH:MM:SS[.fraction]`";
    let b = text.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b' ' | b'T') {
        return Err(SHAPE);
    }
    if b[13] != b':' || b[16] != b':' {
        return Err(SHAPE);
    }
    let year = digits(&b[0..4]).ok_or(SHAPE)?;
    let month = digits(&b[5..7]).ok_or(SHAPE)?;
    let day = digits(&b[8..10]).ok_or(SHAPE)?;
    let hour = digits(&b[11..13]).ok_or(SHAPE)?;
    let minute = digits(&b[14..16]).ok_or(SHAPE)?;
    let second = digits(&b[17..19]).ok_or(SHAPE)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("no such date");
    }
    // Nanoseconds since 1970 in an i64 end in 2262, and arrivals are differences of
    // two stamps: this window keeps both in range (a year-2302 row overflowed the
    // multiplication below; found by fuzzing, decision 0017).
    if !(MIN_YEAR..=MAX_YEAR).contains(&year) {
        return Err("a year outside 1970 to 2200");
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err("no such time of day");
    }
    let mut rest = &b[19..];
    let (mut nanos, mut fraction_digits) = (0_i64, 0_u32);
    if let Some((b'.', after)) = rest.split_first() {
        let n = after.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return Err("a `.` with no fractional digits");
        }
        if n > MAX_FRACTION_DIGITS {
            return Err("more than 9 fractional digits");
        }
        let value = digits(&after[..n]).ok_or(SHAPE)?;
        nanos = value * 10_i64.pow((MAX_FRACTION_DIGITS - n) as u32);
        fraction_digits = n as u32;
        rest = &after[n..];
    }
    let offset_seconds = offset(rest)?;
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_seconds;
    Ok(Timestamp {
        unix_nanos: seconds * 1_000_000_000 + nanos,
        fraction_digits,
    })
}

/// The zone suffix in seconds east of UTC: none and `Z` are UTC.
fn offset(rest: &[u8]) -> Result<i64, &'static str> {
    const BAD: &str = "an unreadable time-zone offset (expected none, `Z` or `+HH:MM`)";
    let (sign, body) = match rest {
        [] | [b'Z'] => return Ok(0),
        [b'+', body @ ..] => (1, body),
        [b'-', body @ ..] => (-1, body),
        _ => return Err(BAD),
    };
    let (hours, minutes) = match body {
        [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => (
            digits(&[*h1, *h2]).ok_or(BAD)?,
            digits(&[*m1, *m2]).ok_or(BAD)?,
        ),
        [h1, h2] => (digits(&[*h1, *h2]).ok_or(BAD)?, 0),
        _ => return Err(BAD),
    };
    if hours > 23 || minutes > 59 {
        return Err(BAD);
    }
    Ok(sign * (hours * 3_600 + minutes * 60))
}

/// ASCII digits as a number; `None` if any byte is not a digit.
fn digits(b: &[u8]) -> Option<i64> {
    b.iter().try_fold(0_i64, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date. Counting years from March puts
/// the leap day last, so a year's day number needs no leap test; 400-year eras repeat.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year.rem_euclid(400);
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
