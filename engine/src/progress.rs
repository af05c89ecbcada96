//! Progress reports: one JSON object per line on stderr, so any caller can follow along.

use serde_json::Value;
use std::io::Write;

pub fn emit(line: Value) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
