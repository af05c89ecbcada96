//! XDR (RFC 4506) encoding into a byte vector and bounds-checked decoding from a slice.
//! Decoding never panics: truncated or malformed input is an `XdrError`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XdrError(pub &'static str);

impl std::fmt::Display for XdrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed XDR: {}", self.0)
    }
}

pub type XResult<T> = Result<T, XdrError>;

pub struct Enc<'a>(pub &'a mut Vec<u8>);

impl Enc<'_> {
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u32(v as u32)
    }
    /// Variable-length opaque (also strings): length, bytes, zero padding to 4.
    pub fn opaque(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.fixed(b)
    }
    /// Fixed-length opaque: bytes and padding, no length.
    pub fn fixed(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        let pad = (4 - b.len() % 4) % 4;
        self.0.extend_from_slice(&[0u8; 3][..pad]);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.opaque(s.as_bytes())
    }
}

pub struct Dec<'a> {
    buf: &'a [u8],
    pub at: usize,
}

impl<'a> Dec<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Dec { buf, at: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.at
    }
    fn take(&mut self, n: usize) -> XResult<&'a [u8]> {
        if self.remaining() < n {
            return Err(XdrError("truncated"));
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    pub fn u32(&mut self) -> XResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> XResult<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    pub fn bool(&mut self) -> XResult<bool> {
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(XdrError("boolean not 0 or 1")),
        }
    }
    pub fn fixed(&mut self, n: usize) -> XResult<&'a [u8]> {
        let b = self.take(n)?;
        self.take((4 - n % 4) % 4)?;
        Ok(b)
    }
    /// Variable-length opaque of at most `max` bytes.
    pub fn opaque(&mut self, max: usize) -> XResult<&'a [u8]> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(XdrError("opaque longer than its limit"));
        }
        self.fixed(n)
    }
    pub fn string(&mut self, max: usize) -> XResult<String> {
        let b = self.opaque(max)?;
        String::from_utf8(b.to_vec()).map_err(|_| XdrError("string is not UTF-8"))
    }
    pub fn skip(&mut self, n: usize) -> XResult<()> {
        self.take(n).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_padding() {
        let mut v = Vec::new();
        Enc(&mut v).u32(7).u64(1 << 40).bool(true).str("abcde").opaque(&[]);
        assert_eq!(v.len(), 4 + 8 + 4 + 4 + 8 + 4);
        let mut d = Dec::new(&v);
        assert_eq!(d.u32().unwrap(), 7);
        assert_eq!(d.u64().unwrap(), 1 << 40);
        assert!(d.bool().unwrap());
        assert_eq!(d.string(255).unwrap(), "abcde");
        assert_eq!(d.opaque(10).unwrap(), b"");
        assert_eq!(d.remaining(), 0);
        assert!(d.u32().is_err());
    }

    #[test]
    fn limits_and_truncation_are_errors() {
        let mut v = Vec::new();
        Enc(&mut v).u32(100);
        assert!(Dec::new(&v).opaque(64).is_err());
        assert!(Dec::new(&v).opaque(1000).is_err());
        Enc(&mut v).u32(u32::MAX);
        let mut d = Dec::new(&v[4..]);
        assert!(d.opaque(usize::MAX).is_err());
    }
}
