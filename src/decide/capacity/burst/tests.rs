//! The rate noise behind the burst test.
use super::*;

#[test]
fn the_rate_noise_is_the_spread_of_one_polls_rate_and_a_level_shift_barely_moves_it() {
    // Rates alternating 4 and 16 req/s: successive differences of 12, so
    // (Δrate)²/2 = 72, σ ≈ 8.5 req/s once the 300 s estimate has settled.
    let mut noise = RateNoise::default();
    for i in 0..600 {
        noise.observe(if i % 2 == 0 { 4.0 } else { 16.0 }, 5.0);
    }
    let variance = noise.variance.expect("measured");
    assert!((variance - 72.0).abs() < 0.5, "{variance}");
    // λ̂'s own spread at α = 0.283 (τ = 15 s, 5 s polls): σ·√(α/(2−α)).
    let alpha = 1.0 - (-5.0_f64 / 15.0).exp();
    let sigma = noise.smoothed_sigma(alpha);
    assert!((sigma - 72.0_f64.sqrt() * (alpha / (2.0 - alpha)).sqrt()).abs() < 0.01);
    // A steady load that steps from 10 to 100 req/s adds one difference,
    // weighted as one poll of 300 s, and none while it stays at 100.
    let mut noise = RateNoise::default();
    for _ in 0..100 {
        noise.observe(10.0, 5.0);
    }
    assert_eq!(noise.variance, Some(0.0));
    noise.observe(100.0, 5.0);
    let keep = (-5.0_f64 / RATE_NOISE_SECONDS).exp();
    let jump = (1.0 - keep) * 0.5 * 90.0 * 90.0;
    assert!((noise.variance.expect("measured") - jump).abs() < 1e-6);
    for _ in 0..12 {
        noise.observe(100.0, 5.0);
    }
    let after = noise.variance.expect("measured");
    assert!((after - jump * keep.powi(12)).abs() < 1e-6, "{after}");
    // A gap: the next rate is not differenced across it.
    noise.gap();
    noise.observe(0.0, 5.0);
    assert_eq!(noise.variance, Some(after));
}
