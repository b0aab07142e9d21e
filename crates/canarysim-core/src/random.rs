//! Seeded random streams. The scenario's one seed drives every random choice; each consumer
//! (pod names, router, kube-proxy, each load worker) gets its own named stream, so adding a
//! consumer does not shift the others. PCG (rand_pcg) is a portable, named algorithm, so a
//! seed gives the same numbers on every platform and rand version.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

/// The random stream called `label` under `seed`.
pub fn stream(seed: u64, label: &str) -> Pcg64Mcg {
    // FNV-1a 64 of the label, so streams are independent of declaration order.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Pcg64Mcg::seed_from_u64(seed.rotate_left(32) ^ h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;

    #[test]
    fn same_seed_and_label_give_the_same_numbers() {
        let a: Vec<u32> = (0..4)
            .map(|_| 0)
            .scan(stream(7, "pods"), |r, _: u32| Some(r.random()))
            .collect();
        let b: Vec<u32> = (0..4)
            .map(|_| 0)
            .scan(stream(7, "pods"), |r, _: u32| Some(r.random()))
            .collect();
        let c: Vec<u32> = (0..4)
            .map(|_| 0)
            .scan(stream(7, "router"), |r, _: u32| Some(r.random()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
