//! SMB2 message signing (MS-SMB2 3.1.4.1): HMAC-SHA256 keyed by the session key for SMB
//! 2.1; AES-128-CMAC for 3.x, keyed by a key derived from it (the SP800-108 counter-mode
//! KDF of 3.1.4.2). SMB 3.1.1 derives it over the preauthentication integrity hash
//! (SHA-512 over the NEGOTIATE and SESSION_SETUP messages, 3.2.5.2), which also binds
//! the negotiation to the session.

use aes::Aes128;
use cmac::{Cmac, KeyInit as _, Mac as _};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};

pub const FLAG_SIGNED: u32 = 0x8;
/// Where a header holds its signature.
const SIGNATURE_AT: usize = 48;

/// A keyed MAC, cloned for each message so the key schedule is computed once per session.
#[derive(Clone)]
pub enum Signer {
    HmacSha256(Hmac<Sha256>),
    AesCmac(Box<Cmac<Aes128>>),
}

/// KDF in counter mode with HMAC-SHA256, one 128-bit block (MS-SMB2 3.1.4.2).
pub(super) fn kdf(key: &[u8; 16], label: &[u8], context: &[u8]) -> [u8; 16] {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for part in [&1u32.to_be_bytes()[..], label, &[0], context, &128u32.to_be_bytes()] {
        m.update(part);
    }
    m.finalize().into_bytes()[..16].try_into().expect("16 of 32 bytes")
}

impl Signer {
    /// The signer of a session: `preauth` is its integrity hash (used by 3.1.1 only).
    pub fn new(dialect: u16, session_key: &[u8; 16], preauth: &Preauth) -> Signer {
        let cmac = |key: [u8; 16]| Signer::AesCmac(Box::new(Cmac::<Aes128>::new_from_slice(&key).expect("a 16-byte key")));
        match dialect {
            0x0202 | 0x0210 => Signer::HmacSha256(<Hmac<Sha256> as Mac>::new_from_slice(session_key).expect("HMAC takes any key length")),
            0x0311 => cmac(kdf(session_key, b"SMBSigningKey\0", &preauth.0)),
            _ => cmac(kdf(session_key, b"SMB2AESCMAC\0", b"SmbSign\0")),
        }
    }

    /// The MAC of a message whose signature field counts as zero.
    fn mac(&self, msg: &[u8]) -> [u8; 16] {
        let parts = [&msg[..SIGNATURE_AT], &[0u8; 16][..], &msg[SIGNATURE_AT + 16..]];
        match self {
            Signer::HmacSha256(k) => {
                let mut m = k.clone();
                parts.iter().for_each(|p| Mac::update(&mut m, p));
                m.finalize().into_bytes()[..16].try_into().expect("16 of 32 bytes")
            }
            Signer::AesCmac(k) => {
                let mut m = (**k).clone(); // on the stack: no allocation per message
                parts.iter().for_each(|p| m.update(p));
                m.finalize().into_bytes().into()
            }
        }
    }

    /// Sign one message (header first; it must hold at least a header).
    pub fn sign(&self, msg: &mut [u8]) {
        let flags = u32::from_le_bytes(msg[16..20].try_into().expect("4 bytes")) | FLAG_SIGNED;
        msg[16..20].copy_from_slice(&flags.to_le_bytes());
        let mac = self.mac(msg);
        msg[SIGNATURE_AT..SIGNATURE_AT + 16].copy_from_slice(&mac);
    }

    /// Whether a message's signature is right (a message shorter than a header is not).
    pub fn verify(&self, msg: &[u8]) -> bool {
        msg.len() >= super::wire::HEADER && self.mac(msg)[..] == msg[SIGNATURE_AT..SIGNATURE_AT + 16]
    }
}

/// SMB 3.1.1's preauthentication integrity hash: SHA-512 chained over whole messages.
#[derive(Clone)]
pub struct Preauth(pub [u8; 64]);

impl Preauth {
    pub fn new() -> Preauth {
        Preauth([0; 64])
    }

    pub fn update(&mut self, msg: &[u8]) {
        self.0 = Sha512::new().chain_update(self.0).chain_update(msg).finalize().into();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_message_verifies_and_any_changed_byte_does_not() {
        let preauth = Preauth::new();
        for dialect in [0x0210, 0x0300, 0x0311] {
            let signer = Signer::new(dialect, &[7; 16], &preauth);
            let mut msg = Vec::new();
            super::super::wire::put_header(&mut msg, super::super::wire::ECHO, 1, 1, 0, 9, 1, 2);
            msg.extend_from_slice(&[4, 0, 0, 0]);
            signer.sign(&mut msg);
            assert!(signer.verify(&msg));
            for i in (0..msg.len()).filter(|i| !(SIGNATURE_AT..SIGNATURE_AT + 16).contains(i)) {
                let mut bad = msg.clone();
                bad[i] ^= 1;
                assert!(!signer.verify(&bad), "dialect {dialect:#x}: byte {i} changed and still verified");
            }
        }
    }
}
