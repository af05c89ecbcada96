//! `validate`: does the target perform every operation of the vocabulary correctly?
//! Each procedure is exercised in a scratch directory at the target's root, with
//! its effect checked (data read back and compared, listings naming what was
//! made, attributes as set); everything made is removed afterwards. The result
//! is one check per operation: passed, or failed with the reason.

use crate::op::{Attr, Kind, Op, Reply, Request};
use crate::target::Target;
use serde_json::{json, Value};

type R<T> = Result<T, String>;

/// The ops validation issues, each through `Target::probe` on any target; every error names the
/// op and the path it acted on.
struct Probe<'a>(&'a dyn Target);

fn failed(op: Op, path: &str, why: impl std::fmt::Display) -> String {
    format!("{} {}: {why}", op.name().to_uppercase(), if path.is_empty() { "/" } else { path })
}

impl Probe<'_> {
    fn ask(&self, op: Op, path: &str, request: Request) -> R<Reply> {
        self.0.probe(&request).map_err(|e| failed(op, path, e))
    }
    fn done(&self, op: Op, path: &str, request: Request) -> R<u64> {
        match self.ask(op, path, request)? {
            Reply::Done(n) => Ok(n),
            other => Err(failed(op, path, format!("unexpected reply {other:?}"))),
        }
    }
    fn null(&self) -> R<()> {
        self.done(Op::Null, "", Request::Null).map(|_| ())
    }
    fn mkdir(&self, path: &str) -> R<()> {
        self.done(Op::Mkdir, path, Request::Mkdir { path: path.into() }).map(|_| ())
    }
    fn create(&self, path: &str) -> R<()> {
        self.done(Op::Create, path, Request::Create { path: path.into() }).map(|_| ())
    }
    /// Write `len` bytes of the deterministic content (content.rs) at `offset`; returns the bytes written.
    fn write(&self, path: &str, offset: u64, len: u64) -> R<u64> {
        self.done(Op::Write, path, Request::Write { path: path.into(), offset, len, xfer: 32768 })
    }
    fn commit(&self, path: &str) -> R<()> {
        self.done(Op::Commit, path, Request::Commit { path: path.into() }).map(|_| ())
    }
    fn lock(&self, path: &str) -> R<()> {
        self.done(Op::Lock, path, Request::Lock { path: path.into() }).map(|_| ())
    }
    /// One transfer of at most `len` bytes; fewer at the end of the file.
    fn read(&self, path: &str, offset: u64, len: u64) -> R<Vec<u8>> {
        match self.ask(Op::Read, path, Request::Read { path: path.into(), file: None, offset, len, xfer: len })? {
            Reply::Data(d) if d.len() as u64 <= len => Ok(d),
            Reply::Data(d) => Err(failed(Op::Read, path, format!("{} bytes returned for {len} asked", d.len()))),
            other => Err(failed(Op::Read, path, format!("no data in the reply ({other:?})"))),
        }
    }
    fn set_mode(&self, path: &str, mode: u32) -> R<()> {
        self.done(Op::Setattr, path, Request::Setattr { path: path.into(), mode }).map(|_| ())
    }
    fn attr(&self, op: Op, path: &str, request: Request) -> R<Attr> {
        match self.ask(op, path, request)? {
            Reply::Attr(a) => Ok(a),
            other => Err(failed(op, path, format!("no attributes in the reply ({other:?})"))),
        }
    }
    fn getattr(&self, path: &str) -> R<Attr> {
        self.attr(Op::Getattr, path, Request::Getattr { path: path.into() })
    }
    fn lookup(&self, dir: &str, name: &str) -> R<Attr> {
        self.attr(Op::Lookup, &format!("{dir}/{name}"), Request::Lookup { dir: dir.into(), name: name.into() })
    }
    fn access(&self, path: &str) -> R<bool> {
        match self.ask(Op::Access, path, Request::Access { path: path.into() })? {
            Reply::Granted(ok) => Ok(ok),
            other => Err(failed(Op::Access, path, format!("no answer in the reply ({other:?})"))),
        }
    }
    fn rename(&self, from: &str, to: &str) -> R<()> {
        self.done(Op::Rename, from, Request::Rename { from: from.into(), to: to.into() }).map(|_| ())
    }
    fn link(&self, from: &str, to: &str) -> R<()> {
        self.done(Op::Link, to, Request::Link { from: from.into(), to: to.into() }).map(|_| ())
    }
    fn symlink(&self, path: &str, points_to: &str) -> R<()> {
        self.done(Op::Symlink, path, Request::Symlink { path: path.into(), points_to: points_to.into() }).map(|_| ())
    }
    fn text(&self, op: Op, path: &str, request: Request) -> R<String> {
        match self.ask(op, path, request)? {
            Reply::Text(t) => Ok(t),
            other => Err(failed(op, path, format!("no text in the reply ({other:?})"))),
        }
    }
    fn readlink(&self, path: &str) -> R<String> {
        self.text(Op::Readlink, path, Request::Readlink { path: path.into() })
    }
    fn readdir(&self, path: &str, plus: bool) -> R<Vec<String>> {
        let op = if plus { Op::Readdirplus } else { Op::Readdir };
        match self.ask(op, path, Request::Readdir { path: path.into(), plus })? {
            Reply::Names(n) => Ok(n),
            other => Err(failed(op, path, format!("no names in the reply ({other:?})"))),
        }
    }
    fn remove(&self, path: &str) -> R<()> {
        self.done(Op::Remove, path, Request::Remove { path: path.into() }).map(|_| ())
    }
    fn rmdir(&self, path: &str) -> R<()> {
        self.done(Op::Rmdir, path, Request::Rmdir { path: path.into() }).map(|_| ())
    }
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

/// The deterministic content (content.rs) of `len` bytes at `offset`: what a write put there.
fn content(offset: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    crate::content::fill(&mut b, offset);
    b
}

/// Check every op the target supports; `label` names the target in the result.
pub fn validate(target: &dyn Target, label: &str) -> Value {
    let unsupported = Op::ALL.iter().filter(|o| !target.supports(**o)).map(|o| o.name()).collect();
    let p = &Probe(target);
    let mut c = Checks { rows: Vec::new(), unsupported };
    let dir = format!(".peakbench-validate-{}", std::process::id());
    let d = |name: &str| format!("{dir}/{name}");
    c.add("null", "the server answers a NULL call", p.null().map(|_| "answered".into()));
    let made_dir = c.add(
        "mkdir",
        "make the scratch directory",
        p.mkdir(&dir).and_then(|_| {
            let a = p.getattr(&dir)?;
            expect(a.kind == Kind::Dir, || failed(Op::Mkdir, &dir, format!("made a {:?}", a.kind)))?;
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
    c.add("fsstat", "file-system totals", p.text(Op::Fsstat, "", Request::Fsstat));
    c.add("fsinfo", "transfer sizes and limits", p.text(Op::Fsinfo, "", Request::Fsinfo));
    c.add("pathconf", "name and link limits", p.text(Op::Pathconf, "", Request::Pathconf));
    // Whatever the checks left, remove it: the target is as it was.
    let leftovers = if made_dir { cleanup(p, &dir) } else { Ok(()) };
    let cleaned = leftovers.is_ok();
    let passed = c.rows.iter().filter(|r| r["status"] == "pass").count();
    let failed = c.rows.iter().filter(|r| r["status"] == "fail").count();
    json!({
        "schema": "peakbench.validation/1",
        "target": label,
        "checks": c.rows,
        "passed": passed,
        "failed": failed,
        "cleaned_up": cleaned,
        "cleanup_error": leftovers.err(),
        "ok": failed == 0 && cleaned,
    })
}

fn scratch_checks(p: &Probe, c: &mut Checks, dir: &str, d: &dyn Fn(&str) -> String) {
    let file = d("file");
    let created = c.add(
        "create",
        "create a new file",
        p.create(&file).and_then(|_| {
            let a = p.getattr(&file)?;
            expect(a.kind == Kind::File && a.size == 0, || failed(Op::Create, &file, format!("made {a:?}")))?;
            match p.create(&file) {
                Ok(()) => Err(failed(Op::Create, &file, "a second exclusive (guarded) create of the same name succeeded")),
                Err(_) => Ok("new, empty, regular; a guarded re-create is refused".into()),
            }
        }),
    );
    let wrote = created
        && c.add(
            "write",
            "write 100000 bytes at offset 0 and 4096 more past a hole",
            (|| {
                let n = p.write(&file, 0, 100_000)?;
                expect(n == 100_000, || failed(Op::Write, &file, format!("{n} of 100000 bytes written")))?;
                let n = p.write(&file, 200_000, 4096)?;
                expect(n == 4096, || failed(Op::Write, &file, format!("{n} of 4096 bytes written at offset 200000")))?;
                let a = p.getattr(&file)?;
                expect(a.size == 204_096, || failed(Op::Getattr, &file, format!("size {} after the writes, expected 204096", a.size)))?;
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
                while got.len() < 100_000 {
                    let chunk = p.read(&file, got.len() as u64, 32768)?;
                    expect(!chunk.is_empty(), || failed(Op::Read, &file, format!("nothing returned at offset {}", got.len())))?;
                    got.extend_from_slice(&chunk);
                }
                got.truncate(100_000);
                if let Some(i) = got.iter().zip(content(0, 100_000)).position(|(a, b)| *a != b) {
                    return Err(failed(Op::Read, &file, format!("byte {i} differs from the content written there")));
                }
                let hole = p.read(&file, 150_000, 1000)?;
                expect(hole.len() == 1000 && hole.iter().all(|&b| b == 0), || failed(Op::Read, &file, "the hole does not read as zeros"))?;
                let tail = p.read(&file, 200_000, 8192)?;
                expect(tail == content(200_000, 4096), || failed(Op::Read, &file, format!("the last 4096 bytes differ ({} bytes read)", tail.len())))?;
                let past = p.read(&file, 300_000, 100)?;
                expect(past.is_empty(), || failed(Op::Read, &file, format!("{} bytes read past the end of file", past.len())))?;
                Ok("100000 + 4096 bytes as written, hole zero-filled, nothing past the end".into())
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
                let Some(mode) = p.getattr(&file)?.mode else {
                    return Ok("accepted (the protocol has no mode bits to read back)".into());
                };
                expect(mode & 0o7777 == 0o600, || failed(Op::Setattr, &file, format!("mode {:o} read back after setting 600", mode & 0o7777)))?;
                p.set_mode(&file, 0o644)?;
                let mode = p.getattr(&file)?.mode.unwrap_or(0);
                expect(mode & 0o7777 == 0o644, || failed(Op::Setattr, &file, format!("mode {:o} read back after setting 644", mode & 0o7777)))?;
                Ok("mode 600 then 644".into())
            }),
        );
        c.add(
            "getattr",
            "type, size and link count of the file and the directory",
            (|| {
                let a = p.getattr(&file)?;
                expect(a.kind == Kind::File && a.nlink == 1, || failed(Op::Getattr, &file, format!("{a:?}, expected a file of 1 link")))?;
                let b = p.getattr(dir)?;
                expect(b.kind == Kind::Dir, || failed(Op::Getattr, dir, format!("the scratch directory is a {:?}", b.kind)))?;
                expect(p.getattr(&d("absent")).is_err(), || failed(Op::Getattr, &d("absent"), "a missing name succeeded"))?;
                Ok(format!("regular file of {} bytes, 1 link; directory; a missing name is an error", a.size))
            })(),
        );
        c.add(
            "lookup",
            "find the file by name, and not a missing one",
            (|| {
                let a = p.lookup(dir, "file")?;
                expect(a.kind == Kind::File, || failed(Op::Lookup, &file, format!("found a {:?}", a.kind)))?;
                match p.lookup(dir, "absent") {
                    Ok(_) => Err(failed(Op::Lookup, &d("absent"), "a missing name succeeded")),
                    Err(_) => Ok("found; a missing name is an error".into()),
                }
            })(),
        );
        c.add(
            "access",
            "read and modify access to the file",
            p.access(&file)
                .and_then(|ok| expect(ok, || failed(Op::Access, &file, "read or modify access denied to the file's owner")).map(|_| "granted".into())),
        );
        c.add(
            "rename",
            "rename the file, old name gone",
            p.rename(&file, &d("renamed")).and_then(|_| {
                expect(p.getattr(&file).is_err(), || failed(Op::Rename, &file, "the old name still exists"))?;
                let a = p.getattr(&d("renamed"))?;
                expect(a.size == if wrote { 204_096 } else { 0 }, || failed(Op::Rename, &d("renamed"), format!("the renamed file has {} bytes", a.size)))?;
                p.rename(&d("renamed"), &file)?;
                Ok("renamed and back".into())
            }),
        );
        c.add(
            "link",
            "hard link: same file, two links",
            p.link(&file, &d("hardlink")).and_then(|_| {
                let a = p.getattr(&file)?;
                expect(a.nlink == 2, || failed(Op::Link, &file, format!("link count {}, expected 2", a.nlink)))?;
                let b = p.getattr(&d("hardlink"))?;
                expect(b.size == a.size, || failed(Op::Link, &d("hardlink"), "the link's size differs from the file's"))?;
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
            expect(a.kind == Kind::Symlink, || failed(Op::Symlink, &d("symlink"), format!("made a {:?}", a.kind))).map(|_| "made".into())
        }),
    );
    if made_link {
        c.add(
            "readlink",
            "read the link's text back",
            p.readlink(&d("symlink"))
                .and_then(|t| expect(t == "file", || failed(Op::Readlink, &d("symlink"), format!("gave {t:?}, expected \"file\""))).map(|_| "\"file\"".into())),
        );
    } else {
        c.skip("readlink", "", "no symlink (SYMLINK failed)");
    }
    let _ = p.mkdir(&d("subdir"));
    for (op, plus) in [(Op::Readdir, false), (Op::Readdirplus, true)] {
        c.add(
            op.name(),
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
                expect(names == want, || failed(op, dir, format!("listed {names:?}, expected {want:?}"))).map(|_| names.join(" "))
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
                expect(p.getattr(&file).is_err(), || failed(Op::Remove, &file, "the file is still there"))?;
            }
            if made_link {
                p.remove(&d("symlink"))?;
            }
            expect(p.remove(&d("absent")).is_err(), || failed(Op::Remove, &d("absent"), "a missing name succeeded"))?;
            Ok("removed; a missing name is an error".into())
        })(),
    );
    c.add(
        "rmdir",
        "remove a directory",
        p.rmdir(&d("subdir")).and_then(|_| {
            expect(p.getattr(&d("subdir")).is_err(), || failed(Op::Rmdir, &d("subdir"), "the directory is still there")).map(|_| "removed".into())
        }),
    );
}

/// Remove the scratch directory and anything left in it.
fn cleanup(p: &Probe, path: &str) -> R<()> {
    for name in p.readdir(path, false)? {
        let child = format!("{path}/{name}");
        match p.getattr(&child).map(|a| a.kind) {
            Ok(Kind::Dir) => cleanup(p, &child)?,
            _ => p.remove(&child)?,
        }
    }
    p.rmdir(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Outcome;
    use crate::target::posix::Posix;

    enum Fault {
        None,
        /// One byte of every read comes back changed.
        FlipByte,
        /// Every mode reads back with group and other bits set.
        WrongMode,
    }

    /// A real directory with a fault injected between it and validation: a working file system
    /// cannot be made to return other bytes than it stored, or another mode than it set.
    struct Faulty(Posix, Fault);

    impl Target for Faulty {
        fn supports(&self, op: Op) -> bool {
            self.0.supports(op)
        }
        fn execute(&self, request: &Request) -> Outcome {
            self.0.execute(request)
        }
        fn probe(&self, request: &Request) -> Result<Reply, String> {
            Ok(match (self.0.probe(request)?, &self.1) {
                (Reply::Data(mut d), Fault::FlipByte) if !d.is_empty() => {
                    let mid = d.len() / 2;
                    d[mid] ^= 1;
                    Reply::Data(d)
                }
                (Reply::Attr(a), Fault::WrongMode) => Reply::Attr(Attr { mode: a.mode.map(|m| m | 0o077), ..a }),
                (reply, _) => reply,
            })
        }
    }

    fn run(name: &str, fault: Fault) -> (Value, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("peakbench-validate-test-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = Faulty(Posix::open(dir.to_str().unwrap()).unwrap(), fault);
        (validate(&target, "test"), dir)
    }

    fn check<'v>(result: &'v Value, op: &str) -> &'v Value {
        result["checks"].as_array().unwrap().iter().find(|c| c["op"] == op).unwrap()
    }

    #[test]
    fn a_working_directory_passes_every_check_and_is_left_empty() {
        let (result, dir) = run("ok", Fault::None);
        assert_eq!(result["failed"], 0, "{result:#}");
        assert_eq!(result["ok"], true);
        assert_eq!(check(&result, "lock")["status"], "skipped");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    /// The one failed check's op and detail, and that the scratch directory was removed even so.
    fn the_one_failure(result: &Value, dir: &std::path::Path) -> (String, String) {
        let failed: Vec<&Value> = result["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail").collect();
        assert_eq!(failed.len(), 1, "{result:#}");
        assert_eq!((&result["ok"], &result["cleaned_up"]), (&json!(false), &json!(true)));
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0);
        std::fs::remove_dir(dir).unwrap();
        (failed[0]["op"].as_str().unwrap().into(), failed[0]["detail"].as_str().unwrap().into())
    }

    #[test]
    fn data_read_back_wrong_fails_read_naming_the_op_and_path() {
        let (result, dir) = run("flip", Fault::FlipByte);
        let file = format!(".peakbench-validate-{}/file", std::process::id());
        assert_eq!(the_one_failure(&result, &dir), ("read".into(), format!("READ {file}: byte 16384 differs from the content written there")));
    }

    #[test]
    fn a_mode_read_back_wrong_fails_setattr_naming_the_op_and_path() {
        let (result, dir) = run("mode", Fault::WrongMode);
        let file = format!(".peakbench-validate-{}/file", std::process::id());
        assert_eq!(the_one_failure(&result, &dir), ("setattr".into(), format!("SETATTR {file}: mode 677 read back after setting 600")));
    }
}
