//! A small seeded PRNG, so every simulated run is reproducible per seed with
//! no extra crate.
//!
//! PCG32 (O'Neill's PCG-XSH-RR, 64-bit state, 32-bit output): a multiplicative
//! congruential step then a permuted output. Each `(seed, stream)` pair gives
//! an independent sequence, so the arrivals of a scenario and seed are the
//! same for every policy (common random numbers: policies are compared on
//! identical traffic). Normal variates come from Box–Muller (the spare value
//! is kept), lognormal ones from those.

/// PCG32 with a Box–Muller normal cache.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    increment: u64,
    spare_normal: Option<f64>,
}

const MULTIPLIER: u64 = 6_364_136_223_846_793_005;

impl Rng {
    /// A generator for `seed` on `stream` (any two streams are independent).
    pub fn new(seed: u64, stream: u64) -> Rng {
        let mut rng = Rng {
            state: 0,
            increment: (stream << 1) | 1,
            spare_normal: None,
        };
        rng.next_u32();
        rng.state = rng.state.wrapping_add(seed);
        rng.next_u32();
        rng
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        let old = self.state;
        self.state = old.wrapping_mul(MULTIPLIER).wrapping_add(self.increment);
        let xorshifted = (((old >> 18) ^ old) >> 27) as u32;
        let rotation = (old >> 59) as u32;
        xorshifted.rotate_right(rotation)
    }

    /// Uniform in `[0, 1)`, 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        let high = u64::from(self.next_u32()) << 21;
        let low = u64::from(self.next_u32() >> 11);
        (high | low) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `(0, 1]` (safe for `ln`).
    pub fn uniform_open(&mut self) -> f64 {
        1.0 - self.uniform()
    }

    /// Exponential with the given rate (mean `1/rate`).
    pub fn exponential(&mut self, rate: f64) -> f64 {
        -self.uniform_open().ln() / rate
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let radius = (-2.0 * self.uniform_open().ln()).sqrt();
        let angle = std::f64::consts::TAU * self.uniform();
        self.spare_normal = Some(radius * angle.sin());
        radius * angle.cos()
    }

    /// Lognormal with the given median and shape `sigma` (of the log).
    pub fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence_other_stream_differs() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let mut c = Rng::new(7, 2);
        let xs: Vec<u32> = (0..8).map(|_| a.next_u32()).collect();
        let ys: Vec<u32> = (0..8).map(|_| b.next_u32()).collect();
        let zs: Vec<u32> = (0..8).map(|_| c.next_u32()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn moments_are_right() {
        let mut rng = Rng::new(42, 0);
        let n = 200_000;
        let (mut sum, mut sum_sq, mut exp_sum, mut logn) = (0.0, 0.0, 0.0, Vec::new());
        for _ in 0..n {
            let u = rng.uniform();
            assert!((0.0..1.0).contains(&u));
            let z = rng.normal();
            sum += z;
            sum_sq += z * z;
            exp_sum += rng.exponential(4.0);
            logn.push(rng.lognormal(3.0, 0.5));
        }
        let n = n as f64;
        assert!((sum / n).abs() < 0.01, "normal mean");
        assert!((sum_sq / n - 1.0).abs() < 0.02, "normal variance");
        assert!((exp_sum / n - 0.25).abs() < 0.005, "exponential mean");
        logn.sort_by(f64::total_cmp);
        let median = logn[logn.len() / 2];
        assert!((median - 3.0).abs() < 0.05, "lognormal median {median}");
    }
}
