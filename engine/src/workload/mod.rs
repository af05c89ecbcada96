//! The workload model: distributions, the op mix, object sets, the file set and the request generator.

pub mod dist;
pub mod fileset;
pub mod generator;
pub mod mix;
pub mod objects;
