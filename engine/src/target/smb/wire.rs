//! SMB2/3 messages (MS-SMB2): the 64-byte header, the requests peakbench sends
//! and the fields it reads from their responses. Every decoder checks lengths
//! and offsets against the bytes it has, so a garbled reply is an error, never a panic.

pub const HEADER: usize = 64;
/// A frame (Direct TCP transport: 4-byte length) larger than this breaks the connection.
pub const MAX_FRAME: usize = 16 << 20;

pub const NEGOTIATE: u16 = 0;
pub const SESSION_SETUP: u16 = 1;
pub const LOGOFF: u16 = 2;
pub const TREE_CONNECT: u16 = 3;
pub const CREATE: u16 = 5;
pub const CLOSE: u16 = 6;
pub const FLUSH: u16 = 7;
pub const READ: u16 = 8;
pub const WRITE: u16 = 9;
pub const LOCK: u16 = 10;
pub const ECHO: u16 = 13;
pub const QUERY_DIRECTORY: u16 = 14;
pub const QUERY_INFO: u16 = 16;
pub const SET_INFO: u16 = 17;

pub const FLAG_ASYNC: u32 = 0x2;
pub const FLAG_RELATED: u32 = 0x4;

pub const STATUS_SUCCESS: u32 = 0;
pub const STATUS_PENDING: u32 = 0x0000_0103;
pub const STATUS_ACCESS_DENIED: u32 = 0xC000_0022;
pub const STATUS_NO_MORE_FILES: u32 = 0x8000_0006;
pub const STATUS_END_OF_FILE: u32 = 0xC000_0011;
pub const STATUS_MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
pub const STATUS_OBJECT_NAME_NOT_FOUND: u32 = 0xC000_0034;
pub const STATUS_BAD_NETWORK_NAME: u32 = 0xC000_00CC;
pub const STATUS_NETWORK_SESSION_EXPIRED: u32 = 0xC000_035C;

/// The name of an NTSTATUS, as an op's error kind.
pub fn status_name(s: u32) -> String {
    let name = match s {
        0x8000_0005 => "STATUS_BUFFER_OVERFLOW",
        0x8000_0006 => "STATUS_NO_MORE_FILES",
        0xC000_0001 => "STATUS_UNSUCCESSFUL",
        0xC000_0002 => "STATUS_NOT_IMPLEMENTED",
        0xC000_0008 => "STATUS_INVALID_HANDLE",
        0xC000_000D => "STATUS_INVALID_PARAMETER",
        0xC000_000F => "STATUS_NO_SUCH_FILE",
        0xC000_0010 => "STATUS_INVALID_DEVICE_REQUEST",
        0xC000_0011 => "STATUS_END_OF_FILE",
        0xC000_0016 => "STATUS_MORE_PROCESSING_REQUIRED",
        0xC000_0022 => "STATUS_ACCESS_DENIED",
        0xC000_0023 => "STATUS_BUFFER_TOO_SMALL",
        0xC000_0033 => "STATUS_OBJECT_NAME_INVALID",
        0xC000_0034 => "STATUS_OBJECT_NAME_NOT_FOUND",
        0xC000_0035 => "STATUS_OBJECT_NAME_COLLISION",
        0xC000_003A => "STATUS_OBJECT_PATH_NOT_FOUND",
        0xC000_0043 => "STATUS_SHARING_VIOLATION",
        0xC000_0054 => "STATUS_FILE_LOCK_CONFLICT",
        0xC000_0055 => "STATUS_LOCK_NOT_GRANTED",
        0xC000_0056 => "STATUS_DELETE_PENDING",
        0xC000_0061 => "STATUS_PRIVILEGE_NOT_HELD",
        0xC000_006D => "STATUS_LOGON_FAILURE",
        0xC000_007F => "STATUS_DISK_FULL",
        0xC000_009A => "STATUS_INSUFFICIENT_RESOURCES",
        0xC000_00B5 => "STATUS_IO_TIMEOUT",
        0xC000_00BA => "STATUS_FILE_IS_A_DIRECTORY",
        0xC000_00BB => "STATUS_NOT_SUPPORTED",
        0xC000_00C9 => "STATUS_NETWORK_NAME_DELETED",
        0xC000_00CC => "STATUS_BAD_NETWORK_NAME",
        0xC000_0101 => "STATUS_DIRECTORY_NOT_EMPTY",
        0xC000_0103 => "STATUS_NOT_A_DIRECTORY",
        0xC000_0120 => "STATUS_CANCELLED",
        0xC000_0128 => "STATUS_FILE_CLOSED",
        0xC000_0203 => "STATUS_USER_SESSION_DELETED",
        0xC000_0205 => "STATUS_INSUFF_SERVER_RESOURCES",
        0xC000_035C => "STATUS_NETWORK_SESSION_EXPIRED",
        0xC000_A000 => "STATUS_INVALID_SIGNATURE",
        _ => return format!("STATUS_{s:#010X}"),
    };
    name.to_string()
}

use crate::dialect::DIALECTS;
pub const SMB311: u16 = 0x0311;

/// NEGOTIATE and SESSION_SETUP security modes.
pub const SIGNING_ENABLED: u16 = 0x1;
pub const SIGNING_REQUIRED: u16 = 0x2;

pub fn dialect_name(d: u16) -> String {
    match DIALECTS.iter().find(|(r, _)| *r == d) {
        Some((_, n)) => n.to_string(),
        None if d == 0x0202 => "2.0.2".into(),
        None => format!("{d:#06x}"),
    }
}

// Access masks, share access, dispositions and options of CREATE.
pub const FILE_READ_DATA: u32 = 0x1;
pub const FILE_WRITE_DATA: u32 = 0x2;
pub const FILE_READ_ATTRIBUTES: u32 = 0x80;
pub const FILE_WRITE_ATTRIBUTES: u32 = 0x100;
pub const DELETE: u32 = 0x1_0000;
pub const READ_CONTROL: u32 = 0x2_0000;
pub const SYNCHRONIZE: u32 = 0x10_0000;
pub const SHARE_ALL: u32 = 0x7;
pub const OPEN: u32 = 1;
pub const CREATE_NEW: u32 = 2;
pub const OPEN_IF: u32 = 3;
pub const OVERWRITE_IF: u32 = 5;
pub const DIRECTORY_FILE: u32 = 0x1;
pub const NON_DIRECTORY_FILE: u32 = 0x40;
pub const DELETE_ON_CLOSE: u32 = 0x1000;
pub const ATTR_DIRECTORY: u32 = 0x10;
pub const ATTR_NORMAL: u32 = 0x80;

pub const INFO_FILE: u8 = 1;
pub const INFO_FILESYSTEM: u8 = 2;
pub const INFO_SECURITY: u8 = 3;
pub const FILE_BASIC_INFO: u8 = 4;
pub const FILE_STANDARD_INFO: u8 = 5;
pub const FILE_RENAME_INFO: u8 = 10;
pub const FILE_LINK_INFO: u8 = 11;
pub const FILE_NAMES_INFO: u8 = 12;
pub const FILE_END_OF_FILE_INFO: u8 = 20;
pub const FILE_NETWORK_OPEN_INFO: u8 = 34;
pub const FILE_ID_BOTH_DIR_INFO: u8 = 37;
pub const FS_ATTRIBUTE_INFO: u8 = 5;
pub const FS_FULL_SIZE_INFO: u8 = 7;
/// OWNER | GROUP | DACL security information.
pub const SECURITY_OWNER_GROUP_DACL: u32 = 0x7;

pub const LOCK_EXCLUSIVE: u32 = 0x2;
pub const LOCK_UNLOCK: u32 = 0x4;
pub const LOCK_FAIL_IMMEDIATELY: u32 = 0x10;

/// The FileId of the previous request in a related compound.
pub const RELATED_FID: [u8; 16] = [0xff; 16];

pub type Fid = [u8; 16];

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

pub fn utf16(s: &str) -> Vec<u8> {
    // Sized up front: a path is encoded for every path op, and growing by flat_map reallocates.
    let mut out = Vec::with_capacity(s.len() * 2);
    for unit in s.encode_utf16() {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

pub fn from_utf16(b: &[u8]) -> String {
    let units: Vec<u16> = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    String::from_utf16_lossy(&units)
}

/// Append `parts` joined by backslashes as SMB names a path (UTF-16LE, each part without
/// its outer slashes, inner slashes as backslashes), encoded straight into the request: a
/// path op pays for no joined or translated copy of its path.
pub fn put_smb_path(out: &mut Vec<u8>, parts: &[&str]) {
    let mut first = true;
    for part in parts.iter().map(|p| p.trim_matches('/')).filter(|p| !p.is_empty()) {
        if !first {
            out.extend_from_slice(b"\\\0");
        }
        first = false;
        if part.is_ascii() {
            // One code unit per byte, written into room made once: a fraction of encode_utf16's cost.
            let at = out.len();
            out.resize(at + 2 * part.len(), 0);
            for (unit, b) in out[at..].chunks_exact_mut(2).zip(part.bytes()) {
                unit[0] = if b == b'/' { b'\\' } else { b };
            }
        } else {
            for unit in part.encode_utf16() {
                let unit = if unit == u16::from(b'/') { u16::from(b'\\') } else { unit };
                out.extend_from_slice(&unit.to_le_bytes());
            }
        }
    }
}

/// The fields of a response header peakbench uses.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub status: u32,
    pub credits: u16,
    pub flags: u32,
    pub next: u32,
    pub mid: u64,
    pub tree: u32,
    pub session: u64,
}

pub fn parse_header(b: &[u8]) -> Result<Header, String> {
    if b.len() < HEADER || &b[..4] != b"\xfeSMB" {
        return Err(format!("not an SMB2 message ({} bytes)", b.len()));
    }
    let g = |o| u32_at(b, o).unwrap_or(0);
    Ok(Header {
        status: g(8),
        credits: u16_at(b, 14).unwrap_or(0),
        flags: g(16),
        next: g(20),
        mid: u64_at(b, 24).unwrap_or(0),
        tree: g(36),
        session: u64_at(b, 40).unwrap_or(0),
    })
}

/// One request of a message: the command and its body (after the header).
pub struct Req {
    pub command: u16,
    pub body: Vec<u8>,
    /// Credits it costs (more than 1 for a transfer above 64 KiB).
    pub charge: u16,
}

impl Req {
    fn new(command: u16, body: Vec<u8>) -> Req {
        Req { command, body, charge: 1 }
    }
}

/// Credits a transfer of `len` bytes costs (MS-SMB2 3.2.4.1.5).
pub fn charge_of(len: u32) -> u16 {
    (len.saturating_sub(1) / 65536 + 1) as u16
}

/// Append the header of one request to `out`: its fields, filled in at send time.
#[allow(clippy::too_many_arguments)]
pub fn put_header(out: &mut Vec<u8>, command: u16, charge: u16, credit_request: u16, flags: u32, mid: u64, tree: u32, session: u64) {
    // Filled in place and appended once: a field-by-field append cost about 120 instructions a header.
    let mut h = [0u8; HEADER];
    h[..4].copy_from_slice(b"\xfeSMB");
    h[4..6].copy_from_slice(&64u16.to_le_bytes());
    h[6..8].copy_from_slice(&charge.to_le_bytes());
    // Status (8..12) zero.
    h[12..14].copy_from_slice(&command.to_le_bytes());
    h[14..16].copy_from_slice(&credit_request.to_le_bytes());
    h[16..20].copy_from_slice(&flags.to_le_bytes());
    // NextCommand (20..24), patched for compounds; Reserved (process id, 32..36) zero.
    h[24..32].copy_from_slice(&mid.to_le_bytes());
    h[36..40].copy_from_slice(&tree.to_le_bytes());
    h[40..48].copy_from_slice(&session.to_le_bytes());
    // Signature (48..64) zero until signed.
    out.extend_from_slice(&h);
}

struct W(Vec<u8>);
impl W {
    fn new() -> W {
        W(Vec::with_capacity(128))
    }
    fn u8(mut self, v: u8) -> W {
        self.0.push(v);
        self
    }
    fn u16(mut self, v: u16) -> W {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(mut self, v: u32) -> W {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> W {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(mut self, v: &[u8]) -> W {
        self.0.extend_from_slice(v);
        self
    }
}

/// SMB2_GLOBAL_CAP_ENCRYPTION: the client (3.0, 3.0.2) or server can encrypt.
pub const CAP_ENCRYPTION: u32 = 0x40;
const PREAUTH_INTEGRITY: u16 = 1;
const ENCRYPTION_CAPABILITIES: u16 = 2;

/// NEGOTIATE; offering 3.1.1 adds the preauthentication integrity context (SHA-512, `salt`)
/// and, with `ciphers` (in order of preference), the encryption capabilities context.
pub fn negotiate(dialects: &[u16], client_guid: [u8; 16], security_mode: u16, salt: [u8; 32], ciphers: &[u16]) -> Req {
    let capabilities = if ciphers.is_empty() { 0 } else { CAP_ENCRYPTION };
    let w = W::new().u16(36).u16(dialects.len() as u16).u16(security_mode).u16(0).u32(capabilities).bytes(&client_guid);
    let listed = HEADER + 36 + 2 * dialects.len();
    let contexts_at = listed.next_multiple_of(8);
    let count = if ciphers.is_empty() { 1 } else { 2 };
    let mut w = if dialects.contains(&SMB311) { w.u32(contexts_at as u32).u16(count).u16(0) } else { w.u64(0) };
    for d in dialects {
        w = w.u16(*d);
    }
    if dialects.contains(&SMB311) {
        const SHA512: u16 = 1;
        w = w.bytes(&[0; 8][..contexts_at - listed]).u16(PREAUTH_INTEGRITY).u16(38).u32(0).u16(1).u16(32).u16(SHA512).bytes(&salt);
        if !ciphers.is_empty() {
            // Each context starts 8-byte aligned: 8 + 38 bytes of the first, then 2 of padding.
            w = w.bytes(&[0; 2]).u16(ENCRYPTION_CAPABILITIES).u16(2 + 2 * ciphers.len() as u16).u32(0).u16(ciphers.len() as u16);
            for c in ciphers {
                w = w.u16(*c);
            }
        }
    }
    Req::new(NEGOTIATE, w.0)
}

pub fn session_setup(token: &[u8], security_mode: u16) -> Req {
    let w = W::new().u16(25).u8(0).u8(security_mode as u8).u32(0).u32(0).u16((HEADER + 24) as u16).u16(token.len() as u16).u64(0).bytes(token);
    Req::new(SESSION_SETUP, w.0)
}

pub fn logoff() -> Req {
    Req::new(LOGOFF, W::new().u16(4).u16(0).0)
}

pub fn tree_connect(unc: &str) -> Req {
    let path = utf16(unc);
    let w = W::new().u16(9).u16(0).u16((HEADER + 8) as u16).u16(path.len() as u16).bytes(&path);
    Req::new(TREE_CONNECT, w.0)
}

pub fn create(path: &str, access: u32, attributes: u32, disposition: u32, options: u32) -> Req {
    create_in(&[path], access, attributes, disposition, options)
}

/// CREATE of the path that `parts` make when joined (a directory and a name below it).
pub fn create_in(parts: &[&str], access: u32, attributes: u32, disposition: u32, options: u32) -> Req {
    let mut w = W::new()
        .u16(57)
        .u8(0)
        .u8(0) // no oplock: every client sees the server's state
        .u32(2) // impersonation
        .u64(0)
        .u64(0)
        .u32(access | SYNCHRONIZE)
        .u32(attributes)
        .u32(SHARE_ALL)
        .u32(disposition)
        .u32(options)
        .u16((HEADER + 56) as u16)
        .u16(0) // NameLength, set below
        .u32(0)
        .u32(0);
    put_smb_path(&mut w.0, parts);
    let name_len = w.0.len() - CREATE_FIXED;
    w.0[CREATE_FIXED - 10..CREATE_FIXED - 8].copy_from_slice(&(name_len as u16).to_le_bytes());
    if name_len == 0 {
        w.0.push(0); // the body's variable part holds at least one byte
    }
    Req::new(CREATE, w.0)
}

/// The fixed part of a CREATE request's body; the name follows it.
const CREATE_FIXED: usize = 56;

pub fn close(fid: &Fid) -> Req {
    Req::new(CLOSE, W::new().u16(24).u16(0).u32(0).bytes(fid).0)
}

pub fn flush(fid: &Fid) -> Req {
    Req::new(FLUSH, W::new().u16(24).u16(0).u32(0).bytes(fid).0)
}

pub fn read(fid: &Fid, offset: u64, len: u32) -> Req {
    let w = W::new().u16(49).u8(0x50).u8(0).u32(len).u64(offset).bytes(fid).u32(0).u32(0).u32(0).u16(0).u16(0).u8(0);
    Req { command: READ, body: w.0, charge: charge_of(len) }
}

pub fn write(fid: &Fid, offset: u64, data: &[u8]) -> Req {
    let w = W::new().u16(49).u16((HEADER + 48) as u16).u32(data.len() as u32).u64(offset).bytes(fid).u32(0).u32(0).u16(0).u16(0).u32(0).bytes(data);
    Req { command: WRITE, body: w.0, charge: charge_of(data.len() as u32) }
}

/// One byte-range lock (or unlock) element.
pub fn lock(fid: &Fid, offset: u64, len: u64, flags: u32) -> Req {
    let w = W::new().u16(48).u16(1).u32(0).bytes(fid).u64(offset).u64(len).u32(flags).u32(0);
    Req::new(LOCK, w.0)
}

pub fn echo() -> Req {
    Req::new(ECHO, W::new().u16(4).u16(0).0)
}

pub fn query_directory(fid: &Fid, class: u8, restart: bool, out_len: u32) -> Req {
    let pattern = utf16("*");
    let w = W::new()
        .u16(33)
        .u8(class)
        .u8(if restart { 1 } else { 0 })
        .u32(0)
        .bytes(fid)
        .u16((HEADER + 32) as u16)
        .u16(pattern.len() as u16)
        .u32(out_len)
        .bytes(&pattern);
    Req::new(QUERY_DIRECTORY, w.0)
}

pub fn query_info(fid: &Fid, info_type: u8, class: u8, additional: u32, out_len: u32) -> Req {
    let w = W::new().u16(41).u8(info_type).u8(class).u32(out_len).u16(0).u16(0).u32(0).u32(additional).u32(0).bytes(fid).u8(0);
    Req::new(QUERY_INFO, w.0)
}

pub fn set_info(fid: &Fid, class: u8, data: &[u8]) -> Req {
    let w = W::new().u16(33).u8(INFO_FILE).u8(class).u32(data.len() as u32).u16((HEADER + 32) as u16).u16(0).u32(0).bytes(fid).bytes(data);
    Req::new(SET_INFO, w.0)
}

/// FileBasicInformation that sets the last-write time only (zero leaves a field as it is).
pub fn basic_info_write_time(filetime: u64) -> Vec<u8> {
    W::new().u64(0).u64(0).u64(filetime).u64(0).u32(0).u32(0).0
}

/// FileRenameInformation / FileLinkInformation (SMB2 form): the new name from the share's root.
pub fn rename_info(to: &str, replace: bool) -> Vec<u8> {
    let mut name = Vec::with_capacity(2 * to.len());
    put_smb_path(&mut name, &[to]);
    W::new().u8(replace as u8).bytes(&[0; 7]).u64(0).u32(name.len() as u32).bytes(&name).0
}

pub fn end_of_file_info(size: u64) -> Vec<u8> {
    W::new().u64(size).0
}

/// Now as a Windows FILETIME (100 ns since 1601).
pub fn filetime_now() -> u64 {
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() / 100).unwrap_or(0) as u64;
    unix + 116_444_736_000_000_000
}

/// A response body (after its header), checked to hold the fixed part of `structure` bytes.
fn body(msg: &[u8], structure: u16) -> Result<&[u8], String> {
    let b = msg.get(HEADER..).ok_or("short response")?;
    match u16_at(b, 0) {
        Some(s) if s == structure && b.len() + 1 >= structure as usize => Ok(b),
        Some(s) => Err(format!("response structure size {s}, expected {structure}")),
        None => Err("empty response body".into()),
    }
}

/// A buffer named by an offset (from the header's start) and length.
fn buffer(msg: &[u8], offset: usize, len: usize) -> Result<&[u8], String> {
    if len == 0 {
        return Ok(&[]);
    }
    msg.get(offset..offset.checked_add(len).ok_or("buffer overflows")?).ok_or_else(|| format!("buffer {offset}+{len} beyond the {}-byte message", msg.len()))
}

#[derive(Debug, Clone)]
pub struct Negotiated {
    pub dialect: u16,
    pub security_mode: u16,
    pub max_read: u32,
    pub max_write: u32,
    /// The cipher the server will encrypt with, if any: AES-128-CCM for 3.0 and 3.0.2
    /// when it has the encryption capability, the one its context names for 3.1.1.
    pub cipher: Option<u16>,
}

pub fn parse_negotiate(msg: &[u8]) -> Result<Negotiated, String> {
    let b = body(msg, 65)?;
    let g = |o| u32_at(b, o).ok_or("short NEGOTIATE response");
    let h = |o| u16_at(b, o).ok_or("short NEGOTIATE response");
    let dialect = h(4)?;
    let cipher = match dialect {
        SMB311 => negotiate_cipher(msg, g(60)? as usize, h(6)?)?,
        0x0300 | 0x0302 if g(24)? & CAP_ENCRYPTION != 0 => Some(super::seal::AES_128_CCM),
        _ => None,
    };
    Ok(Negotiated { dialect, security_mode: h(2)?, max_read: g(32)?, max_write: g(36)?, cipher })
}

/// The cipher named by a 3.1.1 NEGOTIATE response's encryption capabilities context (0: none in common).
fn negotiate_cipher(msg: &[u8], mut at: usize, count: u16) -> Result<Option<u16>, String> {
    let short = || "NEGOTIATE context beyond the response".to_string();
    for _ in 0..count {
        let (kind, len) = (u16_at(msg, at).ok_or_else(short)?, u16_at(msg, at + 2).ok_or_else(short)? as usize);
        let data = msg.get(at + 8..at + 8 + len).ok_or_else(short)?;
        if kind == ENCRYPTION_CAPABILITIES {
            return Ok(u16_at(data, 2).filter(|c| *c != 0 && u16_at(data, 0) == Some(1)));
        }
        at = (at + 8 + len).next_multiple_of(8);
    }
    Ok(None)
}

/// SESSION_SETUP's SessionFlags: the server encrypts this session's messages.
pub const SESSION_FLAG_ENCRYPT_DATA: u16 = 0x4;
/// TREE_CONNECT's ShareFlags: the share's messages are encrypted.
pub const SHAREFLAG_ENCRYPT_DATA: u32 = 0x8000;

/// The SessionFlags of a SESSION_SETUP response.
pub fn session_flags(msg: &[u8]) -> Result<u16, String> {
    u16_at(body(msg, 9)?, 2).ok_or_else(|| "short SESSION_SETUP response".into())
}

/// The ShareFlags of a TREE_CONNECT response.
pub fn share_flags(msg: &[u8]) -> Result<u32, String> {
    u32_at(body(msg, 16)?, 4).ok_or_else(|| "short TREE_CONNECT response".into())
}

/// The security token of a SESSION_SETUP response.
pub fn parse_session_setup(msg: &[u8]) -> Result<Vec<u8>, String> {
    let b = body(msg, 9)?;
    let (off, len) = (u16_at(b, 4).ok_or("short")? as usize, u16_at(b, 6).ok_or("short")? as usize);
    Ok(buffer(msg, off, len)?.to_vec())
}

#[derive(Debug, Clone, Copy)]
pub struct Created {
    pub fid: Fid,
    pub size: u64,
}

pub fn parse_create(msg: &[u8]) -> Result<Created, String> {
    let b = body(msg, 89)?;
    let fid: Fid = b.get(64..80).ok_or("short CREATE response")?.try_into().map_err(|_| "short CREATE response")?;
    Ok(Created { fid, size: u64_at(b, 48).ok_or("short CREATE response")? })
}

/// The data of a READ response.
pub fn parse_read(msg: &[u8]) -> Result<&[u8], String> {
    let b = body(msg, 17)?;
    buffer(msg, *b.get(2).ok_or("short READ response")? as usize, u32_at(b, 4).ok_or("short READ response")? as usize)
}

/// The bytes a WRITE response says were written.
pub fn parse_write(msg: &[u8]) -> Result<u32, String> {
    u32_at(body(msg, 17)?, 4).ok_or_else(|| "short WRITE response".into())
}

/// The output buffer of a QUERY_INFO or QUERY_DIRECTORY response.
pub fn parse_output(msg: &[u8]) -> Result<&[u8], String> {
    let b = body(msg, 9)?;
    buffer(msg, u16_at(b, 2).ok_or("short response")? as usize, u32_at(b, 4).ok_or("short response")? as usize)
}

/// FileStandardInformation: (size, links, directory).
pub fn parse_standard(b: &[u8]) -> Result<(u64, u32, bool), String> {
    let short = || "short FileStandardInformation".to_string();
    Ok((u64_at(b, 8).ok_or_else(short)?, u32_at(b, 16).ok_or_else(short)?, *b.get(21).ok_or_else(short)? != 0))
}

/// FileFsFullSizeInformation: (total, caller-available, actually available) bytes.
pub fn parse_fs_full_size(b: &[u8]) -> Result<(u64, u64, u64), String> {
    let short = || "short FileFsFullSizeInformation".to_string();
    let unit = u32_at(b, 24).ok_or_else(short)? as u64 * u32_at(b, 28).ok_or_else(short)? as u64;
    let f = |o| u64_at(b, o).ok_or_else(short).map(|v| v.saturating_mul(unit));
    Ok((f(0)?, f(8)?, f(16)?))
}

/// FileFsAttributeInformation: (attributes, longest name, file-system name).
pub fn parse_fs_attribute(b: &[u8]) -> Result<(u32, u32, String), String> {
    let short = || "short FileFsAttributeInformation".to_string();
    let len = u32_at(b, 8).ok_or_else(short)? as usize;
    Ok((u32_at(b, 0).ok_or_else(short)?, u32_at(b, 4).ok_or_else(short)?, from_utf16(b.get(12..12 + len).ok_or_else(short)?)))
}

/// The names in a page of FileNamesInformation or FileIdBothDirectoryInformation.
pub fn parse_names(b: &[u8], class: u8) -> Result<Vec<String>, String> {
    let (len_at, name_at) = if class == FILE_NAMES_INFO { (8, 12) } else { (60, 104) };
    let mut names = Vec::new();
    let mut at = 0usize;
    loop {
        let e = b.get(at..).ok_or("directory entry beyond the buffer")?;
        let next = u32_at(e, 0).ok_or("short directory entry")? as usize;
        let len = u32_at(e, len_at).ok_or("short directory entry")? as usize;
        names.push(from_utf16(e.get(name_at..name_at + len).ok_or("directory entry name beyond the buffer")?));
        if next == 0 {
            return Ok(names);
        }
        if next < name_at || names.len() > 1_000_000 {
            return Err(format!("directory entry offset {next} runs backwards"));
        }
        at += next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoders_refuse_garbage_without_panicking() {
        // Every prefix of a well-formed message and bytes from a fixed-seed generator.
        let mut msg = Vec::new();
        put_header(&mut msg, READ, 1, 1, 0x1, 7, 1, 2); // a response
        msg.extend_from_slice(&W::new().u16(17).u8(80).u8(0).u32(4).u32(0).u32(0).bytes(b"data").0);
        assert_eq!(parse_read(&msg).unwrap(), b"data");
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut junk = msg.clone();
        for n in 0..msg.len() + 200 {
            let cut = &msg[..n.min(msg.len())];
            let _ = (parse_header(cut), parse_read(cut), parse_create(cut), parse_output(cut), parse_negotiate(cut), parse_write(cut));
            for b in junk.iter_mut().skip(HEADER) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                *b = seed as u8;
            }
            junk[HEADER..HEADER + 2].copy_from_slice(&[9, 0]);
            let _ = parse_output(&junk).map(|o| (parse_names(o, FILE_NAMES_INFO), parse_names(o, FILE_ID_BOTH_DIR_INFO)));
            let _ = parse_session_setup(&junk);
            let _ = (parse_fs_attribute(&junk), parse_fs_full_size(&junk), parse_standard(&junk));
        }
    }

    #[test]
    fn names_from_a_directory_page() {
        let entry = |name: &str, last: bool| {
            let n = utf16(name);
            let size = (12 + n.len() + 7) & !7;
            let mut e = W::new().u32(if last { 0 } else { size as u32 }).u32(0).u32(n.len() as u32).bytes(&n).0;
            e.resize(size, 0);
            e
        };
        let page = [entry("a", false), entry("bcd", true)].concat();
        assert_eq!(parse_names(&page, FILE_NAMES_INFO).unwrap(), vec!["a", "bcd"]);
        assert!(parse_names(&page[..10], FILE_NAMES_INFO).is_err());
    }

    #[test]
    fn create_names_the_joined_path_in_utf16_with_backslashes() {
        // What the server reads: NameOffset/NameLength in the body, the name's UTF-16LE code units.
        let name = |req: &Req| {
            let (at, len) = (u16_at(&req.body, 44).unwrap() as usize - HEADER, u16_at(&req.body, 46).unwrap() as usize);
            from_utf16(&req.body[at..at + len])
        };
        assert_eq!(name(&create_in(&["/fs-1/", "d0/f3"], FILE_READ_ATTRIBUTES, 0, OPEN, 0)), "fs-1\\d0\\f3");
        assert_eq!(name(&create_in(&["", "/a/b/"], FILE_READ_ATTRIBUTES, 0, OPEN, 0)), "a\\b");
        assert_eq!(name(&create_in(&["r", "", "x"], FILE_READ_ATTRIBUTES, 0, OPEN, 0)), "r\\x");
        // Outside ASCII: a surrogate pair and a two-byte character.
        assert_eq!(name(&create("dir/naïve-😀", FILE_READ_ATTRIBUTES, 0, OPEN, 0)), "dir\\naïve-😀");
        // The share's root: no name, but one byte of buffer, as MS-SMB2 asks.
        let root = create_in(&[""], FILE_READ_ATTRIBUTES, 0, OPEN, 0);
        assert_eq!((u16_at(&root.body, 46), root.body.len()), (Some(0), 57));
    }
}
