//! The receive buffer of a connection's reader (NFS records, SMB2 frames): bytes read
//! in large chunks, consumed from the front, compacted and grown as needed.

pub struct ReadBuf {
    pub buf: Vec<u8>,
    pub start: usize,
    pub end: usize,
    /// The buffer grows to at most this many bytes beyond one message.
    max: usize,
}

impl ReadBuf {
    pub fn new(max: usize) -> ReadBuf {
        ReadBuf { buf: vec![0; 256 * 1024], start: 0, end: 0, max }
    }

    /// Space to read into (compacting and growing as needed).
    pub fn space(&mut self) -> &mut [u8] {
        if self.start > 0 && (self.start == self.end || self.end == self.buf.len()) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            let grown = (self.buf.len() * 2).min(self.max + 64);
            self.buf.resize(grown.max(self.buf.len() + 4096), 0);
        }
        &mut self.buf[self.end..]
    }

    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Bytes at these positions, valid until the next `space`.
    pub fn get(&self, range: std::ops::Range<usize>) -> &[u8] {
        &self.buf[range]
    }

    /// The bytes read and not yet consumed.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}
