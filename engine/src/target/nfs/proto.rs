//! NFSv3 (RFC 1813), MOUNT v3 and portmapper v2: argument encoding and reply decoding.

use super::rpc::{Reply, RpcClient, RpcError};
use super::xdr::{Dec, Enc, XResult, XdrError};
use std::sync::Arc;

pub const PMAP_PROG: u32 = 100000;
pub const MOUNT_PROG: u32 = 100005;
pub const NFS_PROG: u32 = 100003;
/// NFSv3 procedure numbers sent asynchronously by a logical I/O's transfers in flight.
pub const READ: u32 = 6;
pub const WRITE: u32 = 7;
pub const FHSIZE3: usize = 64;
const MAX_NAME: usize = 4096;
const MAX_PATH: usize = 65536;

pub type Fh = Arc<[u8]>;

/// What an NFS call can end in besides success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    Rpc(RpcError),
    /// A non-zero nfsstat3 (or mountstat3).
    Status(u32),
    /// The reply's results did not decode.
    Xdr(XdrError),
}

impl From<RpcError> for Error {
    fn from(e: RpcError) -> Self {
        Error::Rpc(e)
    }
}
impl From<XdrError> for Error {
    fn from(e: XdrError) -> Self {
        Error::Xdr(e)
    }
}

impl Error {
    /// The error kind counted for an op: NFS3ERR_NOENT, ETIMEDOUT, RPC_...
    pub fn kind(&self) -> String {
        match self {
            Error::Rpc(e) => e.kind(),
            Error::Status(s) => status_name(*s),
            Error::Xdr(_) => "RPC_MALFORMED_REPLY".into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Rpc(e) => write!(f, "{e}"),
            Error::Status(s) => write!(f, "{}", status_name(*s)),
            Error::Xdr(e) => write!(f, "{e}"),
        }
    }
}

pub type Res<T> = Result<T, Error>;

pub fn status_name(s: u32) -> String {
    let n = match s {
        0 => "NFS3_OK",
        1 => "NFS3ERR_PERM",
        2 => "NFS3ERR_NOENT",
        5 => "NFS3ERR_IO",
        6 => "NFS3ERR_NXIO",
        13 => "NFS3ERR_ACCES",
        17 => "NFS3ERR_EXIST",
        18 => "NFS3ERR_XDEV",
        19 => "NFS3ERR_NODEV",
        20 => "NFS3ERR_NOTDIR",
        21 => "NFS3ERR_ISDIR",
        22 => "NFS3ERR_INVAL",
        27 => "NFS3ERR_FBIG",
        28 => "NFS3ERR_NOSPC",
        30 => "NFS3ERR_ROFS",
        31 => "NFS3ERR_MLINK",
        63 => "NFS3ERR_NAMETOOLONG",
        66 => "NFS3ERR_NOTEMPTY",
        69 => "NFS3ERR_DQUOT",
        70 => "NFS3ERR_STALE",
        71 => "NFS3ERR_REMOTE",
        10001 => "NFS3ERR_BADHANDLE",
        10002 => "NFS3ERR_NOT_SYNC",
        10003 => "NFS3ERR_BAD_COOKIE",
        10004 => "NFS3ERR_NOTSUPP",
        10005 => "NFS3ERR_TOOSMALL",
        10006 => "NFS3ERR_SERVERFAULT",
        10007 => "NFS3ERR_BADTYPE",
        10008 => "NFS3ERR_JUKEBOX",
        _ => return format!("NFS3ERR_{s}"),
    };
    n.into()
}

pub const NOENT: u32 = 2;
pub const EXIST: u32 = 17;
pub const STALE: u32 = 70;

pub const NF3REG: u32 = 1;
pub const NF3DIR: u32 = 2;
pub const NF3LNK: u32 = 5;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fattr {
    pub ftype: u32,
    pub mode: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    pub used: u64,
    pub fsid: u64,
    pub fileid: u64,
    pub mtime: (u32, u32),
}

pub fn fattr(d: &mut Dec) -> XResult<Fattr> {
    let ftype = d.u32()?;
    if !(1..=7).contains(&ftype) {
        return Err(XdrError("file type out of range"));
    }
    let (mode, nlink, uid, gid) = (d.u32()?, d.u32()?, d.u32()?, d.u32()?);
    let (size, used) = (d.u64()?, d.u64()?);
    d.skip(8)?; // rdev
    let (fsid, fileid) = (d.u64()?, d.u64()?);
    d.skip(8)?; // atime
    let mtime = (d.u32()?, d.u32()?);
    d.skip(8)?; // ctime
    Ok(Fattr { ftype, mode, nlink, uid, gid, size, used, fsid, fileid, mtime })
}

pub fn post_op_attr(d: &mut Dec) -> XResult<Option<Fattr>> {
    if d.bool()? {
        fattr(d).map(Some)
    } else {
        Ok(None)
    }
}

pub fn wcc_data(d: &mut Dec) -> XResult<Option<Fattr>> {
    if d.bool()? {
        d.skip(24)?; // size, mtime, ctime
    }
    post_op_attr(d)
}

pub fn fh(d: &mut Dec) -> XResult<Fh> {
    Ok(Arc::from(d.opaque(FHSIZE3)?))
}

pub fn post_op_fh(d: &mut Dec) -> XResult<Option<Fh>> {
    if d.bool()? {
        fh(d).map(Some)
    } else {
        Ok(None)
    }
}

fn status(d: &mut Dec) -> Res<()> {
    match d.u32()? {
        0 => Ok(()),
        s => Err(Error::Status(s)),
    }
}

/// Attributes to set; None leaves one unchanged.
#[derive(Debug, Clone, Default)]
pub struct Sattr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub mtime_now: bool,
}

fn sattr(e: &mut Enc, s: &Sattr) {
    match s.mode {
        Some(m) => e.bool(true).u32(m),
        None => e.bool(false),
    };
    match s.uid {
        Some(m) => e.bool(true).u32(m),
        None => e.bool(false),
    };
    match s.gid {
        Some(m) => e.bool(true).u32(m),
        None => e.bool(false),
    };
    match s.size {
        Some(m) => e.bool(true).u64(m),
        None => e.bool(false),
    };
    e.u32(0); // atime: DONT_CHANGE
    e.u32(if s.mtime_now { 1 } else { 0 }); // mtime: SET_TO_SERVER_TIME or DONT_CHANGE
}

fn diropargs(e: &mut Enc, dir: &[u8], name: &str) {
    e.opaque(dir).str(name);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stable {
    Unstable = 0,
    FileSync = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateHow {
    Unchecked,
    Guarded,
}

#[derive(Debug, Clone, Default)]
pub struct FsInfo {
    pub rtmax: u32,
    pub rtpref: u32,
    pub wtmax: u32,
    pub wtpref: u32,
    pub dtpref: u32,
    pub maxfilesize: u64,
    pub properties: u32,
}

#[derive(Debug, Clone, Default)]
pub struct FsStat {
    pub tbytes: u64,
    pub fbytes: u64,
    pub abytes: u64,
    pub tfiles: u64,
    pub ffiles: u64,
    pub afiles: u64,
}

#[derive(Debug, Clone, Default)]
pub struct PathConf {
    pub linkmax: u32,
    pub name_max: u32,
    pub no_trunc: bool,
    pub case_preserving: bool,
}

pub struct ReadRes {
    pub count: u32,
    pub eof: bool,
    reply: Reply,
    data_at: usize,
}

impl ReadRes {
    pub fn data(&self) -> &[u8] {
        &self.reply.buf[self.data_at..self.data_at + self.count as usize]
    }
}

pub struct WriteRes {
    pub count: u32,
    pub committed: u32,
    pub verf: [u8; 8],
}

#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: String,
    pub cookie: u64,
    pub attr: Option<Fattr>,
    pub fh: Option<Fh>,
}

pub struct DirPage {
    pub verf: [u8; 8],
    pub entries: Vec<DirEntry>,
    pub eof: bool,
    pub bytes: usize,
}

fn verf8(d: &mut Dec) -> XResult<[u8; 8]> {
    let mut v = [0u8; 8];
    v.copy_from_slice(d.fixed(8)?);
    Ok(v)
}

// ---- reply decoders, public so the fuzz test can reach every one

pub fn dec_getattr(d: &mut Dec) -> Res<Fattr> {
    status(d)?;
    Ok(fattr(d)?)
}

pub fn dec_wcc(d: &mut Dec) -> Res<Option<Fattr>> {
    let st = d.u32()?;
    let attr = wcc_data(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(attr)
}

pub fn dec_lookup(d: &mut Dec) -> Res<(Fh, Option<Fattr>)> {
    let st = d.u32()?;
    if st != 0 {
        post_op_attr(d)?;
        return Err(Error::Status(st));
    }
    let f = fh(d)?;
    let a = post_op_attr(d)?;
    post_op_attr(d)?;
    Ok((f, a))
}

pub fn dec_access(d: &mut Dec) -> Res<u32> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(d.u32()?)
}

pub fn dec_readlink(d: &mut Dec) -> Res<String> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(d.string(MAX_PATH)?)
}

/// READ results: (count, eof, offset of the data in the buffer).
pub fn dec_read(d: &mut Dec) -> Res<(u32, bool, usize)> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let count = d.u32()?;
    let eof = d.bool()?;
    let data = d.opaque(super::rpc::MAX_RECORD)?;
    if data.len() != count as usize {
        return Err(Error::Xdr(XdrError("READ count differs from the data's length")));
    }
    Ok((count, eof, d.at - data.len() - (4 - data.len() % 4) % 4))
}

pub fn dec_write(d: &mut Dec) -> Res<WriteRes> {
    let st = d.u32()?;
    wcc_data(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let count = d.u32()?;
    let committed = d.u32()?;
    if committed > 2 {
        return Err(Error::Xdr(XdrError("stable_how out of range")));
    }
    Ok(WriteRes { count, committed, verf: verf8(d)? })
}

/// CREATE, MKDIR, SYMLINK (and MKNOD) results.
pub fn dec_diropres(d: &mut Dec) -> Res<Option<Fh>> {
    let st = d.u32()?;
    if st != 0 {
        wcc_data(d)?;
        return Err(Error::Status(st));
    }
    let f = post_op_fh(d)?;
    post_op_attr(d)?;
    wcc_data(d)?;
    Ok(f)
}

pub fn dec_rename(d: &mut Dec) -> Res<()> {
    let st = d.u32()?;
    wcc_data(d)?;
    wcc_data(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(())
}

pub fn dec_link(d: &mut Dec) -> Res<()> {
    let st = d.u32()?;
    post_op_attr(d)?;
    wcc_data(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(())
}

pub fn dec_readdir(d: &mut Dec, plus: bool) -> Res<DirPage> {
    let start = d.at;
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let verf = verf8(d)?;
    let mut entries = Vec::new();
    while d.bool()? {
        d.skip(8)?; // fileid
        let name = d.string(MAX_NAME)?;
        let cookie = d.u64()?;
        let (attr, fh) = if plus { (post_op_attr(d)?, post_op_fh(d)?) } else { (None, None) };
        entries.push(DirEntry { name, cookie, attr, fh });
    }
    let eof = d.bool()?;
    Ok(DirPage { verf, entries, eof, bytes: d.at - start })
}

pub fn dec_fsstat(d: &mut Dec) -> Res<FsStat> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let s = FsStat { tbytes: d.u64()?, fbytes: d.u64()?, abytes: d.u64()?, tfiles: d.u64()?, ffiles: d.u64()?, afiles: d.u64()? };
    d.u32()?; // invarsec
    Ok(s)
}

pub fn dec_fsinfo(d: &mut Dec) -> Res<FsInfo> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let (rtmax, rtpref, _rtmult, wtmax, wtpref, _wtmult, dtpref) = (d.u32()?, d.u32()?, d.u32()?, d.u32()?, d.u32()?, d.u32()?, d.u32()?);
    let maxfilesize = d.u64()?;
    d.skip(8)?; // time_delta
    let properties = d.u32()?;
    Ok(FsInfo { rtmax, rtpref, wtmax, wtpref, dtpref, maxfilesize, properties })
}

pub fn dec_pathconf(d: &mut Dec) -> Res<PathConf> {
    let st = d.u32()?;
    post_op_attr(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let (linkmax, name_max) = (d.u32()?, d.u32()?);
    let no_trunc = d.bool()?;
    let _chown_restricted = d.bool()?;
    let _case_insensitive = d.bool()?;
    let case_preserving = d.bool()?;
    Ok(PathConf { linkmax, name_max, no_trunc, case_preserving })
}

pub fn dec_commit(d: &mut Dec) -> Res<[u8; 8]> {
    let st = d.u32()?;
    wcc_data(d)?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    Ok(verf8(d)?)
}

/// Every reply decoder, each saying whether it decoded: for the fuzz tests here and in rpc.rs.
#[cfg(test)]
pub const DECODERS: &[fn(&mut Dec) -> bool] = &[
    |d| dec_getattr(d).is_ok(),
    |d| dec_wcc(d).is_ok(),
    |d| dec_lookup(d).is_ok(),
    |d| dec_access(d).is_ok(),
    |d| dec_readlink(d).is_ok(),
    |d| dec_read(d).is_ok(),
    |d| dec_write(d).is_ok(),
    |d| dec_diropres(d).is_ok(),
    |d| dec_rename(d).is_ok(),
    |d| dec_link(d).is_ok(),
    |d| dec_readdir(d, false).is_ok(),
    |d| dec_readdir(d, true).is_ok(),
    |d| dec_fsstat(d).is_ok(),
    |d| dec_fsinfo(d).is_ok(),
    |d| dec_pathconf(d).is_ok(),
    |d| dec_commit(d).is_ok(),
    |d| dec_mnt(d).is_ok(),
    |d| dec_exports(d).is_ok(),
];

/// The NFSv3 program: one method per procedure.
pub struct Nfs3 {
    pub rpc: RpcClient,
}

impl Nfs3 {
    pub fn null(&self) -> Res<()> {
        self.rpc.call(0, |_| {})?;
        Ok(())
    }
    pub fn getattr(&self, f: &[u8]) -> Res<Fattr> {
        let r = self.rpc.call(1, |e| {
            e.opaque(f);
        })?;
        dec_getattr(&mut r.dec())
    }
    pub fn setattr(&self, f: &[u8], s: &Sattr) -> Res<Option<Fattr>> {
        let r = self.rpc.call(2, |e| {
            e.opaque(f);
            sattr(e, s);
            e.bool(false); // no guard
        })?;
        dec_wcc(&mut r.dec())
    }
    pub fn lookup(&self, dir: &[u8], name: &str) -> Res<(Fh, Option<Fattr>)> {
        let r = self.rpc.call(3, |e| diropargs(e, dir, name))?;
        dec_lookup(&mut r.dec())
    }
    pub fn access(&self, f: &[u8], mask: u32) -> Res<u32> {
        let r = self.rpc.call(4, |e| {
            e.opaque(f).u32(mask);
        })?;
        dec_access(&mut r.dec())
    }
    pub fn readlink(&self, f: &[u8]) -> Res<String> {
        let r = self.rpc.call(5, |e| {
            e.opaque(f);
        })?;
        dec_readlink(&mut r.dec())
    }
    pub fn read(&self, f: &[u8], offset: u64, count: u32) -> Res<ReadRes> {
        let reply = self.rpc.call(6, |e| {
            e.opaque(f).u64(offset).u32(count);
        })?;
        let (count, eof, data_at) = dec_read(&mut reply.dec())?;
        Ok(ReadRes { count, eof, reply, data_at })
    }
    pub fn write(&self, f: &[u8], offset: u64, data: &[u8], stable: Stable) -> Res<WriteRes> {
        let r = self.rpc.call(7, |e| {
            e.opaque(f).u64(offset).u32(data.len() as u32).u32(stable as u32).opaque(data);
        })?;
        dec_write(&mut r.dec())
    }
    pub fn create(&self, dir: &[u8], name: &str, how: CreateHow, mode: u32) -> Res<Option<Fh>> {
        let r = self.rpc.call(8, |e| {
            diropargs(e, dir, name);
            e.u32(if how == CreateHow::Guarded { 1 } else { 0 });
            sattr(e, &Sattr { mode: Some(mode), ..Default::default() });
        })?;
        dec_diropres(&mut r.dec())
    }
    pub fn mkdir(&self, dir: &[u8], name: &str, mode: u32) -> Res<Option<Fh>> {
        let r = self.rpc.call(9, |e| {
            diropargs(e, dir, name);
            sattr(e, &Sattr { mode: Some(mode), ..Default::default() });
        })?;
        dec_diropres(&mut r.dec())
    }
    pub fn symlink(&self, dir: &[u8], name: &str, target: &str) -> Res<Option<Fh>> {
        let r = self.rpc.call(10, |e| {
            diropargs(e, dir, name);
            sattr(e, &Sattr { mode: Some(0o777), ..Default::default() });
            e.str(target);
        })?;
        dec_diropres(&mut r.dec())
    }
    pub fn remove(&self, dir: &[u8], name: &str) -> Res<()> {
        let r = self.rpc.call(12, |e| diropargs(e, dir, name))?;
        dec_wcc(&mut r.dec()).map(|_| ())
    }
    pub fn rmdir(&self, dir: &[u8], name: &str) -> Res<()> {
        let r = self.rpc.call(13, |e| diropargs(e, dir, name))?;
        dec_wcc(&mut r.dec()).map(|_| ())
    }
    pub fn rename(&self, fdir: &[u8], fname: &str, tdir: &[u8], tname: &str) -> Res<()> {
        let r = self.rpc.call(14, |e| {
            diropargs(e, fdir, fname);
            diropargs(e, tdir, tname);
        })?;
        dec_rename(&mut r.dec())
    }
    pub fn link(&self, f: &[u8], dir: &[u8], name: &str) -> Res<()> {
        let r = self.rpc.call(15, |e| {
            e.opaque(f);
            diropargs(e, dir, name);
        })?;
        dec_link(&mut r.dec())
    }
    pub fn readdir(&self, dir: &[u8], cookie: u64, verf: [u8; 8], count: u32) -> Res<DirPage> {
        let r = self.rpc.call(16, |e| {
            e.opaque(dir).u64(cookie).fixed(&verf).u32(count);
        })?;
        dec_readdir(&mut r.dec(), false)
    }
    pub fn readdirplus(&self, dir: &[u8], cookie: u64, verf: [u8; 8], dircount: u32, maxcount: u32) -> Res<DirPage> {
        let r = self.rpc.call(17, |e| {
            e.opaque(dir).u64(cookie).fixed(&verf).u32(dircount).u32(maxcount);
        })?;
        dec_readdir(&mut r.dec(), true)
    }
    pub fn fsstat(&self, f: &[u8]) -> Res<FsStat> {
        let r = self.rpc.call(18, |e| {
            e.opaque(f);
        })?;
        dec_fsstat(&mut r.dec())
    }
    pub fn fsinfo(&self, f: &[u8]) -> Res<FsInfo> {
        let r = self.rpc.call(19, |e| {
            e.opaque(f);
        })?;
        dec_fsinfo(&mut r.dec())
    }
    pub fn pathconf(&self, f: &[u8]) -> Res<PathConf> {
        let r = self.rpc.call(20, |e| {
            e.opaque(f);
        })?;
        dec_pathconf(&mut r.dec())
    }
    pub fn commit(&self, f: &[u8], offset: u64, count: u32) -> Res<[u8; 8]> {
        let r = self.rpc.call(21, |e| {
            e.opaque(f).u64(offset).u32(count);
        })?;
        dec_commit(&mut r.dec())
    }
}

// ---- portmapper and MOUNT

/// PMAPPROC_GETPORT over TCP; 0 means the program is not registered.
pub fn getport(pmap: &RpcClient, prog: u32, vers: u32) -> Res<u16> {
    let r = pmap.call(3, |e| {
        e.u32(prog).u32(vers).u32(6).u32(0);
    })?;
    let port = r.dec().u32()?;
    u16::try_from(port).map_err(|_| Error::Xdr(XdrError("port out of range")))
}

pub fn mount_status_name(s: u32) -> &'static str {
    match s {
        1 => "MNT3ERR_PERM (not owner)",
        2 => "MNT3ERR_NOENT (no such export)",
        5 => "MNT3ERR_IO",
        13 => "MNT3ERR_ACCES (permission denied)",
        20 => "MNT3ERR_NOTDIR",
        22 => "MNT3ERR_INVAL",
        63 => "MNT3ERR_NAMETOOLONG",
        10004 => "MNT3ERR_NOTSUPP",
        10006 => "MNT3ERR_SERVERFAULT",
        _ => "MNT3ERR",
    }
}

pub fn dec_mnt(d: &mut Dec) -> Res<Fh> {
    let st = d.u32()?;
    if st != 0 {
        return Err(Error::Status(st));
    }
    let f = fh(d)?;
    let n = d.u32()?;
    if n > 64 {
        return Err(Error::Xdr(XdrError("too many auth flavors")));
    }
    d.skip(4 * n as usize)?;
    Ok(f)
}

pub fn mnt(mount: &RpcClient, path: &str) -> Res<Fh> {
    let r = mount.call(1, |e| {
        e.str(path);
    })?;
    dec_mnt(&mut r.dec())
}

pub fn umnt(mount: &RpcClient, path: &str) -> Res<()> {
    mount.call(3, |e| {
        e.str(path);
    })?;
    Ok(())
}

pub fn dec_exports(d: &mut Dec) -> Res<Vec<String>> {
    let mut out = Vec::new();
    while d.bool()? {
        out.push(d.string(1024)?);
        while d.bool()? {
            d.string(255)?;
        }
        if out.len() > 100_000 {
            return Err(Error::Xdr(XdrError("export list too long")));
        }
    }
    Ok(out)
}

pub fn exports(mount: &RpcClient) -> Res<Vec<String>> {
    let r = mount.call(5, |_| {})?;
    dec_exports(&mut r.dec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fattr_bytes(e: &mut Enc, ftype: u32, size: u64) {
        e.u32(ftype).u32(0o644).u32(1).u32(0).u32(0).u64(size).u64(size).u64(0).u64(1).u64(7);
        e.u64(0).u64(0).u64(0);
    }

    #[test]
    fn decodes_getattr_and_lookup() {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u32(0);
        fattr_bytes(&mut e, NF3REG, 123);
        let a = dec_getattr(&mut Dec::new(&v)).unwrap();
        assert_eq!((a.ftype, a.size, a.fileid), (NF3REG, 123, 7));
        let mut v = Vec::new();
        Enc(&mut v).u32(NOENT).u32(0);
        assert_eq!(dec_lookup(&mut Dec::new(&v)).unwrap_err(), Error::Status(NOENT));
        assert_eq!(Error::Status(NOENT).kind(), "NFS3ERR_NOENT");
    }

    #[test]
    fn decodes_read_data() {
        let mut v = Vec::new();
        Enc(&mut v).u32(0).u32(0).u32(5).bool(true).opaque(b"hello");
        let (count, eof, at) = dec_read(&mut Dec::new(&v)).unwrap();
        assert_eq!((count, eof, &v[at..at + 5]), (5, true, &b"hello"[..]));
        let mut v = Vec::new();
        Enc(&mut v).u32(0).u32(0).u32(6).bool(true).opaque(b"hello");
        assert!(dec_read(&mut Dec::new(&v)).is_err());
    }

    #[test]
    fn decodes_readdirplus() {
        let mut v = Vec::new();
        let mut e = Enc(&mut v);
        e.u32(0).u32(0).fixed(&[1; 8]);
        e.bool(true).u64(5).str("f1").u64(10).bool(false).bool(true).opaque(&[9; 16]);
        e.bool(false).bool(true);
        let page = dec_readdir(&mut Dec::new(&v), true).unwrap();
        assert!(page.eof);
        assert_eq!(page.entries.len(), 1);
        assert_eq!(page.entries[0].name, "f1");
        assert_eq!(page.entries[0].fh.as_deref(), Some(&[9u8; 16][..]));
    }

    /// Every decoder on random and mutated input: errors, never a panic or a hang.
    #[test]
    fn fuzz_reply_decoders() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(5);
        let mut valid = Vec::new();
        {
            let mut e = Enc(&mut valid);
            e.u32(0).u32(0).fixed(&[1; 8]);
            for i in 0..5u64 {
                e.bool(true).u64(i).str("name").u64(i + 1).bool(true);
                fattr_bytes(&mut e, NF3REG, i);
                e.bool(true).opaque(&[7; 32]);
            }
            e.bool(false).bool(true);
        }
        for round in 0..20_000 {
            let buf: Vec<u8> = if round % 2 == 0 {
                let n = rng.random_range(0..300);
                // Small words make booleans and short lengths likely, so decoders go deep.
                (0..n)
                    .map(|i| {
                        if i % 4 == 3 {
                            rng.random_range(0..3)
                        } else if rng.random_bool(0.8) {
                            0
                        } else {
                            rng.random()
                        }
                    })
                    .collect()
            } else {
                let mut b = valid.clone();
                for _ in 0..rng.random_range(1..6) {
                    let i = rng.random_range(0..b.len());
                    b[i] = rng.random();
                }
                b.truncate(rng.random_range(0..=b.len()));
                b
            };
            for dec in DECODERS {
                let _ = dec(&mut Dec::new(&buf));
            }
            let _ = crate::target::nfs::rpc::parse_reply(buf.clone());
            let mut recs = crate::target::nfs::rpc::Records::new(1 << 16);
            let space = recs.space();
            let n = buf.len().min(space.len());
            space[..n].copy_from_slice(&buf[..n]);
            recs.filled(n);
            for _ in 0..100 {
                if !matches!(recs.next(), crate::target::nfs::rpc::Next::Record(_)) {
                    break;
                }
            }
        }
        assert!(dec_readdir(&mut Dec::new(&valid), true).is_ok());
    }
}
