//! Distributions of sizes, counts and popularity weights (SPEC.md, "DIST").
//! Sampling is by inversion where possible so one uniform draw gives one value.

use rand::Rng;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Dist {
    #[serde(flatten)]
    pub shape: Shape,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Shape {
    Constant {
        value: f64,
    },
    Uniform {
        low: f64,
        high: f64,
    },
    Histogram {
        points: Vec<(f64, f64)>,
    },
    Exponential {
        mean: f64,
    },
    Pareto {
        alpha: f64,
        scale: f64,
    },
    Lognormal {
        mean: f64,
        median: f64,
    },
    Bimodal {
        first: Box<Dist>,
        second: Box<Dist>,
        p_first: f64,
    },
    /// Popularity only: rank r gets weight r^-alpha.
    Zipf {
        alpha: f64,
    },
}

impl Dist {
    pub fn constant(value: f64) -> Dist {
        Dist { shape: Shape::Constant { value }, min: None, max: None }
    }
    /// The value every sample takes, for a constant distribution: drawn once, not per request.
    pub fn fixed(&self) -> Option<f64> {
        match self.shape {
            Shape::Constant { value } => Some(self.clamp(value)),
            _ => None,
        }
    }
    pub fn zero() -> Dist {
        Dist::constant(0.0)
    }
    pub fn one() -> Dist {
        Dist::constant(1.0)
    }

    pub fn validate(&self) -> Result<(), String> {
        let finite = |name: &str, v: f64| if v.is_finite() { Ok(()) } else { Err(format!("{name} must be a finite number")) };
        match &self.shape {
            Shape::Constant { value } => finite("value", *value)?,
            Shape::Uniform { low, high } => {
                finite("low", *low)?;
                finite("high", *high)?;
                if low > high {
                    return Err("low is above high".into());
                }
            }
            Shape::Histogram { points } => {
                if points.is_empty() {
                    return Err("histogram has no points".into());
                }
                for (v, w) in points {
                    finite("value", *v)?;
                    if !(w.is_finite() && *w >= 0.0) {
                        return Err("weights must be finite and >= 0".into());
                    }
                }
                if points.iter().map(|p| p.1).sum::<f64>() <= 0.0 {
                    return Err("histogram weights sum to zero".into());
                }
            }
            Shape::Exponential { mean } => {
                if !(mean.is_finite() && *mean > 0.0) {
                    return Err("mean must be > 0".into());
                }
            }
            Shape::Pareto { alpha, scale } => {
                if !(alpha.is_finite() && *alpha > 0.0 && scale.is_finite() && *scale > 0.0) {
                    return Err("alpha and scale must be > 0".into());
                }
            }
            Shape::Lognormal { mean, median } => {
                if !(median.is_finite() && *median > 0.0 && mean.is_finite() && mean >= median) {
                    return Err("needs 0 < median <= mean".into());
                }
            }
            Shape::Bimodal { first, second, p_first } => {
                first.validate().map_err(|e| format!("first: {e}"))?;
                second.validate().map_err(|e| format!("second: {e}"))?;
                if !(0.0..=1.0).contains(p_first) {
                    return Err("p_first must be in [0, 1]".into());
                }
            }
            Shape::Zipf { alpha } => {
                if !(alpha.is_finite() && *alpha >= 0.0) {
                    return Err("alpha must be >= 0".into());
                }
            }
        }
        if let (Some(lo), Some(hi)) = (self.min, self.max) {
            if lo > hi {
                return Err("min is above max".into());
            }
        }
        Ok(())
    }

    /// One sample, clamped to [min, max].
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let v = match &self.shape {
            Shape::Constant { value } => *value,
            Shape::Uniform { low, high } => low + (high - low) * rng.random::<f64>(),
            Shape::Histogram { points } => {
                let total: f64 = points.iter().map(|p| p.1).sum();
                let mut u = rng.random::<f64>() * total;
                let mut chosen = points[points.len() - 1].0;
                for (v, w) in points {
                    if u < *w {
                        chosen = *v;
                        break;
                    }
                    u -= w;
                }
                chosen
            }
            Shape::Exponential { mean } => -mean * open01(rng).ln(),
            Shape::Pareto { alpha, scale } => scale / open01(rng).powf(1.0 / alpha),
            Shape::Lognormal { mean, median } => {
                // median = e^mu, mean = e^(mu + sigma^2/2)
                let mu = median.ln();
                let sigma = (2.0 * (mean / median).ln()).sqrt();
                (mu + sigma * standard_normal(rng)).exp()
            }
            Shape::Bimodal { first, second, p_first } => {
                if rng.random::<f64>() < *p_first {
                    first.sample(rng)
                } else {
                    second.sample(rng)
                }
            }
            // As a plain distribution a Zipf popularity is meaningless; weights come from `weight`.
            Shape::Zipf { .. } => 1.0,
        };
        self.clamp(v)
    }

    fn clamp(&self, v: f64) -> f64 {
        let v = self.min.map_or(v, |lo| v.max(lo));
        self.max.map_or(v, |hi| v.min(hi))
    }

    /// A count (files per directory, ...): a sample rounded to a non-negative integer.
    pub fn sample_count<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        self.sample(rng).round().max(0.0) as u64
    }

    /// Popularity weight of the object whose private uniform draw is `u` in a set of `n`.
    /// For Zipf, a uniformly random rank in 1..=n is ceil(u·n), so weights follow
    /// Zipf's law whatever n is, and an object keeps its weight when the set grows.
    pub fn weight<R: Rng + ?Sized>(&self, u: f64, n: u64, rng: &mut R) -> f64 {
        match &self.shape {
            Shape::Zipf { alpha } => {
                let rank = (u * n.max(1) as f64).ceil().max(1.0);
                rank.powf(-alpha)
            }
            _ => self.sample(rng).max(0.0),
        }
    }
}

fn open01<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    1.0 - rng.random::<f64>() // (0, 1]
}

fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    // Box–Muller; one value per call keeps the draw count per sample fixed.
    let u1 = open01(rng);
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn moments(d: &Dist, n: usize) -> (f64, f64) {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let mut sorted = xs.clone();
        sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (mean, sorted[n / 2])
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    fn dist(json: &str) -> Dist {
        let d: Dist = serde_json::from_str(json).unwrap();
        d.validate().unwrap();
        d
    }

    #[test]
    fn lognormal_matches_mean_and_median() {
        // The Web server file sizes of Fstress: mean 10.5 KB, median 1.3 KB.
        let (mean, median) = moments(&dist(r#"{"kind":"lognormal","mean":10500,"median":1300}"#), 2_000_000);
        assert!(close(median, 1300.0, 0.01), "median {median}");
        assert!(close(mean, 10500.0, 0.05), "mean {mean}");
    }

    #[test]
    fn exponential_uniform_pareto_means() {
        assert!(close(moments(&dist(r#"{"kind":"exponential","mean":4.0}"#), 500_000).0, 4.0, 0.01));
        assert!(close(moments(&dist(r#"{"kind":"uniform","low":10,"high":40}"#), 500_000).0, 25.0, 0.005));
        // Pareto(alpha=3, scale=2): mean = alpha*scale/(alpha-1) = 3, median = scale*2^(1/alpha)
        let (mean, median) = moments(&dist(r#"{"kind":"pareto","alpha":3,"scale":2}"#), 1_000_000);
        assert!(close(mean, 3.0, 0.01), "mean {mean}");
        assert!(close(median, 2.0 * 2f64.powf(1.0 / 3.0), 0.01), "median {median}");
    }

    #[test]
    fn histogram_and_bimodal_shares() {
        let h = dist(r#"{"kind":"histogram","points":[[5000,3],[45000,1]]}"#);
        let (mean, _) = moments(&h, 400_000);
        assert!(close(mean, 15000.0, 0.01), "mean {mean}");
        let b = dist(r#"{"kind":"bimodal","p_first":0.25,"first":{"kind":"constant","value":0},"second":{"kind":"constant","value":8}}"#);
        assert!(close(moments(&b, 400_000).0, 6.0, 0.01));
    }

    #[test]
    fn bounds_clamp_samples() {
        let d = dist(r#"{"kind":"pareto","alpha":0.5,"scale":1,"max":100}"#);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert!((0..100_000).all(|_| {
            let x = d.sample(&mut rng);
            (1.0..=100.0).contains(&x)
        }));
    }

    #[test]
    fn zipf_weights_follow_rank() {
        let z = dist(r#"{"kind":"zipf","alpha":1.0}"#);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(z.weight(0.0001, 100, &mut rng), 1.0); // rank 1
        assert_eq!(z.weight(0.5, 100, &mut rng), 1.0 / 50.0);
        assert_eq!(z.weight(1.0, 100, &mut rng), 1.0 / 100.0);
    }

    #[test]
    fn invalid_shapes_are_rejected() {
        for bad in [
            r#"{"kind":"lognormal","mean":1,"median":2}"#,
            r#"{"kind":"uniform","low":3,"high":2}"#,
            r#"{"kind":"histogram","points":[]}"#,
            r#"{"kind":"exponential","mean":0}"#,
            r#"{"kind":"constant","value":1,"min":5,"max":2}"#,
        ] {
            let d: Dist = serde_json::from_str(bad).unwrap();
            assert!(d.validate().is_err(), "{bad} accepted");
        }
    }
}
