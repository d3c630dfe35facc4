//! Room on a filesystem: what a path's filesystem has free (statvfs), and where it is mounted.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A filesystem's free room for an unprivileged writer and its mount point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Room {
    /// Bytes free to any user (statvfs's f_bavail × f_frsize: root's reserve left out).
    pub free_bytes: u64,
    /// Where the filesystem is mounted ("/", "/tmp").
    pub mount: PathBuf,
}

/// The room on the filesystem that holds `path`, or would hold it: a path not made yet is
/// taken at its nearest existing ancestor.
pub fn room(path: &Path) -> std::io::Result<Room> {
    let absolute = std::path::absolute(path)?;
    let existing = absolute
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("/"));
    let c_path = CString::new(existing.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes only into `stat`, and reads the NUL-terminated path given.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Room {
        free_bytes: stat.f_bavail as u64 * stat.f_frsize as u64,
        mount: mount_point(existing)?,
    })
}

/// The highest ancestor of `path` on the same device: its filesystem's mount point.
fn mount_point(path: &Path) -> std::io::Result<PathBuf> {
    let dev = path.metadata()?.dev();
    let mut mount = path;
    for up in path.ancestors().skip(1) {
        if up.metadata()?.dev() != dev {
            break;
        }
        mount = up;
    }
    Ok(mount.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_not_made_yet_is_taken_at_its_existing_ancestor() {
        let dir = std::env::temp_dir();
        let here = room(&dir).unwrap();
        let deeper = room(&dir.join("not-made-yet/nor-this")).unwrap();
        assert_eq!(here.mount, deeper.mount);
        assert!(dir.starts_with(&here.mount), "{here:?}");
        assert!(room(Path::new("/")).unwrap().mount == Path::new("/"));
    }
}
