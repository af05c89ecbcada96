//! `validate`: does the target perform every operation of the vocabulary correctly?
//! Each procedure is exercised in a scratch directory at the target's root, with
//! its effect checked (data read back and compared, listings naming what was
//! made, attributes as set); everything made is removed afterwards. The result
//! is one check per operation: passed, or failed with the reason.

use serde_json::{json, Value};

/// What a check needs to know about an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, Copy)]
pub struct Attr {
    pub kind: Kind,
    pub mode: u32,
    pub size: u64,
    pub nlink: u32,
}

pub type R<T> = Result<T, String>;

/// The operations, one call each, on paths relative to the target's root.
pub trait Probe {
    fn label(&self) -> String;
    /// Ops the protocol has no form for are reported as skipped, not failed.
    fn supports(&self, op: crate::op::Op) -> bool;
    /// Whether `getattr` reports the mode `set_mode` set (SMB2 has no mode bits).
    fn has_modes(&self) -> bool {
        true
    }
    fn null(&self) -> R<()>;
    fn mkdir(&self, path: &str) -> R<()>;
    fn create(&self, path: &str) -> R<()>;
    /// Unstable write (as NFS clients write); returns the bytes accepted.
    fn write(&self, path: &str, offset: u64, data: &[u8]) -> R<u64>;
    fn commit(&self, path: &str) -> R<()>;
    /// Lock a byte range and release it; only probes whose `supports(Op::Lock)` is true are asked.
    fn lock(&self, _path: &str) -> R<()> {
        Err("no byte-range locks".into())
    }
    fn read(&self, path: &str, offset: u64, len: u32) -> R<Vec<u8>>;
    fn set_mode(&self, path: &str, mode: u32) -> R<()>;
    fn getattr(&self, path: &str) -> R<Attr>;
    fn lookup(&self, dir: &str, name: &str) -> R<Attr>;
    /// Whether read and modify access is granted.
    fn access(&self, path: &str) -> R<bool>;
    fn rename(&self, from: &str, to: &str) -> R<()>;
    fn link(&self, from: &str, to: &str) -> R<()>;
    fn symlink(&self, path: &str, points_to: &str) -> R<()>;
    fn readlink(&self, path: &str) -> R<String>;
    /// Names in a directory (without . and ..).
    fn readdir(&self, path: &str, plus: bool) -> R<Vec<String>>;
    fn remove(&self, path: &str) -> R<()>;
    fn rmdir(&self, path: &str) -> R<()>;
    fn fsstat(&self) -> R<String>;
    fn fsinfo(&self) -> R<String>;
    fn pathconf(&self) -> R<String>;
}

struct Checks {
    rows: Vec<Value>,
    /// Names of the ops the target has no form for.
    unsupported: Vec<&'static str>,
}

impl Checks {
    fn add(&mut self, op: &str, what: &str, r: R<String>) -> bool {
        if self.unsupported.contains(&op) {
            self.skip(op, what, "the protocol has no such operation");
            return false;
        }
        let ok = r.is_ok();
        let (status, detail) = match r {
            Ok(d) => ("pass", d),
            Err(e) => ("fail", e),
        };
        self.rows.push(json!({"op": op, "check": what, "status": status, "detail": detail}));
        ok
    }
    fn skip(&mut self, op: &str, what: &str, why: &str) {
        let why = if self.unsupported.contains(&op) { "the protocol has no such operation" } else { why };
        self.rows.push(json!({"op": op, "check": what, "status": "skipped", "detail": why}));
    }
}

fn expect(cond: bool, why: impl FnOnce() -> String) -> R<()> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(7) as u8 ^ seed).collect()
}

pub fn validate(p: &dyn Probe) -> Value {
    let unsupported = crate::op::Op::ALL.iter().filter(|o| !p.supports(**o)).map(|o| o.name()).collect();
    let mut c = Checks { rows: Vec::new(), unsupported };
    let dir = format!(".peakbench-validate-{}", std::process::id());
    let d = |name: &str| format!("{dir}/{name}");
    c.add("null", "the server answers a NULL call", p.null().map(|_| "answered".into()));
    let made_dir = c.add(
        "mkdir",
        "make the scratch directory",
        p.mkdir(&dir).and_then(|_| {
            let a = p.getattr(&dir)?;
            expect(a.kind == Kind::Dir, || format!("{dir} is a {:?} after MKDIR", a.kind))?;
            Ok(dir.to_string())
        }),
    );
    if !made_dir {
        for op in [
            "create",
            "write",
            "read",
            "commit",
            "lock",
            "setattr",
            "getattr",
            "lookup",
            "access",
            "rename",
            "link",
            "symlink",
            "readlink",
            "readdir",
            "readdirplus",
            "remove",
            "rmdir",
        ] {
            c.skip(op, "", "no scratch directory (MKDIR failed)");
        }
    } else {
        scratch_checks(p, &mut c, &dir, &d);
    }
    c.add("fsstat", "file-system totals", p.fsstat());
    c.add("fsinfo", "transfer sizes and limits", p.fsinfo());
    c.add("pathconf", "name and link limits", p.pathconf());
    // Whatever the checks left, remove it: the target is as it was.
    let leftovers = if made_dir { cleanup(p, &dir) } else { Ok(()) };
    let cleaned = leftovers.is_ok();
    let passed = c.rows.iter().filter(|r| r["status"] == "pass").count();
    let failed = c.rows.iter().filter(|r| r["status"] == "fail").count();
    json!({
        "schema": "peakbench.validation/1",
        "target": p.label(),
        "checks": c.rows,
        "passed": passed,
        "failed": failed,
        "cleaned_up": cleaned,
        "cleanup_error": leftovers.err(),
        "ok": failed == 0 && cleaned,
    })
}

fn scratch_checks(p: &dyn Probe, c: &mut Checks, dir: &str, d: &dyn Fn(&str) -> String) {
    let file = d("file");
    let created = c.add(
        "create",
        "create a new file",
        p.create(&file).and_then(|_| {
            let a = p.getattr(&file)?;
            expect(a.kind == Kind::File && a.size == 0, || format!("after CREATE: {a:?}"))?;
            match p.create(&file) {
                Ok(()) => Err("a second exclusive (guarded) CREATE of the same name succeeded".into()),
                Err(_) => Ok("new, empty, regular; a guarded re-create is refused".into()),
            }
        }),
    );
    let data = pattern(100_000, 7);
    let wrote = created
        && c.add(
            "write",
            "write 100000 bytes at offset 0 and 4096 more past a hole",
            (|| {
                let mut at = 0;
                while at < data.len() {
                    let n = p.write(&file, at as u64, &data[at..(at + 32768).min(data.len())])?;
                    expect(n > 0, || "WRITE accepted 0 bytes".into())?;
                    at += n as usize;
                }
                p.write(&file, 200_000, &data[..4096])?;
                let a = p.getattr(&file)?;
                expect(a.size == 204_096, || format!("size {} after the writes, expected 204096", a.size))?;
                Ok("size 204096 as written".into())
            })(),
        );
    if wrote {
        c.add("commit", "commit the unstable writes", p.commit(&file).map(|_| "committed".into()));
        c.add("lock", "lock the first byte and release it", p.lock(&file).map(|_| "locked and released".into()));
        c.add(
            "read",
            "read back and compare, the hole as zeros, end of file",
            (|| {
                let mut got = Vec::new();
                while got.len() < data.len() {
                    let chunk = p.read(&file, got.len() as u64, 32768)?;
                    expect(!chunk.is_empty(), || format!("READ returned nothing at offset {}", got.len()))?;
                    got.extend_from_slice(&chunk);
                }
                got.truncate(data.len());
                if let Some(i) = got.iter().zip(&data).position(|(a, b)| a != b) {
                    return Err(format!("byte {i} differs from what was written"));
                }
                let hole = p.read(&file, 150_000, 1000)?;
                expect(hole.len() == 1000 && hole.iter().all(|&b| b == 0), || "the hole does not read as zeros".into())?;
                let tail = p.read(&file, 200_000, 8192)?;
                expect(tail == data[..4096], || format!("the last 4096 bytes differ ({} bytes read)", tail.len()))?;
                let past = p.read(&file, 300_000, 100)?;
                expect(past.is_empty(), || format!("{} bytes read past the end of file", past.len()))?;
                Ok("100000 + 4096 bytes identical, hole zero-filled, nothing past the end".into())
            })(),
        );
    } else {
        c.skip("commit", "", "nothing was written");
        c.skip("lock", "", "nothing was written");
        c.skip("read", "", "nothing was written");
    }
    if created {
        c.add(
            "setattr",
            "set the mode, then see it",
            p.set_mode(&file, 0o600).and_then(|_| {
                if !p.has_modes() {
                    return Ok("accepted (the protocol has no mode bits to read back)".into());
                }
                let a = p.getattr(&file)?;
                expect(a.mode & 0o7777 == 0o600, || format!("mode {:o} after setting 600", a.mode & 0o7777))?;
                p.set_mode(&file, 0o644)?;
                Ok("mode 600 then 644".into())
            }),
        );
        c.add(
            "getattr",
            "type, size and link count of the file and the directory",
            (|| {
                let a = p.getattr(&file)?;
                expect(a.kind == Kind::File && a.nlink == 1, || format!("{a:?}"))?;
                let b = p.getattr(dir)?;
                expect(b.kind == Kind::Dir, || format!("the scratch directory is a {:?}", b.kind))?;
                expect(p.getattr(&d("absent")).is_err(), || "GETATTR of a missing name succeeded".into())?;
                Ok(format!("regular file of {} bytes, 1 link; directory; a missing name is an error", a.size))
            })(),
        );
        c.add(
            "lookup",
            "find the file by name, and not a missing one",
            (|| {
                let a = p.lookup(dir, "file")?;
                expect(a.kind == Kind::File, || format!("LOOKUP found a {:?}", a.kind))?;
                match p.lookup(dir, "absent") {
                    Ok(_) => Err("LOOKUP of a missing name succeeded".into()),
                    Err(_) => Ok("found; a missing name is an error".into()),
                }
            })(),
        );
        c.add(
            "access",
            "read and modify access to the file",
            p.access(&file).and_then(|ok| expect(ok, || "read or modify access denied to the file's owner".into()).map(|_| "granted".into())),
        );
        c.add(
            "rename",
            "rename the file, old name gone",
            p.rename(&file, &d("renamed")).and_then(|_| {
                expect(p.getattr(&file).is_err(), || "the old name still exists".into())?;
                let a = p.getattr(&d("renamed"))?;
                expect(a.size == if wrote { 204_096 } else { 0 }, || format!("renamed file has {} bytes", a.size))?;
                p.rename(&d("renamed"), &file)?;
                Ok("renamed and back".into())
            }),
        );
        c.add(
            "link",
            "hard link: same file, two links",
            p.link(&file, &d("hardlink")).and_then(|_| {
                let a = p.getattr(&file)?;
                expect(a.nlink == 2, || format!("link count {} after LINK, expected 2", a.nlink))?;
                let b = p.getattr(&d("hardlink"))?;
                expect(b.size == a.size, || "the link's size differs from the file's".into())?;
                Ok("link count 2".into())
            }),
        );
    } else {
        for op in ["setattr", "getattr", "lookup", "access", "rename", "link"] {
            c.skip(op, "", "no file (CREATE failed)");
        }
    }
    let made_link = c.add(
        "symlink",
        "make a symbolic link",
        p.symlink(&d("symlink"), "file").and_then(|_| {
            let a = p.getattr(&d("symlink"))?;
            expect(a.kind == Kind::Symlink, || format!("SYMLINK made a {:?}", a.kind)).map(|_| "made".into())
        }),
    );
    if made_link {
        c.add(
            "readlink",
            "read the link's text back",
            p.readlink(&d("symlink")).and_then(|t| expect(t == "file", || format!("READLINK gave {t:?}, expected \"file\"")).map(|_| "\"file\"".into())),
        );
    } else {
        c.skip("readlink", "", "no symlink (SYMLINK failed)");
    }
    let _ = p.mkdir(&d("subdir"));
    for (op, plus) in [("readdir", false), ("readdirplus", true)] {
        c.add(
            op,
            "list the scratch directory: exactly what was made",
            p.readdir(dir, plus).and_then(|mut names| {
                names.sort();
                let mut want: Vec<String> = Vec::new();
                for (name, ok) in [("file", created), ("hardlink", created), ("symlink", made_link), ("subdir", true)] {
                    if ok && p.getattr(&d(name)).is_ok() {
                        want.push(name.to_string());
                    }
                }
                want.sort();
                expect(names == want, || format!("listed {names:?}, expected {want:?}")).map(|_| names.join(" "))
            }),
        );
    }
    c.add(
        "remove",
        "remove the file and its link; names gone",
        (|| {
            if created {
                p.remove(&d("hardlink")).ok();
                p.remove(&file)?;
                expect(p.getattr(&file).is_err(), || "the file is still there".into())?;
            }
            if made_link {
                p.remove(&d("symlink"))?;
            }
            expect(p.remove(&d("absent")).is_err(), || "REMOVE of a missing name succeeded".into())?;
            Ok("removed; a missing name is an error".into())
        })(),
    );
    c.add(
        "rmdir",
        "remove a directory",
        p.rmdir(&d("subdir")).and_then(|_| expect(p.getattr(&d("subdir")).is_err(), || "the directory is still there".into()).map(|_| "removed".into())),
    );
}

/// Remove the scratch directory and anything left in it.
fn cleanup(p: &dyn Probe, path: &str) -> R<()> {
    for name in p.readdir(path, false)? {
        let child = format!("{path}/{name}");
        match p.getattr(&child).map(|a| a.kind) {
            Ok(Kind::Dir) => cleanup(p, &child)?,
            _ => p.remove(&child)?,
        }
    }
    p.rmdir(path)
}
