//! The workload model: distributions, the op mix, object sets, the file set, the request generator and its Markov chain.

pub mod dist;
pub mod fileset;
pub mod generator;
pub mod markov;
pub mod mix;
pub mod objects;
