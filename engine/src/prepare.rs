//! Building the file set through the target: idempotent, resumable, augmenting.
//! The manifest beside the file sets records how many files are known complete,
//! so an interrupted prepare resumes where it stopped and a larger set only adds.

use crate::progress;
use crate::replay::Trace;
use crate::spec::{FilesetSpec, ReplaySpec, TrialSpec};
use crate::target::{FileStore, Target};
use crate::workload::fileset::{items, layout_id, FileSet, Item};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

pub const MANIFEST: &str = ".peakbench-manifest.json";
/// Files of an already prepared set checked before each trial: all of a set this size or
/// smaller, an evenly spaced sample of a larger one (a few ms locally, bounded over NFS).
const CHECKED_FILES: u64 = 10_000;

#[derive(Serialize, Deserialize, Default)]
pub struct Manifest {
    pub created_by: String,
    pub filesets: BTreeMap<String, FilesetEntry>,
    /// Document trees built from access logs (replay), by id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub docroots: BTreeMap<String, DocrootEntry>,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct DocrootEntry {
    pub log: String,
    pub files: u64,
    pub bytes: u64,
    pub complete: bool,
}

#[derive(Serialize, Deserialize, Clone)]
pub struct FilesetEntry {
    /// Files 0..complete_files (and everything before them in the layout stream) exist in full.
    pub complete_files: u64,
    pub layout: FilesetSpec,
}

pub fn read_manifest(target: &dyn FileStore) -> anyhow::Result<Option<Manifest>> {
    match target.read_meta(MANIFEST)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes).map(Some).with_context(|| format!("{MANIFEST} is corrupt")),
    }
}

fn save(target: &dyn FileStore, manifest: &Manifest) -> anyhow::Result<()> {
    target.write_meta(MANIFEST, &serde_json::to_vec_pretty(manifest)?)
}

/// How many files of this layout the target holds in full.
pub fn complete_files(target: &dyn FileStore, fileset: &FilesetSpec) -> anyhow::Result<u64> {
    let id = layout_id(fileset);
    Ok(read_manifest(target)?.and_then(|m| m.filesets.get(&id).map(|e| e.complete_files)).unwrap_or(0))
}

/// The manifest, or a new one if the target is empty; a non-empty target that peakbench
/// did not prepare is refused.
fn own_manifest(target: &dyn FileStore, path_label: &str) -> anyhow::Result<Manifest> {
    match read_manifest(target)? {
        Some(m) => Ok(m),
        None => {
            if !target.is_empty()? {
                bail!("refusing to prepare in {path_label}: it is not empty and peakbench did not create it (no {MANIFEST}); name an empty directory");
            }
            Ok(Manifest { created_by: format!("peakbench-engine {}", env!("CARGO_PKG_VERSION")), ..Default::default() })
        }
    }
}

pub fn prepare(spec: &TrialSpec, target: &mut dyn Target, path_label: &str) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let Some(target) = target.store_mut() else {
        // A target that holds no files (null): nothing to build, nothing created.
        let set = FileSet::build(&spec.fileset);
        return Ok(fileset_prepared(&layout_id(&spec.fileset), &set, 0, 0, 0, started));
    };
    if let Some(replay) = &spec.replay {
        return prepare_docroot(replay, target, path_label);
    }
    let id = layout_id(&spec.fileset);
    let mut manifest = own_manifest(target, path_label)?;
    let mut layout = spec.fileset.clone();
    layout.files = 0;
    let trusted = manifest.filesets.get(&id).map_or(0, |e| e.complete_files);
    let entry = manifest.filesets.entry(id.clone()).or_insert(FilesetEntry { complete_files: 0, layout });
    entry.complete_files = trusted;
    save(target, &manifest)?; // mark the directory as ours before anything is created in it
    target.enter_fileset(&id, true)?;

    let set = FileSet::build(&spec.fileset); // only for path names
    let content = crate::content::block(spec.fileset.seed);
    let wanted = spec.fileset.files;
    let (mut files_seen, mut made, mut checked) = (0u64, 0u64, 0u64);
    // A set the manifest trusts may have been damaged since (files deleted, truncated, replaced
    // by symlinks, a trial killed before it put the set back): its directories and symlinks are
    // made again where missing, and every file, or an evenly spaced sample of CHECKED_FILES of
    // them, is checked and completed like a new one. A planted symlink fails the check (ELOOP).
    let stride = trusted.min(wanted).div_ceil(CHECKED_FILES).max(1);
    let mut last_report = Instant::now();
    for item in items(&spec.fileset) {
        let is_trusted = match item {
            Item::File { index, .. } => (index as u64) < trusted,
            _ => files_seen < trusted,
        };
        match item {
            Item::Dir { index, .. } => {
                let mut p = String::new();
                set.dir_path(index, &mut p);
                target.ensure_dir(&p)?;
            }
            Item::Symlink { index, parent, file } => {
                target.ensure_symlink(&set.symlink_path(index), &set.symlink_target(parent, file))?;
            }
            Item::File { index, size, .. } => {
                if !is_trusted {
                    target.ensure_file(&set.file_path(index), size, &content)?;
                    made += 1;
                } else if (index as u64).is_multiple_of(stride) {
                    target.ensure_file(&set.file_path(index), size, &content).with_context(|| format!("file set {id} was changed after it was prepared"))?;
                    checked += 1;
                }
                files_seen += 1;
            }
        }
        if last_report.elapsed() >= Duration::from_secs(1) {
            last_report = Instant::now();
            // Checkpoint first: a progress line then promises that what it counts survives a kill.
            if files_seen > trusted {
                manifest.filesets.get_mut(&id).expect("entry exists").complete_files = files_seen;
                save(target, &manifest)?;
            }
            progress::emit(json!({"phase": "prepare", "done": files_seen, "total": wanted}));
        }
    }
    let entry = manifest.filesets.get_mut(&id).expect("entry exists");
    entry.complete_files = entry.complete_files.max(wanted);
    save(target, &manifest)?;
    progress::emit(json!({"phase": "prepare", "done": wanted, "total": wanted}));
    Ok(fileset_prepared(&id, &set, made, trusted.min(wanted), checked, started))
}

fn fileset_prepared(id: &str, set: &FileSet, created: u64, already: u64, checked: u64, started: Instant) -> serde_json::Value {
    json!({
        "schema": "peakbench.prepare-result/1",
        "fileset": {"id": id, "files": set.files.len(), "dirs": set.dirs.len(), "symlinks": set.symlinks.len(), "bytes": set.prepared_bytes},
        "files_created": created,
        "files_already_complete": already,
        "files_checked": checked,
        "seconds": started.elapsed().as_secs_f64(),
    })
}

/// Refuse a document tree larger than the free space of a local directory (a log line can
/// claim any size: one of 10^18 bytes would fill the file system). A target that is not a
/// local directory (a URL) is not checked here.
fn check_free_space(path_label: &str, bytes: u64) -> anyhow::Result<()> {
    let Ok(path) = std::ffi::CString::new(path_label) else { return Ok(()) };
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Ok(());
    }
    let free = st.f_bavail as u64 * st.f_frsize as u64;
    if bytes > free {
        return Err(crate::replay::BadLog(format!("the document tree needs {bytes} bytes but {path_label} has {free} bytes free; lower --dataset-size")).into());
    }
    Ok(())
}

/// The document tree an access log implies: every file it served successfully (within
/// `dataset_bytes`), at the size it was served, with deterministic content, at its path
/// below the target's root (not in a file-set directory: the log's paths are absolute).
fn prepare_docroot(replay: &ReplaySpec, target: &mut dyn FileStore, path_label: &str) -> anyhow::Result<serde_json::Value> {
    let started = Instant::now();
    let trace = Trace::load(replay)?;
    let (len, files, bytes) = trace.prefix(replay.dataset_bytes);
    let used = trace.files_used(len);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325; // FNV-1a over the names and sizes
    for &f in &used {
        for b in trace.files[f].bytes().chain(trace.file_sizes[f].to_le_bytes()) {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    let id = format!("docroot-{h:016x}");
    let mut manifest = own_manifest(target, path_label)?;
    let done = manifest.docroots.get(&id).is_some_and(|e| e.complete);
    let mut made = 0u64;
    if !done {
        check_free_space(path_label, bytes)?;
        manifest.docroots.insert(id.clone(), DocrootEntry { log: replay.log.clone(), files, bytes, complete: false });
        save(target, &manifest)?;
        let content = crate::content::block(0);
        let mut dirs: HashSet<String> = HashSet::new();
        let mut last_report = Instant::now();
        for (i, &f) in used.iter().enumerate() {
            let path = &trace.files[f];
            for (at, _) in path.match_indices('/') {
                if dirs.insert(path[..at].to_string()) {
                    target.ensure_dir(&path[..at])?;
                }
            }
            target.ensure_file(path, trace.file_sizes[f], &content)?;
            made += 1;
            if last_report.elapsed() >= Duration::from_secs(1) {
                last_report = Instant::now();
                progress::emit(json!({"phase": "prepare", "done": i, "total": used.len()}));
            }
        }
        manifest.docroots.get_mut(&id).expect("entry exists").complete = true;
        save(target, &manifest)?;
    }
    Ok(json!({
        "schema": "peakbench.prepare-result/1",
        "docroot": {"id": id, "files": files, "bytes": bytes},
        "files_created": made,
        "files_already_complete": if done { files } else { 0 },
        "seconds": started.elapsed().as_secs_f64(),
        "replay": trace.summary(replay, len, files, bytes),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_without_files_prepares_nothing_and_says_so() {
        let spec = crate::spec::parse(
            r#"{"schema": "peakbench.trial-spec/1", "target": {"kind": "null"}, "load": {"rate": 10, "runtime_s": 1},
                "mix": {"getattr": 1}, "fileset": {"files": 10, "files_per_dir": {"kind": "constant", "value": 10},
                "dirs_per_dir": {"kind": "constant", "value": 0}, "max_depth": 1, "file_sizes": {"kind": "constant", "value": 100}}}"#,
        )
        .expect("test spec");
        let done = prepare(&spec, &mut crate::target::null::NullTarget, "null://").unwrap();
        assert_eq!(done["files_created"], 0, "{done}");
        assert_eq!(done["files_already_complete"], 0, "{done}");
        assert_eq!(done["fileset"]["files"], 10, "{done}");
    }
}
