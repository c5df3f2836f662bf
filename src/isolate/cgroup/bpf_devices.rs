//! Device access on cgroup v2, which has no `devices.allow`: a
//! `BPF_PROG_TYPE_CGROUP_DEVICE` program attached to the attempt's cgroup that allows
//! the listed nodes and refuses every other (what systemd, runc and crun attach).
//! The program is a few instructions, assembled here as runc's `devicefilter` does,
//! so no BPF toolchain or crate is on the build path.
//!
//! For each rule: compare the device type, major and minor of the access with the
//! rule's and return 1 (allow) on a match; after the last rule return 0 (refuse).
//! Attached with `BPF_F_ALLOW_MULTI`: programs above ours (a container's, systemd's)
//! still run, and every one must allow an access, so a step cannot widen the list
//! by attaching a program of its own.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;
/// `access_type` holds the device type in its low 16 bits.
const DEV_BLOCK: i32 = 1;
const DEV_CHAR: i32 = 2;

/// One device a program allows (every access: read, write, mknod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceId {
    pub block: bool,
    pub major: u32,
    pub minor: u32,
}

impl DeviceId {
    /// The node's type and numbers, from stat; None for anything but a device.
    pub(crate) fn of(node: &Path) -> Option<DeviceId> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let md = std::fs::metadata(node).ok()?;
        let block = md.file_type().is_block_device();
        if !block && !md.file_type().is_char_device() {
            return None;
        }
        Some(DeviceId {
            block,
            major: libc::major(md.rdev()),
            minor: libc::minor(md.rdev()),
        })
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    /// dst in the low nibble, src in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

const LDX_MEM_W: u8 = 0x61;
const ALU32_AND_K: u8 = 0x54;
const JMP_JNE_K: u8 = 0x55;
const ALU64_MOV_K: u8 = 0xb7;
const JMP_EXIT: u8 = 0x95;

/// The program for `allowed`.
fn program(allowed: &[DeviceId]) -> Vec<Insn> {
    let mut p = vec![
        // r2 = ctx->access_type & 0xffff (the device type), r3 = major, r4 = minor.
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 3, 1, 4, 0),
        insn(LDX_MEM_W, 4, 1, 8, 0),
    ];
    for d in allowed {
        let kind = if d.block { DEV_BLOCK } else { DEV_CHAR };
        // On a mismatch, jump over the rest of this rule (offsets count from the next
        // instruction).
        p.push(insn(JMP_JNE_K, 2, 0, 4, kind));
        p.push(insn(JMP_JNE_K, 3, 0, 3, d.major as i32));
        p.push(insn(JMP_JNE_K, 4, 0, 2, d.minor as i32));
        p.push(insn(ALU64_MOV_K, 0, 0, 0, 1));
        p.push(insn(JMP_EXIT, 0, 0, 0, 0));
    }
    p.push(insn(ALU64_MOV_K, 0, 0, 0, 0));
    p.push(insn(JMP_EXIT, 0, 0, 0, 0));
    p
}

/// `union bpf_attr` as `BPF_PROG_LOAD` reads it, up to `expected_attach_type`.
#[repr(C)]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` as `BPF_PROG_ATTACH` reads it.
#[repr(C)]
#[derive(Default)]
struct AttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, initialised bpf_attr prefix of the size passed; the
    // kernel reads (and for PROG_LOAD's log, writes) only within it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Load the program for `allowed` and attach it to the cgroup `dir`. The cgroup keeps
/// the program; it goes with the cgroup.
pub(crate) fn restrict(dir: &Path, allowed: &[DeviceId]) -> io::Result<()> {
    let insns = program(allowed);
    let license = c"Apache-2.0";
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"orchestrate");
    let mut load = LoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..LoadAttr::default()
    };
    let prog = bpf(BPF_PROG_LOAD, &mut load)?;
    // SAFETY: PROG_LOAD returned a new descriptor that nothing else owns.
    let prog = unsafe { OwnedFd::from_raw_fd(prog as i32) };
    let cgroup = std::fs::File::open(dir)?;
    let mut attach = AttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        ..AttachAttr::default()
    };
    bpf(BPF_PROG_ATTACH, &mut attach)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_is_five_instructions_and_the_jumps_land_on_the_next_rule() {
        let d = |major, minor| DeviceId {
            block: false,
            major,
            minor,
        };
        let p = program(&[d(1, 3), d(1, 5)]);
        assert_eq!(p.len(), 4 + 2 * 5 + 2);
        // The first compare of rule one skips to the first compare of rule two.
        let (at, off) = (4, p[4].off as usize);
        assert_eq!(p[at + 1 + off].code, JMP_JNE_K);
        assert_eq!(p[at + 1 + off].imm, DEV_CHAR);
        assert_eq!((p[5].imm, p[6].imm), (1, 3));
        // After the last rule: refuse.
        assert_eq!(
            (p[14].code, p[14].imm, p[15].code),
            (ALU64_MOV_K, 0, JMP_EXIT)
        );
        assert_eq!(
            DeviceId::of(Path::new("/dev/null")),
            Some(d(1, 3)),
            "/dev/null is c 1:3"
        );
        assert_eq!(DeviceId::of(Path::new("/etc/hostname")), None);
    }
}
