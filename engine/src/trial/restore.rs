//! Putting the file set back after a trial.

use crate::op::{Outcome, Request};
use crate::result::Restore;
use crate::target::Target;
use crate::workload::fileset::Origin;
use crate::workload::generator::Generator;

/// Put the file set back as prepare left it, untimed, so every trial starts from the same state.
pub fn restore(gen: &mut Generator, target: &dyn Target) -> Restore {
    let Some(store) = target.store() else {
        return Restore::from_errors(Vec::new()); // a target that holds no files has nothing to put back
    };
    let mut errors: Vec<String> = Vec::new();
    let mut note = |r: Outcome, what: &str| {
        if let Err(e) = r {
            errors.push(format!("{what}: {e}"));
        }
    };
    for path in std::mem::take(&mut gen.links) {
        note(target.execute(&Request::Remove { path: path.clone() }), &path);
    }
    let set = &mut gen.set;
    for s in (0..set.symlinks.len()).rev().filter(|&s| set.symlinks[s].origin == Origin::Created) {
        let path = set.symlink_path(s as u32);
        note(target.execute(&Request::Remove { path: path.clone() }), &path);
    }
    // Made only if a file must be written back: most trials delete none.
    let mut content = None;
    for i in 0..set.files.len() {
        let f = &set.files[i];
        let (alive, origin, generation) = (f.alive, f.origin, f.generation);
        let current = set.file_path(i as u32);
        if origin == Origin::Created {
            if alive {
                note(target.execute(&Request::Remove { path: current.clone() }), &current);
            }
            continue;
        }
        set.files[i].generation = 0;
        let base = set.file_path(i as u32);
        let original = gen.original_sizes.get(&(i as u32)).copied();
        if !alive {
            let size = original.unwrap_or(set.files[i].size);
            let content = content.get_or_insert_with(|| crate::content::block(0));
            note(store.ensure_file(&base, size, content).map(|_| 0).map_err(|e| e.to_string()), &base);
            continue;
        }
        if generation > 0 {
            note(target.execute(&Request::Rename { from: current, to: base.clone() }), &base);
        }
        if let Some(size) = original {
            note(store.truncate(&base, size).map(|_| 0).map_err(|e| e.to_string()), &base);
        }
    }
    for d in (0..set.dirs.len()).rev().filter(|&d| set.dirs[d].origin == Origin::Created && set.dirs[d].alive) {
        let mut path = String::new();
        set.dir_path(d as u32, &mut path);
        note(target.execute(&Request::Rmdir { path: path.clone() }), &path);
    }
    Restore::from_errors(errors)
}
