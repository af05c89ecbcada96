//! The SMB2/3 dialects peakbench speaks: a leaf that the spec (to check a target's `dialect`)
//! and the SMB target (to negotiate) both use, so the spec depends on no target implementation.

use anyhow::bail;

/// A dialect's revision number and its name.
pub const DIALECTS: [(u16, &str); 4] = [(0x0210, "2.1"), (0x0300, "3.0"), (0x0302, "3.0.2"), (0x0311, "3.1.1")];

/// The dialects to offer: the one asked for, or all peakbench speaks.
pub fn dialects(asked: Option<&str>) -> anyhow::Result<Vec<u16>> {
    match asked {
        None => Ok(DIALECTS.iter().map(|(d, _)| *d).collect()),
        Some(name) => match DIALECTS.iter().find(|(_, n)| *n == name) {
            Some((d, _)) => Ok(vec![*d]),
            None => bail!("dialect {name:?} is not one peakbench speaks (2.1, 3.0, 3.0.2, 3.1.1)"),
        },
    }
}
