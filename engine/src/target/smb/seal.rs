//! SMB 3.x encryption (MS-SMB2 3.1.4.3): each message, or a whole compound, goes inside a
//! 52-byte transform header whose bytes from the nonce on are the AEAD's associated data
//! and whose signature field holds its tag. SMB 3.0 and 3.0.2 use AES-128-CCM with keys
//! derived from the session key alone; 3.1.1 negotiates the cipher (AES-128-GCM or -CCM)
//! and derives its keys over the preauthentication integrity hash (3.2.5.3.1).

use super::sign::{kdf, Preauth};
use aes::Aes128;
use aes_gcm::aead::consts::{U11, U16};
use aes_gcm::aead::{AeadInOut, KeyInit};
use aes_gcm::Aes128Gcm;
use ccm::Ccm;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const TRANSFORM: usize = 52;
pub const TRANSFORM_ID: &[u8; 4] = b"\xfdSMB";
/// Cipher IDs of the 3.1.1 encryption capabilities context.
pub const AES_128_CCM: u16 = 1;
pub const AES_128_GCM: u16 = 2;
/// The transform header's Flags (3.1.1) / EncryptionAlgorithm (3.0): both say "encrypted" with 1.
const ENCRYPTED: u16 = 1;
const SIGNATURE_AT: usize = 4;
const NONCE_AT: usize = 20;

enum Aead {
    Ccm(Box<Ccm<Aes128, U16, U11>>),
    Gcm(Box<Aes128Gcm>),
}

impl Aead {
    fn new(cipher: u16, key: &[u8; 16]) -> Aead {
        match cipher {
            AES_128_GCM => Aead::Gcm(Box::new(Aes128Gcm::new(key.into()))),
            _ => Aead::Ccm(Box::new(Ccm::new(key.into()))),
        }
    }

    fn nonce_len(&self) -> usize {
        match self {
            Aead::Ccm(_) => 11,
            Aead::Gcm(_) => 12,
        }
    }
}

/// A session's two keys: one seals what the client sends, the other opens what it receives.
pub struct Sealer {
    seal: Aead,
    open: Aead,
    session: u64,
    /// Nonces never repeat under a key: a per-session random prefix and a counter.
    prefix: u32,
    sent: AtomicU64,
}

impl Sealer {
    pub fn new(dialect: u16, cipher: u16, session_key: &[u8; 16], preauth: &Preauth, session: u64, prefix: u32) -> Sealer {
        let (seal, open) = if dialect == super::wire::SMB311 {
            (kdf(session_key, b"SMBC2SCipherKey\0", &preauth.0), kdf(session_key, b"SMBS2CCipherKey\0", &preauth.0))
        } else {
            (kdf(session_key, b"SMB2AESCCM\0", b"ServerIn \0"), kdf(session_key, b"SMB2AESCCM\0", b"ServerOut\0"))
        };
        Sealer { seal: Aead::new(cipher, &seal), open: Aead::new(cipher, &open), session, prefix, sent: AtomicU64::new(0) }
    }

    /// Encrypt `out[TRANSFORM..]` (one message or a compound) in place and fill in the
    /// transform header before it.
    pub fn seal(&self, out: &mut [u8]) {
        let (head, msg) = out.split_at_mut(TRANSFORM);
        head.fill(0);
        head[..4].copy_from_slice(TRANSFORM_ID);
        let n = self.seal.nonce_len();
        head[NONCE_AT..NONCE_AT + 8].copy_from_slice(&self.sent.fetch_add(1, Relaxed).to_le_bytes());
        head[NONCE_AT + 8..NONCE_AT + n].copy_from_slice(&self.prefix.to_le_bytes()[..n - 8]);
        head[36..40].copy_from_slice(&(msg.len() as u32).to_le_bytes());
        head[42..44].copy_from_slice(&ENCRYPTED.to_le_bytes());
        head[44..52].copy_from_slice(&self.session.to_le_bytes());
        let (nonce, aad) = (&head[NONCE_AT..NONCE_AT + n], &head[NONCE_AT..]);
        let tag: [u8; 16] = match &self.seal {
            Aead::Ccm(k) => k.encrypt_inout_detached(nonce.try_into().expect("11 bytes"), aad, msg.into()).map(Into::into),
            Aead::Gcm(k) => k.encrypt_inout_detached(nonce.try_into().expect("12 bytes"), aad, msg.into()).map(Into::into),
        }
        .expect("an SMB message is far below the AEAD's length limit");
        head[SIGNATURE_AT..SIGNATURE_AT + 16].copy_from_slice(&tag);
    }

    /// The message(s) a transform frame holds, decrypted into `plain`.
    pub fn open(&self, frame: &[u8], plain: &mut Vec<u8>) -> Result<(), String> {
        let head = frame.get(..TRANSFORM).filter(|h| &h[..4] == TRANSFORM_ID).ok_or_else(|| format!("not an SMB3 transform frame ({} bytes)", frame.len()))?;
        let field = |at: usize, n: usize| head[at..at + n].iter().rev().fold(0u64, |v, b| v << 8 | *b as u64);
        let body = &frame[TRANSFORM..];
        if field(36, 4) != body.len() as u64 {
            return Err(format!("transform header says {} bytes, the frame holds {}", field(36, 4), body.len()));
        }
        if field(42, 2) != ENCRYPTED as u64 || field(44, 8) != self.session {
            return Err(format!("transform header for session {:#x} with flags {:#x}", field(44, 8), field(42, 2)));
        }
        plain.clear();
        plain.extend_from_slice(body);
        let n = self.open.nonce_len();
        let (nonce, aad, tag) = (&head[NONCE_AT..NONCE_AT + n], &head[NONCE_AT..], &head[SIGNATURE_AT..SIGNATURE_AT + 16]);
        let done = match &self.open {
            Aead::Ccm(k) => k.decrypt_inout_detached(nonce.try_into().expect("11 bytes"), aad, plain.as_mut_slice().into(), tag.try_into().expect("16 bytes")),
            Aead::Gcm(k) => k.decrypt_inout_detached(nonce.try_into().expect("12 bytes"), aad, plain.as_mut_slice().into(), tag.try_into().expect("16 bytes")),
        };
        done.map_err(|_| "an encrypted message does not decrypt (wrong key, or changed on the way)".to_string())
    }

    /// The peer of this sealer: what it seals, this opens (for tests and the fuzz driver).
    #[cfg(test)]
    pub fn server_side(dialect: u16, cipher: u16, session_key: &[u8; 16], preauth: &Preauth, session: u64) -> Sealer {
        let mut s = Sealer::new(dialect, cipher, session_key, preauth, session, 0);
        std::mem::swap(&mut s.seal, &mut s.open);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(s: &Sealer, msg: &[u8]) -> Vec<u8> {
        let mut out = vec![0; TRANSFORM];
        out.extend_from_slice(msg);
        s.seal(&mut out);
        out
    }

    #[test]
    fn what_one_side_seals_the_other_opens_and_any_changed_byte_is_refused() {
        let preauth = Preauth::new();
        for (dialect, cipher) in [(0x0300, AES_128_CCM), (0x0311, AES_128_CCM), (0x0311, AES_128_GCM)] {
            let (client, server) = (Sealer::new(dialect, cipher, &[7; 16], &preauth, 9, 3), Sealer::server_side(dialect, cipher, &[7; 16], &preauth, 9));
            let msg = b"\xfeSMB and the rest of a message".to_vec();
            let frame = sealed(&client, &msg);
            assert_ne!(&frame[TRANSFORM..], &msg[..], "the message went out in clear");
            let mut plain = Vec::new();
            server.open(&frame, &mut plain).unwrap();
            assert_eq!(plain, msg);
            assert!(client.open(&frame, &mut plain).is_err(), "{dialect:#x}: the client's own key opened its message");
            for i in 4..frame.len() {
                let mut bad = frame.clone();
                bad[i] ^= 1;
                assert!(server.open(&bad, &mut plain).is_err(), "{dialect:#x} {cipher}: byte {i} changed and still opened");
            }
            assert_ne!(sealed(&client, &msg)[NONCE_AT..36], frame[NONCE_AT..36], "a nonce repeated");
        }
    }
}
