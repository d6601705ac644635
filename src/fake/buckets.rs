//! Every fake engine's histogram bucket bounds, spelled as the engine defines them: the bounds
//! are part of the exposition bytes (each `le` label), so they are copied from each engine's
//! source, not chosen.

/// `vllm:time_to_first_token_seconds` bounds (vLLM ≥ 0.8.2, `buckets.py`).
pub const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// `vllm:inter_token_latency_seconds` bounds.
pub const ITL_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// `vllm:e2e_request_latency_seconds` bounds (the request-latency family).
pub const E2E_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// prometheus-fastapi-instrumentator's `latency_highr_buckets` default.
pub(crate) const HTTP_HIGHR_BUCKETS: [f64; 21] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    7.5, 10.0, 30.0, 60.0,
];
/// prometheus-fastapi-instrumentator's `latency_lowr_buckets` default.
pub(crate) const HTTP_LOWR_BUCKETS: [f64; 3] = [0.1, 0.5, 1.0];

/// `sglang:time_to_first_token_seconds` bounds (SGLang's default `--bucket-time-to-first-token`).
pub const SGLANG_TTFT_BUCKETS: [f64; 18] = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
];
/// `sglang:inter_token_latency_seconds` bounds.
pub const SGLANG_ITL_BUCKETS: [f64; 23] = [
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
];
/// `sglang:e2e_request_latency_seconds` bounds: the TTFT list extended to 2400 s.
pub const SGLANG_E2E_BUCKETS: [f64; 22] = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0, 600.0, 1200.0, 1800.0, 2400.0,
];
/// Triton's default `nv_inference_first_response_histogram_ms` bounds, in milliseconds.
pub const TRITON_FIRST_RESPONSE_MS_BUCKETS: [f64; 4] = [100.0, 500.0, 2000.0, 5000.0];
/// TGI's bounds for every histogram whose name ends in `duration`: 1e-4 * 1.5^k for k = 1..=35,
/// computed by repeated multiplication exactly as the router does, so the float noise
/// (`0.00015000000000000001`) matches.
pub const TGI_DURATION_BUCKETS: [f64; 35] = tgi_duration_buckets();
/// The fake TGI's `--max-input-tokens` (TGI's historical default).
pub const TGI_MAX_INPUT_TOKENS: u32 = 1024;
/// The fake TGI's `--max-total-tokens` (TGI's historical default).
pub const TGI_MAX_TOTAL_TOKENS: u32 = 2048;
/// `tgi_request_input_length` bounds: `max_input_tokens / 100 * i`, i = 1..=100.
pub const TGI_INPUT_LENGTH_BUCKETS: [f64; 100] = tgi_linear_buckets(TGI_MAX_INPUT_TOKENS);
/// `tgi_request_generated_tokens` bounds: `max_total_tokens / 100 * i`, i = 1..=100.
pub const TGI_GENERATED_TOKENS_BUCKETS: [f64; 100] = tgi_linear_buckets(TGI_MAX_TOTAL_TOKENS);

const fn tgi_duration_buckets() -> [f64; 35] {
    let mut out = [0.0; 35];
    let mut value = 0.0001;
    let mut i = 0;
    while i < out.len() {
        value *= 1.5;
        out[i] = value;
        i += 1;
    }
    out
}

const fn tgi_linear_buckets(max: u32) -> [f64; 100] {
    let mut out = [0.0; 100];
    let mut i = 0;
    while i < out.len() {
        out[i] = (max as f64 / 100.0) * (i + 1) as f64;
        i += 1;
    }
    out
}
