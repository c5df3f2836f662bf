//! Filesystem access that never follows a link it did not expect: every open is
//! relative to a directory already held open (`openat`), with `O_NOFOLLOW`, and
//! only regular files and directories are accepted. What the cache store, an export
//! folder or a job's files hold is someone else's input: a link planted there must
//! not make the orchestrator read, truncate, create or delete anything elsewhere.
//!
//! A [`Dir`] is an open directory; names passed to its methods are single path
//! components (no `/`, not `.` or `..`), checked by [`name`].

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

/// How deep [`Dir::remove_tree`] and [`Dir::walk`] go: deeper trees are refused
/// rather than overflowing the stack.
pub const MAX_DEPTH: usize = 128;

/// An open directory, reached without following a link.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// What a name in a directory is, without following it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket or device.
    Other,
}

impl Kind {
    fn of(st: &FileStat) -> Kind {
        match SFlag::from_bits_truncate(st.st_mode & libc::S_IFMT) {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        }
    }

    /// In words, for messages.
    pub fn words(self) -> &'static str {
        match self {
            Kind::File => "a regular file",
            Kind::Dir => "a folder",
            Kind::Symlink => "a symbolic link",
            Kind::Other => "a FIFO, socket or device",
        }
    }
}

/// The parts of a stat that say whether a file changed: ctime cannot be set back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub mode: u32,
    pub uid: u32,
    pub nlink: u64,
}

impl Stamp {
    pub fn of(st: &FileStat) -> Stamp {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Stamp {
            dev: st.st_dev,
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
            mode: st.st_mode,
            uid: st.st_uid,
            nlink: st.st_nlink,
        }
    }
}

fn err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

fn retry<T>(mut f: impl FnMut() -> nix::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(Errno::EINTR) => continue,
            r => return r.map_err(err),
        }
    }
}

/// `n` if it is one plain path component (not empty, no `/` or NUL, not `.`/`..`).
pub fn name(n: &str) -> io::Result<&str> {
    if n.is_empty() || n == "." || n == ".." || n.contains('/') || n.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{n}` is not a plain file name"),
        ));
    }
    Ok(n)
}

/// The components of a relative path of plain names (`a/b/c`); anything else
/// (absolute, `..`, `.`, empty parts) is refused.
pub fn plain_parts(rel: &str) -> io::Result<Vec<&str>> {
    if rel.is_empty() || rel.starts_with('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{rel}` is not a relative path of plain names"),
        ));
    }
    rel.split('/').map(name).collect()
}

/// `path` with `.` and `..` folded lexically; `None` if a `..` would climb above
/// its start (for a relative path) or above `/`.
pub fn normalize(path: &str) -> Option<String> {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(n) => parts.push(n.to_str()?),
            Component::Prefix(_) => return None,
        }
    }
    let joined = parts.join("/");
    Some(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

/// Where a link whose text is `target`, placed at `at` (a relative path of plain
/// names below some root), points, lexically, relative to that root; `None` when it
/// is absolute or climbs out of the root.
pub fn link_inside(at: &str, target: &str) -> Option<String> {
    if target.starts_with('/') || target.is_empty() {
        return None;
    }
    let parent = at.rsplit_once('/').map_or("", |(p, _)| p);
    let joined = if parent.is_empty() {
        target.to_string()
    } else {
        format!("{parent}/{target}")
    };
    normalize(&joined)
}

impl Dir {
    /// Open the directory at `path`. Its last component must not be a link; the
    /// folders above it are the caller's to trust (see [`check_private`]).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let fd = retry(|| {
            nix::fcntl::open(
                path,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        })
        .map_err(|e| with_path(e, path))?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Where this directory was opened (for messages only: never reopened by it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn child(&self, n: &str) -> PathBuf {
        self.path.join(n)
    }

    /// The sub-directory `n`, never through a link.
    pub fn sub(&self, n: &str) -> io::Result<Dir> {
        let n = name(n)?;
        let fd = retry(|| {
            nix::fcntl::openat(
                self.fd.as_fd(),
                n,
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        })
        .map_err(|e| with_path(e, &self.child(n)))?;
        Ok(Dir {
            fd,
            path: self.child(n),
        })
    }

    /// The sub-directory `n`, made with `mode` if it is not there.
    pub fn sub_or_make(&self, n: &str, mode: u32) -> io::Result<Dir> {
        match self.mkdir(n, mode) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        self.sub(n)
    }

    /// The sub-directory `n` of a folder the caller owns whole (the cache store):
    /// anything else found there (a link, a file) is junk, removed as what it is,
    /// and the directory made with `mode`.
    pub fn sub_owned(&self, n: &str, mode: u32) -> io::Result<Dir> {
        match self.stat(n)? {
            Some((Kind::Dir, _)) => {}
            Some(_) => {
                self.unlink(n)?;
                self.mkdir(n, mode)?;
            }
            None => match self.mkdir(n, mode) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                r => r?,
            },
        }
        self.sub(n)
    }

    /// The directory at the relative path `rel` (plain names), each folder made with
    /// `mode` where missing when `make`, none of them through a link.
    pub fn descend(&self, rel: &str, make: Option<u32>) -> io::Result<Dir> {
        let mut d = self.try_clone()?;
        for part in plain_parts(rel)? {
            d = match make {
                Some(mode) => d.sub_or_make(part, mode)?,
                None => d.sub(part)?,
            };
        }
        Ok(d)
    }

    /// Another handle on the same directory.
    pub fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir {
            fd: self.fd.try_clone()?,
            path: self.path.clone(),
        })
    }

    /// Make the directory `n` with `mode` (exactly: the umask is undone).
    pub fn mkdir(&self, n: &str, mode: u32) -> io::Result<()> {
        let n = name(n)?;
        retry(|| nix::sys::stat::mkdirat(self.fd.as_fd(), n, Mode::from_bits_truncate(mode)))
            .map_err(|e| with_path(e, &self.child(n)))?;
        // mkdirat applies the umask; the store's modes are exact.
        let _ = nix::sys::stat::fchmodat(
            self.fd.as_fd(),
            n,
            Mode::from_bits_truncate(mode),
            nix::sys::stat::FchmodatFlags::NoFollowSymlink,
        );
        Ok(())
    }

    /// What `n` is, without following it; `None` when it is not there.
    pub fn stat(&self, n: &str) -> io::Result<Option<(Kind, Stamp)>> {
        let n = name(n)?;
        match retry(|| nix::sys::stat::fstatat(self.fd.as_fd(), n, AtFlags::AT_SYMLINK_NOFOLLOW)) {
            Ok(st) => Ok(Some((Kind::of(&st), Stamp::of(&st)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(with_path(e, &self.child(n))),
        }
    }

    /// This directory's own stat.
    pub fn stamp(&self) -> io::Result<Stamp> {
        retry(|| nix::sys::stat::fstat(self.fd.as_fd())).map(|st| Stamp::of(&st))
    }

    /// Open the regular file `n` for reading (not a link, FIFO or device; opened
    /// non-blocking so a FIFO cannot hang the open), with its stat.
    pub fn open_file(&self, n: &str) -> io::Result<(File, Stamp)> {
        let n = name(n)?;
        let fd = retry(|| {
            nix::fcntl::openat(
                self.fd.as_fd(),
                n,
                OFlag::O_RDONLY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_NONBLOCK
                    | OFlag::O_NOCTTY
                    | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        })
        .map_err(|e| self.refused(e, n))?;
        let st = retry(|| nix::sys::stat::fstat(fd.as_fd()))?;
        if Kind::of(&st) != Kind::File {
            return Err(not_plain(&self.child(n), Kind::of(&st)));
        }
        let f = File::from(fd);
        // Reads block normally from here on.
        let _ = nix::fcntl::fcntl(&f, nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()));
        Ok((f, Stamp::of(&st)))
    }

    fn refused(&self, e: io::Error, n: &str) -> io::Error {
        if e.raw_os_error() == Some(libc::ELOOP) {
            return not_plain(&self.child(n), Kind::Symlink);
        }
        with_path(e, &self.child(n))
    }

    /// The bytes of the regular file `n`, at most `max` (more is an error).
    pub fn read(&self, n: &str, max: u64) -> io::Result<Vec<u8>> {
        let (f, st) = self.open_file(n)?;
        if st.size > max {
            return Err(too_large(&self.child(n), max));
        }
        let mut out = Vec::with_capacity(st.size as usize);
        f.take(max + 1).read_to_end(&mut out)?;
        if out.len() as u64 > max {
            return Err(too_large(&self.child(n), max));
        }
        Ok(out)
    }

    /// Create the file `n`, which must not exist (`O_EXCL`: never through a link).
    pub fn create(&self, n: &str, mode: u32) -> io::Result<File> {
        let n = name(n)?;
        let fd = retry(|| {
            nix::fcntl::openat(
                self.fd.as_fd(),
                n,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(mode),
            )
        })
        .map_err(|e| with_path(e, &self.child(n)))?;
        let f = File::from(fd);
        // The umask is undone: the mode asked for is the mode.
        let _ = nix::sys::stat::fchmod(f.as_fd(), Mode::from_bits_truncate(mode));
        Ok(f)
    }

    /// Open `n` for a `flock` (made if missing, never through a link, a regular file).
    pub fn lock_file(&self, n: &str) -> io::Result<File> {
        let n = name(n)?;
        let fd = retry(|| {
            nix::fcntl::openat(
                self.fd.as_fd(),
                n,
                OFlag::O_RDWR
                    | OFlag::O_CREAT
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_NONBLOCK
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
        })
        .map_err(|e| self.refused(e, n))?;
        let st = retry(|| nix::sys::stat::fstat(fd.as_fd()))?;
        if Kind::of(&st) != Kind::File {
            return Err(not_plain(&self.child(n), Kind::of(&st)));
        }
        Ok(File::from(fd))
    }

    /// Write `bytes` to `n` atomically: a new file in `tmp` (a directory on the same
    /// filesystem), synced, then renamed over `n` (a link at `n` is replaced, never
    /// followed).
    pub fn write_atomic(&self, tmp: &Dir, n: &str, bytes: &[u8], mode: u32) -> io::Result<()> {
        let t = unique_name();
        let res = (|| {
            let mut f = tmp.create(&t, mode)?;
            f.write_all(bytes)?;
            f.sync_data()?;
            tmp.rename(&t, self, n)
        })();
        if res.is_err() {
            let _ = tmp.unlink(&t);
        }
        res
    }

    /// Rename `from` here to `to` in `dest` (replacing a file or link there).
    pub fn rename(&self, from: &str, dest: &Dir, to: &str) -> io::Result<()> {
        let (from, to) = (name(from)?, name(to)?);
        retry(|| nix::fcntl::renameat(self.fd.as_fd(), from, dest.fd.as_fd(), to))
            .map_err(|e| with_path(e, &dest.child(to)))
    }

    /// Remove the file or link `n` (not a directory).
    pub fn unlink(&self, n: &str) -> io::Result<()> {
        let n = name(n)?;
        retry(|| nix::unistd::unlinkat(self.fd.as_fd(), n, UnlinkatFlags::NoRemoveDir))
            .map_err(|e| with_path(e, &self.child(n)))
    }

    /// Remove whatever `n` is, a whole tree included, without following any link in
    /// it; nothing when it is not there.
    pub fn remove_tree(&self, n: &str) -> io::Result<()> {
        self.remove_at(name(n)?, 0)
    }

    fn remove_at(&self, n: &str, depth: usize) -> io::Result<()> {
        match self.stat(n)? {
            None => Ok(()),
            Some((Kind::Dir, _)) => {
                if depth >= MAX_DEPTH {
                    return Err(io::Error::other(format!(
                        "{}: deeper than {MAX_DEPTH} folders; not removed",
                        self.child(n).display()
                    )));
                }
                let d = self.sub(n)?;
                for (child, _) in d.entries()? {
                    d.remove_at(&child, depth + 1)?;
                }
                retry(|| nix::unistd::unlinkat(self.fd.as_fd(), n, UnlinkatFlags::RemoveDir))
                    .map_err(|e| with_path(e, &self.child(n)))
            }
            Some(_) => self.unlink(n),
        }
    }

    /// The names in this directory (not `.` and `..`), with what each is. Names that
    /// are not UTF-8 are skipped: nothing orchestrate writes has one.
    pub fn entries(&self) -> io::Result<Vec<(String, Kind)>> {
        let fd = self.fd.try_clone()?;
        let mut d = nix::dir::Dir::from_fd(fd).map_err(err)?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e.map_err(err)?;
            let raw = e.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            let Ok(n) = std::str::from_utf8(raw) else {
                continue;
            };
            let kind = match e.file_type() {
                Some(nix::dir::Type::File) => Kind::File,
                Some(nix::dir::Type::Directory) => Kind::Dir,
                Some(nix::dir::Type::Symlink) => Kind::Symlink,
                Some(_) => Kind::Other,
                None => self.stat(n)?.map_or(Kind::Other, |(k, _)| k),
            };
            out.push((n.to_string(), kind));
        }
        Ok(out)
    }

    /// Make a symbolic link `n` with the text `target`.
    pub fn symlink(&self, target: &str, n: &str) -> io::Result<()> {
        let n = name(n)?;
        retry(|| nix::unistd::symlinkat(target, self.fd.as_fd(), n))
            .map_err(|e| with_path(e, &self.child(n)))
    }

    /// The text of the link `n` (UTF-8: nothing orchestrate writes has another).
    pub fn read_link(&self, n: &str) -> io::Result<String> {
        let n = name(n)?;
        let t = retry(|| nix::fcntl::readlinkat(self.fd.as_fd(), n))
            .map_err(|e| with_path(e, &self.child(n)))?;
        t.into_string().map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: the link's text is not UTF-8", self.child(n).display()),
            )
        })
    }

    /// A hard link `n` here to `from` in `src`.
    pub fn hard_link_from(&self, src: &Dir, from: &str, n: &str) -> io::Result<()> {
        let (from, n) = (name(from)?, name(n)?);
        retry(|| nix::unistd::linkat(src.fd.as_fd(), from, self.fd.as_fd(), n, AtFlags::empty()))
            .map_err(|e| with_path(e, &self.child(n)))
    }

    /// Set the mode of the file `n` (not through a link).
    pub fn chmod(&self, n: &str, mode: u32) -> io::Result<()> {
        let (f, _) = self.open_file(n)?;
        retry(|| nix::sys::stat::fchmod(f.as_fd(), Mode::from_bits_truncate(mode)))
    }

    /// Set the modification time of the regular file `n` to now.
    pub fn touch(&self, n: &str) -> io::Result<()> {
        let n = name(n)?;
        let now = nix::sys::time::TimeSpec::new(0, libc::UTIME_NOW);
        retry(|| {
            nix::sys::stat::utimensat(
                self.fd.as_fd(),
                n,
                &now,
                &now,
                nix::sys::stat::UtimensatFlags::NoFollowSymlink,
            )
        })
        .map_err(|e| with_path(e, &self.child(n)))
    }

    /// Sync the directory (renames into it are durable).
    pub fn sync(&self) -> io::Result<()> {
        retry(|| nix::unistd::fsync(self.fd.as_fd()))
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A name for a temporary file no other process or thread picks.
pub fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let mut r = [0u8; 6];
    let _ = getrandom::fill(&mut r);
    let hex: String = r.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        ".tmp-{}-{}-{hex}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn with_path(e: io::Error, p: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

fn not_plain(p: &Path, k: Kind) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{} is {}, not a regular file: refused",
            p.display(),
            k.words()
        ),
    )
}

fn too_large(p: &Path, max: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!("{} holds more than {max} bytes: not read", p.display()),
    )
}

/// Why a folder is not private to its user (see [`check_private`]).
#[derive(Debug, thiserror::Error)]
pub enum NotPrivate {
    #[error("{path}: {source}")]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("{0} is not a folder")]
    NotAFolder(PathBuf),
    #[error("{path} is owned by uid {owner}, not by you (uid {me}): another user could plant what it restores; use a folder of your own (--cache DIR)")]
    Foreign { path: PathBuf, owner: u32, me: u32 },
    #[error("{path} is writable by {} (mode {mode:o}): anyone who can write it decides what a reused step produced; chmod go-w it (or chmod 700)", if mode & 0o002 != 0 { "everyone" } else { "its group" })]
    Writable { path: PathBuf, mode: u32 },
    #[error("{parent} (above {path}) is writable by others (mode {mode:o}): they could replace the folder; use a folder whose parents only you and root can write")]
    ParentWritable {
        parent: PathBuf,
        path: PathBuf,
        mode: u32,
    },
    #[error("{parent} (above {path}) is owned by uid {owner}: they could replace the folder; use a folder of your own")]
    ParentForeign {
        parent: PathBuf,
        path: PathBuf,
        owner: u32,
    },
}

impl From<NotPrivate> for io::Error {
    fn from(e: NotPrivate) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
    }
}

/// Why a folder others could use against its owner is refused, as ssh's
/// `StrictModes` and git's `safe.directory` refuse one: `dir` must be owned by the
/// effective user and writable by nobody else, and so must each folder above it up
/// to the first that is owned by root (and writable by nobody else) or sticky (as
/// `/tmp`: others may add names there, not replace this one).
pub fn check_private(dir: &Path) -> Result<(), NotPrivate> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let unreadable = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NotPrivate::Unreadable { path, source }
    };
    let real = dir.canonicalize().map_err(unreadable(dir))?;
    let m = std::fs::metadata(&real).map_err(unreadable(&real))?;
    if !m.is_dir() {
        return Err(NotPrivate::NotAFolder(real));
    }
    if m.uid() != me {
        return Err(NotPrivate::Foreign {
            path: real,
            owner: m.uid(),
            me,
        });
    }
    if m.mode() & 0o022 != 0 {
        return Err(NotPrivate::Writable {
            path: real,
            mode: m.mode() & 0o7777,
        });
    }
    let mut cur = real.parent();
    while let Some(p) = cur {
        let m = std::fs::metadata(p).map_err(unreadable(p))?;
        if m.mode() & 0o1000 != 0 {
            break;
        }
        if m.mode() & 0o022 != 0 {
            return Err(NotPrivate::ParentWritable {
                parent: p.to_path_buf(),
                path: real.clone(),
                mode: m.mode() & 0o7777,
            });
        }
        if m.uid() != me && m.uid() != 0 {
            return Err(NotPrivate::ParentForeign {
                parent: p.to_path_buf(),
                path: real.clone(),
                owner: m.uid(),
            });
        }
        if m.uid() == 0 {
            break;
        }
        cur = p.parent();
    }
    Ok(())
}

/// A delegated cgroup parent as written (`/orchestrate/alice` or `orchestrate/alice`):
/// the path below each hierarchy's root, checked so that it can only name a cgroup
/// below that root.
pub fn cgroup_parent_path(s: &str) -> Result<PathBuf, String> {
    let rel = s.trim_start_matches('/');
    if rel.is_empty() {
        return Err("the root cgroup is not a delegated parent (as root, none is needed)".into());
    }
    let mut out = PathBuf::new();
    for part in rel.trim_end_matches('/').split('/') {
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!(
                "`{s}` is not a cgroup path: each part must be a name (no empty part, `.` or `..`)"
            ));
        }
        if part.len() > 255 || part.chars().any(char::is_control) {
            return Err(format!(
                "`{}` is not a cgroup name (control characters or over 255 bytes)",
                part.escape_debug()
            ));
        }
        out.push(part);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_plain_or_refused() {
        assert!(name("a.json").is_ok());
        for bad in ["", ".", "..", "a/b", "a\0"] {
            assert!(name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(plain_parts("a/b").unwrap(), ["a", "b"]);
        for bad in ["/etc", "a/../b", "a//b", "./a", ""] {
            assert!(plain_parts(bad).is_err(), "{bad:?}");
        }
        assert_eq!(normalize("${work}/../shared").as_deref(), Some("shared"));
        assert_eq!(normalize("a/./b/../c").as_deref(), Some("a/c"));
        assert_eq!(normalize("../x"), None);
        assert_eq!(normalize("/a/../../x"), None);
        assert_eq!(link_inside("sub/l", "../w.bin").as_deref(), Some("w.bin"));
        assert_eq!(link_inside("l", "w.bin").as_deref(), Some("w.bin"));
        assert_eq!(link_inside("l", "../x"), None);
        assert_eq!(link_inside("l", "/etc/passwd"), None);
    }

    #[test]
    fn links_are_never_followed() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let root = t.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        std::os::unix::fs::symlink(t.path(), root.join("dirlink")).unwrap();
        let d = Dir::open(&root).unwrap();
        assert!(d.open_file("link").is_err());
        assert!(d.read("link", 100).is_err());
        assert!(d.sub("dirlink").is_err());
        assert!(d.create("link", 0o600).is_err(), "O_EXCL on a link");
        assert!(d.lock_file("link").is_err());
        d.write_atomic(&d, "link", b"new", 0o600).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        assert_eq!(
            d.read("link", 100).unwrap(),
            b"new",
            "the link was replaced"
        );
        d.remove_tree("dirlink").unwrap();
        assert!(outside.exists(), "removing a link removes the link only");
        assert!(Dir::open(&root.join("dirlink")).is_err());
        // A tree with a link inside: the link goes, not what it names.
        let sub = d.sub_or_make("tree", 0o700).unwrap();
        sub.symlink(t.path().to_str().unwrap(), "up").unwrap();
        sub.create("f", 0o600).unwrap();
        d.remove_tree("tree").unwrap();
        assert!(outside.exists() && root.exists());
        assert_eq!(d.stat("tree").unwrap(), None);
    }

    #[test]
    fn a_folder_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("store");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        check_private(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private(&d).unwrap_err();
        assert!(matches!(e, NotPrivate::Writable { .. }), "{e}");
        assert!(e.to_string().contains("writable by everyone"), "{e}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let sub = d.join("inner");
        std::fs::create_dir(&sub).unwrap();
        std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private(&sub).unwrap_err();
        assert!(matches!(e, NotPrivate::ParentWritable { .. }), "{e}");
        // A sticky parent (as /tmp) ends the walk.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o1777)).unwrap();
        check_private(&sub).unwrap();
    }
}
