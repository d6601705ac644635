//! Test-only: a small deterministic jitter for the learners' synthetic pods.

/// A small deterministic jitter in [-1, 1) (a 64-bit LCG): the same
/// readings on every run, so the learners' tests cannot flake.
pub(super) struct Jitter(pub(super) u64);

impl Jitter {
    /// The next value in [-1, 1).
    pub(super) fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
}
