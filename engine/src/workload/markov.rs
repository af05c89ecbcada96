//! A Markov chain over handle states (SPECsfs2008's CIFS workload): each transition emits an op
//! and moves to a state holding a known number of open handles, so the op stream only ever uses a
//! handle between its `open` and its `close`, and never holds more handles than its states do.

use super::fileset::FileSet;
use crate::op::Op;
use crate::spec::MarkovSpec;
use rand::Rng;
use std::collections::VecDeque;

pub struct Chain {
    /// Per state: (cumulative probability, op, next state).
    states: Vec<Vec<(f64, Op, usize)>>,
    state: usize,
    /// The files whose handles are open, the oldest first (the one `close` closes).
    pub open: VecDeque<u32>,
}

impl Chain {
    pub fn new(spec: &MarkovSpec) -> Chain {
        let states = spec
            .states
            .iter()
            .map(|s| {
                let total: f64 = s.next.iter().map(|t| t.weight).sum();
                let mut acc = 0.0;
                s.next
                    .iter()
                    .filter(|t| t.weight > 0.0)
                    .map(|t| {
                        acc += t.weight / total;
                        (acc, t.op, t.to)
                    })
                    .collect()
            })
            .collect();
        Chain { states, state: spec.start, open: VecDeque::new() }
    }

    /// Take a transition: its op, having moved to its state.
    pub fn step<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Op {
        let choices = &self.states[self.state];
        let u = rng.random::<f64>();
        let &(_, op, to) = choices.iter().find(|(c, _, _)| u < *c).unwrap_or(choices.last().expect("a state with a transition (spec.rs)"));
        self.state = to;
        op
    }

    /// One of the open handles' files, uniformly.
    pub fn any_open<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        self.open[rng.random_range(0..self.open.len())]
    }

    /// A file to open: picked by popularity, but never one whose handle is already open (each
    /// open file has one handle, so a target can key its handles by path).
    pub fn unopened<R: Rng + ?Sized>(&self, set: &FileSet, rng: &mut R) -> u32 {
        for _ in 0..64 {
            if let Some(f) = set.file_pick.pick(rng).map(|i| i as u32) {
                if !self.open.contains(&f) {
                    return f;
                }
            }
        }
        // The popular files are all open: the next pickable one from a random place.
        let n = set.file_pick.len();
        let from = rng.random_range(0..n);
        (0..n)
            .map(|i| ((from + i) % n) as u32)
            .find(|&f| set.file_pick.weight(f as usize) > 0 && !self.open.contains(&f))
            .expect("more pickable files than handles (check_room)")
    }
}

/// Refuse a file set with fewer files to open than the chain keeps open at once.
pub fn check_room(spec: &MarkovSpec, set: &FileSet) -> anyhow::Result<()> {
    let most = spec.states.iter().map(|s| s.handles).max().unwrap_or(0) as usize;
    let pickable = (0..set.file_pick.len()).filter(|&i| set.file_pick.weight(i) > 0).count();
    if pickable <= most {
        anyhow::bail!("the Markov workload keeps up to {most} handles open, so it needs more than {most} files to access; the file set has {pickable}");
    }
    Ok(())
}

/// `peakbench-engine generate SPEC N`: the first `n` ops of the spec's stream, counted, with no
/// target and no clock, and every op on a handle checked against the handles opened and not yet
/// closed (an op on a handle that is not open, or an open of one that is, counts as invalid).
pub fn sample(spec: &crate::spec::TrialSpec, n: u64) -> anyhow::Result<serde_json::Value> {
    let set = FileSet::build(&spec.fileset);
    if let Some(m) = &spec.markov {
        check_room(m, &set)?;
    }
    let mut generator = super::generator::Generator::new(spec, set);
    generator.paths = false;
    let mut counts = [0u64; Op::ALL.len()];
    let (mut open, mut most_open, mut invalid) = (std::collections::HashSet::new(), 0usize, 0u64);
    for _ in 0..n {
        let (op, _, object) = generator.next();
        counts[op.index()] += 1;
        let valid = match (op, object) {
            (Op::Open, Some(f)) => open.insert(f),
            (Op::Close, Some(f)) => open.remove(&f),
            (op, Some(f)) if spec.markov.is_some() && op.on_handle() => open.contains(&f),
            (op, None) => !op.on_handle() && op != Op::Open,
            _ => true,
        };
        invalid += u64::from(!valid);
        most_open = most_open.max(open.len());
    }
    let ops: serde_json::Map<String, serde_json::Value> =
        Op::ALL.iter().filter(|op| counts[op.index()] > 0).map(|op| (op.name().to_string(), counts[op.index()].into())).collect();
    Ok(serde_json::json!({"requests": n, "ops": ops, "most_open": most_open, "invalid": invalid}))
}
