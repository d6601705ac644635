//! Trace files: each format read, the format told from the content, every bad row refused
//! with its line, and `--rate-scale` replays.

use super::*;

const CODE_JSONL: &str = include_str!("../../../sim/traces/code-completion.jsonl");
const CODE_CSV: &str = include_str!("../../../sim/traces/code-completion.csv");
const CHAT_JSONL: &str = include_str!("../../../sim/traces/chat.jsonl");
const CHAT_CSV: &str = include_str!("../../../sim/traces/chat.csv");

fn requests_of(text: &str) -> (TraceFormat, Vec<TraceRequest>, f64) {
    match parse_trace(text) {
        Ok(ParsedTrace::Requests {
            format,
            requests,
            resolution_seconds,
        }) => (format, requests, resolution_seconds),
        other => panic!("expected requests, got {other:?}"),
    }
}

fn request(arrival_seconds: f64, input_tokens: u32, output_tokens: u32) -> TraceRequest {
    TraceRequest {
        arrival_seconds,
        input_tokens,
        output_tokens,
    }
}

#[test]
fn rate_csv_keeps_todays_rules() {
    let text = "t_seconds,rate_per_second\n0,2\n# comment\n\n100,12\n100,3\n200,12\n";
    let parsed = parse_trace(text).expect("valid");
    assert_eq!(parsed.format(), TraceFormat::RateCsv);
    assert_eq!(
        parsed,
        ParsedTrace::Rates(vec![(0.0, 2.0), (100.0, 12.0), (100.0, 3.0), (200.0, 12.0)])
    );
    // No header is fine too, and a comment may come first.
    let bare = parse_trace("# made by hand\n0, 1.5\n60, 4\n").expect("valid");
    assert_eq!(bare, ParsedTrace::Rates(vec![(0.0, 1.5), (60.0, 4.0)]));
}

#[test]
fn mooncake_lines_sorted_stably_other_fields_ignored() {
    let text = concat!(
        "{\"timestamp\": 2500, \"input_length\": 100, \"output_length\": 7, \"hash_ids\": [1, 2]}\n",
        "\n",
        "{\"timestamp\": 1000, \"input_length\": 300, \"output_length\": 9, \"extra\": {\"a\": 1}}\n",
        "{\"hash_ids\": [], \"output_length\": 1, \"input_length\": 0, \"timestamp\": 1000}\n",
        "{\"timestamp\": 0, \"input_length\": 52.0, \"output_length\": 4}\n",
    );
    let (format, requests, resolution) = requests_of(text);
    assert_eq!(format, TraceFormat::MooncakeJsonl);
    assert_eq!(resolution, 1e-3);
    assert_eq!(
        requests,
        [
            request(0.0, 52, 4),
            request(1.0, 300, 9), // ties keep file order
            request(1.0, 0, 1),
            request(2.5, 100, 7),
        ]
    );
}

#[test]
fn azure_csv_any_column_order_and_case_relative_to_the_earliest_row() {
    let text = "generatedtokens,Extra,TIMESTAMP,contextTokens\n\
                10,x,2023-11-16 18:17:03.9799600,4808\n\
                3,y,2023-11-16 18:17:05.1,20\n\
                5,z,2023-11-16 18:17:03.9799599,7\n";
    let (format, requests, resolution) = requests_of(text);
    assert_eq!(format, TraceFormat::AzureCsv);
    assert_eq!(resolution, 1e-7, "the most digits any row uses");
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0], request(0.0, 7, 5));
    assert_eq!(requests[1].input_tokens, 4808);
    assert!((requests[1].arrival_seconds - 1e-7).abs() < 1e-12);
    assert!((requests[2].arrival_seconds - 1.120_040_1).abs() < 1e-9);

    let whole_seconds = "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,1,1\n\
                         2024-05-10 00:00:02+00:00,1,1\n2024-05-10T02:00:03+02:00,2,2\n";
    let (_, requests, resolution) = requests_of(whole_seconds);
    assert_eq!(resolution, 1.0);
    let times: Vec<f64> = requests.iter().map(|r| r.arrival_seconds).collect();
    assert_eq!(times, [0.0, 2.0, 3.0], "offsets are subtracted");
}

#[test]
fn azure_timestamps_are_civil_utc() {
    let at = |s: &str| timestamp::parse(s);
    let stamp = at("2023-11-16 18:17:03.9799600").expect("valid");
    assert_eq!(stamp.unix_nanos, 1_700_158_623_979_960_000);
    assert_eq!(stamp.fraction_digits, 7);
    assert_eq!(at("1970-01-01 00:00:00").map(|s| s.unix_nanos), Ok(0));
    assert_eq!(
        at("2024-02-29 00:00:00Z").map(|s| s.unix_nanos),
        Ok(1_709_164_800 * 1_000_000_000)
    );
    assert_eq!(
        at("2024-05-10 00:00:00.009930-01:30").map(|s| s.unix_nanos),
        Ok((1_715_299_200 + 5_400) * 1_000_000_000 + 9_930_000)
    );
    for bad in [
        "2023-02-29 00:00:00",
        "2023-13-01 00:00:00",
        "2023-11-16 24:00:00",
        "2023-11-16 18:61:00",
        "2023-11-16",
        "2023/11/16 18:17:03",
        "2023-11-16 18:17:03.",
        "2023-11-16 18:17:03.1234567890",
        "2023-11-16 18:17:03 PST",
        "1700158623",
    ] {
        assert!(at(bad).is_err(), "{bad}");
    }
}

#[test]
fn years_outside_1970_to_2200_are_refused_not_overflowed() {
    // The `sim_trace` fuzz target's reproducer: nanoseconds since 1970 of a
    // year-2302 row overflowed an i64 (a panic in debug, a wrapped time in release).
    let found = "\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens\n2302-11-16 18:17:03,1,1\n";
    let err = parse_trace(found).expect_err("year 2302");
    assert_eq!(err.line, 2);
    assert!(err.to_string().contains("1970 to 2200"), "{err}");
    assert!(timestamp::parse("0001-01-01 00:00:00").is_err());
    assert!(timestamp::parse("1969-12-31 23:59:59").is_err());
    // The window's ends, a whole 231 years apart, still give exact arrivals.
    let ends =
        format!("{AZURE_HEADER}2200-12-31 23:59:59.5-23:59,1,1\n1970-01-01 00:00:00+23:59,1,1\n");
    let (_, requests, _) = requests_of(&ends);
    let span = requests[2].arrival_seconds - requests[0].arrival_seconds;
    let expected = 7_289_654_399.5 + 2.0 * 86_340.0;
    assert!((span - expected).abs() < 1e-3, "{span} vs {expected}");
}

#[test]
fn the_first_data_line_decides_the_format() {
    use TraceFormat::*;
    let cases: &[(&str, Result<TraceFormat, usize>)] = &[
        ("0,1\n", Ok(RateCsv)),
        ("a,b\n0,1\n", Ok(RateCsv)),
        (
            "\n# c\n{\"timestamp\":0,\"input_length\":1,\"output_length\":1}\n",
            Ok(MooncakeJsonl),
        ),
        (
            "Timestamp,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n",
            Ok(AzureCsv),
        ),
        (
            "\u{feff}TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03,1,1\n",
            Ok(AzureCsv),
        ),
        ("hello\n", Err(1)),
        ("# a comment\n\nhello world\n", Err(3)),
        (
            "Timestamp,Request tokens,Response tokens\n0.0,906,446\n",
            Err(1),
        ),
        ("[{\"timestamp\": 0}]\n", Err(1)),
        ("0,1,2\n", Err(1)),
    ];
    for (text, expected) in cases {
        let got = parse_trace(text);
        match expected {
            Ok(format) => assert_eq!(got.map(|p| p.format()).as_ref(), Ok(format), "{text:?}"),
            Err(line) => {
                let error = got.expect_err(text);
                assert_eq!(error.kind, TraceErrorKind::UnknownFormat, "{text:?}");
                assert_eq!(error.line, *line, "{text:?}");
                let message = error.to_string();
                for named in ["rate CSV", "Mooncake JSONL", "Azure LLM inference CSV"] {
                    assert!(message.contains(named), "{message}");
                }
            }
        }
    }
}

#[test]
fn empty_traces_are_refused() {
    for text in [
        "",
        "\n\n",
        "# only a comment\n",
        "t_seconds,rate_per_second\n",
        "TIMESTAMP,ContextTokens,GeneratedTokens\n",
    ] {
        let error = parse_trace(text).expect_err(text);
        assert_eq!(
            (error.line, &error.kind),
            (0, &TraceErrorKind::Empty),
            "{text:?}"
        );
        assert!(error.to_string().starts_with("trace: "), "{error}");
    }
}

const MOONCAKE_OK: &str = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n";
const AZURE_HEADER: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.5,10,5\n";

/// What a refused row's kind must be.
fn is_tokens(field: &'static str, reason: &'static str) -> impl Fn(&TraceErrorKind) -> bool {
    move |kind| matches!(kind, TraceErrorKind::BadTokens { field: f, reason: r, .. } if *f == field && *r == reason)
}

#[test]
fn a_bad_row_is_refused_with_its_line() {
    type Check = Box<dyn Fn(&TraceErrorKind) -> bool>;
    let kind = |expected: TraceErrorKind| -> Check { Box::new(move |k| *k == expected) };
    let mooncake = |row: &str| format!("{MOONCAKE_OK}# note\n{MOONCAKE_OK}{row}\n{MOONCAKE_OK}");
    let azure = |row: &str| format!("{AZURE_HEADER}\n{row}\n");
    let rates = |row: &str| format!("t,rate\n0,1\n{row}\n5,1\n");
    let timestamp = |k: &TraceErrorKind| matches!(k, TraceErrorKind::BadTimestamp { .. });
    let not_json = |k: &TraceErrorKind| matches!(k, TraceErrorKind::NotJson(_));
    let cases: Vec<(String, usize, Check)> = vec![
        // Mooncake: the bad row is line 4.
        (mooncake("not json"), 4, Box::new(not_json)),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": 10"),
            4,
            Box::new(not_json),
        ),
        (mooncake("[0, 10, 5]"), 4, Box::new(not_json)),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": 10}"),
            4,
            kind(TraceErrorKind::MissingField("output_length")),
        ),
        (
            mooncake("{\"input_length\": 10, \"output_length\": 1}"),
            4,
            kind(TraceErrorKind::MissingField("timestamp")),
        ),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": -3, \"output_length\": 5}"),
            4,
            Box::new(is_tokens("input_length", "negative")),
        ),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": 2.5, \"output_length\": 5}"),
            4,
            Box::new(is_tokens("input_length", "not a whole number")),
        ),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": \"10\", \"output_length\": 5}"),
            4,
            Box::new(is_tokens("input_length", "not a number")),
        ),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 10000001}"),
            4,
            Box::new(is_tokens(
                "output_length",
                "over 10 million, not a real request",
            )),
        ),
        (
            mooncake("{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 0}"),
            4,
            kind(TraceErrorKind::ZeroOutput("output_length")),
        ),
        (
            mooncake("{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 5}"),
            4,
            Box::new(timestamp),
        ),
        (
            mooncake("{\"timestamp\": \"5\", \"input_length\": 10, \"output_length\": 5}"),
            4,
            Box::new(timestamp),
        ),
        // Azure: line 1 header, 2 good, 3 blank, 4 bad.
        (
            azure("2023-11-16 18:17:04,10"),
            4,
            kind(TraceErrorKind::MissingColumns {
                found: 2,
                needed: 3,
            }),
        ),
        (azure("2023-11-31 18:17:04,10,5"), 4, Box::new(timestamp)),
        (azure("yesterday,10,5"), 4, Box::new(timestamp)),
        (
            azure("2023-11-16 18:17:04,ten,5"),
            4,
            Box::new(is_tokens("ContextTokens", "not a number")),
        ),
        (
            azure("2023-11-16 18:17:04,10,-5"),
            4,
            Box::new(is_tokens("GeneratedTokens", "negative")),
        ),
        (
            azure("2023-11-16 18:17:04,10,0"),
            4,
            kind(TraceErrorKind::ZeroOutput("GeneratedTokens")),
        ),
        (
            azure("2023-11-16 18:17:04,99999999999,5"),
            4,
            Box::new(is_tokens(
                "ContextTokens",
                "over 10 million, not a real request",
            )),
        ),
        (
            azure("2023-11-16 18:17:04,1e3,5.5"),
            4,
            Box::new(is_tokens("GeneratedTokens", "not a whole number")),
        ),
        (
            "# a comment\n\nTIMESTAMP,ContextTokens\n2023-11-16 18:17:03,1\n".to_owned(),
            3,
            kind(TraceErrorKind::IncompleteAzureHeader("GeneratedTokens")),
        ),
        (
            "GeneratedTokens,x,y\n1,2,3\n".to_owned(),
            1,
            kind(TraceErrorKind::IncompleteAzureHeader("TIMESTAMP")),
        ),
        // Rate CSV: line 3.
        (rates("1,x"), 3, kind(TraceErrorKind::NotRatePoint)),
        (
            "a,b\nc,d\n".to_owned(),
            2,
            kind(TraceErrorKind::NotRatePoint),
        ),
        (rates("1,2,3"), 3, kind(TraceErrorKind::NotRatePoint)),
        (rates("1,-2"), 3, kind(TraceErrorKind::BadRatePoint)),
        (rates("inf,2"), 3, kind(TraceErrorKind::BadRatePoint)),
        (
            "0,1\n10,1\n5,1\n".to_owned(),
            3,
            kind(TraceErrorKind::TimeBackwards { previous: 10.0 }),
        ),
    ];
    for (text, line, check) in &cases {
        let error = parse_trace(text).expect_err(text);
        assert_eq!(error.line, *line, "{text:?}: {error}");
        assert!(check(&error.kind), "{text:?}: {:?}", error.kind);
        let message = error.to_string();
        assert!(
            message.starts_with(&format!("trace line {line}: `")),
            "{message}"
        );
        let bad_line = text.lines().nth(line - 1).expect("the line exists").trim();
        assert!(message.contains(bad_line), "{message} names {bad_line:?}");
    }
}

#[test]
fn a_long_bad_line_is_quoted_cut_short() {
    let ids: Vec<String> = (0..200).map(|i| i.to_string()).collect();
    let row = format!("{{\"timestamp\": 1, \"hash_ids\": [{}]}}", ids.join(", "));
    let error = parse_trace(&row).expect_err("no lengths");
    assert_eq!(error.kind, TraceErrorKind::MissingField("input_length"));
    assert_eq!(error.content.chars().count(), CONTENT_CHARS + 1);
    assert!(error.content.ends_with('…'));
    assert!(
        error.to_string().contains("has no `input_length`"),
        "{error}"
    );
    // A line that fits is quoted whole, with no mark.
    let short = parse_trace("{\"timestamp\": 1}").expect_err("no lengths");
    assert_eq!(short.content, "{\"timestamp\": 1}");
}

#[test]
fn the_committed_traces_parse_and_agree_across_formats() {
    let cases = [
        ("code-completion", CODE_JSONL, CODE_CSV, 7162),
        ("chat", CHAT_JSONL, CHAT_CSV, 7061),
    ];
    for (name, jsonl, csv, count) in cases {
        let (format, mooncake, resolution) = requests_of(jsonl);
        assert_eq!(
            (format, resolution),
            (TraceFormat::MooncakeJsonl, 1e-3),
            "{name}"
        );
        let (format, azure, resolution) = requests_of(csv);
        assert_eq!(
            (format, resolution),
            (TraceFormat::AzureCsv, 1e-7),
            "{name}"
        );
        assert_eq!((mooncake.len(), azure.len()), (count, count), "{name}");
        for (m, a) in mooncake.iter().zip(&azure) {
            assert_eq!(
                (m.input_tokens, m.output_tokens),
                (a.input_tokens, a.output_tokens)
            );
            // The CSV is relative to its first row, the JSONL to the trace's start.
            let shift = mooncake[0].arrival_seconds;
            assert!(
                (m.arrival_seconds - shift - a.arrival_seconds).abs() < 1e-6,
                "{name}"
            );
        }
        let summary = summarize(&mooncake);
        assert!(
            (summary.duration_seconds - 1800.0).abs() < 5.0,
            "{name}: {summary}"
        );
        assert!((3.5..4.5).contains(&summary.mean_rate), "{name}: {summary}");
    }
    let code = summarize(&requests_of(CODE_JSONL).1);
    let chat = summarize(&requests_of(CHAT_JSONL).1);
    // The mixes differ the way they are meant to: code reads long, writes short, bursts.
    assert!(
        code.mean_input_tokens > 1.5 * chat.mean_input_tokens,
        "{code} / {chat}"
    );
    assert!(
        code.mean_output_tokens * 4.0 < chat.mean_output_tokens,
        "{code} / {chat}"
    );
    assert!(code.peak_minute_rate / code.mean_rate > chat.peak_minute_rate / chat.mean_rate);
}

fn sample() -> Vec<TraceRequest> {
    (0..2000)
        .map(|i| request(f64::from(i) * 0.01, 100 + i as u32, 1 + (i % 7) as u32))
        .collect()
}

#[test]
fn rate_scale_one_is_the_trace_itself() {
    let requests = sample();
    assert_eq!(replicate(&requests, 1.0, 0.01, 3), Ok(requests));
}

#[test]
fn rate_scale_two_replays_each_request_twice_within_its_instant() {
    let requests = sample();
    let out = replicate(&requests, 2.0, 0.01, 3).expect("valid");
    assert_eq!(out.len(), 2 * requests.len());
    for (i, pair) in out.chunks(2).enumerate() {
        let original = requests[i];
        assert_eq!(pair[0], original);
        assert_eq!(
            pair[1],
            TraceRequest {
                arrival_seconds: original.arrival_seconds + 0.005,
                ..original
            }
        );
    }
}

#[test]
fn rate_scale_two_and_a_half_adds_half_again_deterministically() {
    let requests = sample();
    let resolution = 0.01;
    let out = replicate(&requests, 2.5, resolution, 11).expect("valid");
    let expected = 2.5 * requests.len() as f64;
    // Binomial(2000, 0.5) extras: sd ≈ 22, so ± 100 is over 4 sd.
    assert!((out.len() as f64 - expected).abs() < 100.0, "{}", out.len());
    assert!(
        out.windows(2)
            .all(|w| w[0].arrival_seconds <= w[1].arrival_seconds)
    );
    assert_eq!(replicate(&requests, 2.5, resolution, 11), Ok(out.clone()));
    assert_ne!(replicate(&requests, 2.5, resolution, 12), Ok(out.clone()));
    // Every copy stays within its request's instant and keeps its sizes: 2 or 3 copies each.
    for original in &requests {
        let copies: Vec<&TraceRequest> = out
            .iter()
            .filter(|r| r.input_tokens == original.input_tokens)
            .collect();
        assert!((2..=3).contains(&copies.len()), "{}", copies.len());
        for copy in copies {
            assert_eq!(copy.output_tokens, original.output_tokens);
            let offset = copy.arrival_seconds - original.arrival_seconds;
            assert!((0.0..resolution).contains(&offset), "{offset}");
        }
    }
    // Below 1, requests are thinned the same way.
    let thinned = replicate(&requests, 0.25, resolution, 11).expect("valid");
    assert!(
        (thinned.len() as f64 - 500.0).abs() < 80.0,
        "{}",
        thinned.len()
    );
    assert!((mean_rate(&out) / mean_rate(&requests) - 2.5).abs() < 0.1);
}

#[test]
fn a_rate_scale_or_resolution_not_above_zero_is_refused() {
    let requests = sample();
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let error = replicate(&requests, scale, 0.01, 1).expect_err("refused");
        assert_eq!(error.line, 0);
        assert!(
            matches!(error.kind, TraceErrorKind::BadRateScale(_)),
            "{error}"
        );
        assert!(error.to_string().contains("--rate-scale"), "{error}");
    }
    for resolution in [0.0, -0.001, f64::NAN] {
        let error = replicate(&requests, 2.0, resolution, 1).expect_err("refused");
        assert!(
            matches!(error.kind, TraceErrorKind::BadResolution(_)),
            "{error}"
        );
    }
}

#[test]
fn summary_counts_minutes_from_the_start() {
    let requests = [
        request(0.0, 100, 10),
        request(30.0, 300, 30),
        request(61.0, 200, 20),
        request(119.0, 400, 40),
        request(120.0, 500, 50),
    ];
    let rates = minute_rates(&requests);
    assert_eq!(rates, [2.0 / 60.0, 2.0 / 60.0, 1.0 / 60.0]);
    let summary = summarize(&requests);
    assert_eq!(summary.requests, 5);
    assert_eq!(summary.duration_seconds, 120.0);
    assert_eq!(summary.mean_rate, 5.0 / 120.0);
    assert_eq!(summary.peak_minute_rate, 2.0 / 60.0);
    assert_eq!(summary.first_minute_rate, 2.0 / 60.0);
    assert_eq!(
        (summary.mean_input_tokens, summary.mean_output_tokens),
        (300.0, 30.0)
    );
    assert!(
        summary.to_string().starts_with("5 requests over 120.0 s"),
        "{summary}"
    );
    assert_eq!(summarize(&[]).requests, 0);
    assert_eq!(mean_rate(&[request(0.0, 1, 1)]), 0.0);
    assert!(minute_rates(&[]).is_empty());
}

#[test]
fn format_names() {
    let names = [
        TraceFormat::RateCsv,
        TraceFormat::MooncakeJsonl,
        TraceFormat::AzureCsv,
    ]
    .map(|f| f.name());
    assert_eq!(names, ["rate-csv", "mooncake-jsonl", "azure-csv"]);
}
