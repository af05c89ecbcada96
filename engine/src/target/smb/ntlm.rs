//! NTLMSSP with NTLMv2 responses (MS-NLMP), sent raw in SESSION_SETUP (Samba and
//! Windows accept NTLMSSP without a SPNEGO wrapper).

use super::wire::utf16;
use hmac::{Hmac, Mac};
use md4::{Digest, Md4};

type HmacMd5 = Hmac<md5::Md5>;

const UNICODE: u32 = 0x1;
const REQUEST_TARGET: u32 = 0x4;
const NTLM: u32 = 0x200;
const ALWAYS_SIGN: u32 = 0x8000;
const EXTENDED_SESSION_SECURITY: u32 = 0x8_0000;
const TARGET_INFO: u32 = 0x80_0000;
const N128: u32 = 0x2000_0000;
const N56: u32 = 0x8000_0000;
const FLAGS: u32 = UNICODE | REQUEST_TARGET | NTLM | ALWAYS_SIGN | EXTENDED_SESSION_SECURITY | TARGET_INFO | N128 | N56;
/// MsvAvTimestamp in the server's target information.
const AV_TIMESTAMP: u16 = 7;

fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    let mut m = HmacMd5::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

pub fn negotiate_message() -> Vec<u8> {
    let mut m = b"NTLMSSP\0".to_vec();
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&FLAGS.to_le_bytes());
    m.extend_from_slice(&[0u8; 16]); // no domain, no workstation
    m
}

pub struct Challenge {
    pub server_challenge: [u8; 8],
    pub target_info: Vec<u8>,
    pub flags: u32,
}

pub fn parse_challenge(m: &[u8]) -> Result<Challenge, String> {
    if m.len() < 48 || &m[..8] != b"NTLMSSP\0" || m[8..12] != 2u32.to_le_bytes() {
        return Err(format!("the server's NTLMSSP challenge is malformed ({} bytes)", m.len()));
    }
    let len = u16::from_le_bytes([m[40], m[41]]) as usize;
    let off = u32::from_le_bytes([m[44], m[45], m[46], m[47]]) as usize;
    let target_info = m.get(off..off.saturating_add(len)).ok_or("NTLMSSP target information beyond the message")?.to_vec();
    Ok(Challenge { server_challenge: m[24..32].try_into().expect("8 bytes"), target_info, flags: u32::from_le_bytes([m[20], m[21], m[22], m[23]]) })
}

/// The server's timestamp from its target information, if it sent one.
fn av_timestamp(info: &[u8]) -> Option<[u8; 8]> {
    let mut at = 0;
    while at + 4 <= info.len() {
        let id = u16::from_le_bytes([info[at], info[at + 1]]);
        let len = u16::from_le_bytes([info[at + 2], info[at + 3]]) as usize;
        if id == 0 {
            return None;
        }
        if id == AV_TIMESTAMP && len == 8 {
            return info.get(at + 4..at + 12)?.try_into().ok();
        }
        at += 4 + len;
    }
    None
}

/// NTOWFv2: HMAC-MD5 keyed by the NT hash (MD4 of the UTF-16 password) over UPPER(user) + domain.
pub fn ntowf_v2(user: &str, password: &str, domain: &str) -> [u8; 16] {
    let nt_hash = Md4::digest(utf16(password));
    hmac_md5(&nt_hash, &[&utf16(&user.to_uppercase()), &utf16(domain)])
}

/// The AUTHENTICATE message answering `challenge`, with `client_challenge` (random in use),
/// and the session key it sets up (SessionBaseKey: no key exchange is negotiated).
pub fn authenticate_message(
    challenge: &Challenge,
    user: &str,
    password: &str,
    domain: &str,
    client_challenge: [u8; 8],
    now_filetime: u64,
) -> (Vec<u8>, [u8; 16]) {
    let key = ntowf_v2(user, password, domain);
    let stamp = av_timestamp(&challenge.target_info).unwrap_or(now_filetime.to_le_bytes());
    let mut blob = vec![1u8, 1, 0, 0, 0, 0, 0, 0];
    blob.extend_from_slice(&stamp);
    blob.extend_from_slice(&client_challenge);
    blob.extend_from_slice(&[0; 4]);
    blob.extend_from_slice(&challenge.target_info);
    blob.extend_from_slice(&[0; 4]);
    let proof = hmac_md5(&key, &[&challenge.server_challenge, &blob]);
    let session_key = hmac_md5(&key, &[&proof]);
    let nt = [&proof[..], &blob].concat();
    let lm = [&hmac_md5(&key, &[&challenge.server_challenge, &client_challenge])[..], &client_challenge].concat();
    let fields = [lm, nt, utf16(domain), utf16(user), utf16("PEAKBENCH"), Vec::new()];
    let mut m = b"NTLMSSP\0".to_vec();
    m.extend_from_slice(&3u32.to_le_bytes());
    let mut payload = Vec::new();
    let mut offset = 64u32;
    for (i, f) in fields.iter().enumerate() {
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&(f.len() as u16).to_le_bytes());
        m.extend_from_slice(&offset.to_le_bytes());
        offset += f.len() as u32;
        payload.extend_from_slice(f);
        if i == 4 {
            m.extend_from_slice(&(FLAGS & challenge.flags | UNICODE).to_le_bytes());
        }
    }
    debug_assert_eq!(m.len(), 64);
    m.extend_from_slice(&payload);
    (m, session_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntlmv2_matches_ms_nlmp_4_2_4() {
        // MS-NLMP 4.2.4.1.1: NTOWFv2("User", "Password", "Domain").
        assert_eq!(ntowf_v2("User", "Password", "Domain"), [0x0c, 0x86, 0x8a, 0x40, 0x3b, 0xfd, 0x7a, 0x93, 0xa3, 0x00, 0x1e, 0xf2, 0x2e, 0xf0, 0x2e, 0x3f]);
    }

    #[test]
    fn challenge_parsing_refuses_short_or_lying_messages() {
        assert!(parse_challenge(b"NTLMSSP\0").is_err());
        let mut m = b"NTLMSSP\0".to_vec();
        m.extend_from_slice(&2u32.to_le_bytes());
        m.resize(48, 0);
        m[40] = 200; // target info of 200 bytes at offset 0: beyond a 48-byte message
        assert!(parse_challenge(&m).is_err());
    }
}
