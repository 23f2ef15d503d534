// SPDX-License-Identifier: GPL-2.0

//! File system contexts: the mount configuration (new mount API).
//!
//! C header: [`include/linux/fs_context.h`](srctree/include/linux/fs_context.h)

use crate::bindings;
use crate::c_str;
use crate::prelude::*;
use crate::str::CString;
use crate::types::Opaque;
use core::{fmt, ptr};

/// One entry of a file system's parameter table (`struct fs_parameter_spec`), as the C
/// `fsparam_*` macros make them. `opt` is the number [`Parsed::opt`] gives back for it.
#[repr(transparent)]
pub struct ParamSpec(bindings::fs_parameter_spec);

impl ParamSpec {
    const fn new(
        name: &'static CStr,
        opt: u8,
        kind: bindings::fs_param_type,
        data: *const core::ffi::c_void,
    ) -> Self {
        Self(bindings::fs_parameter_spec {
            name: name.as_char_ptr(),
            type_: kind,
            opt,
            flags: 0,
            data,
        })
    }

    /// A parameter with a non-empty string value (`fsparam_string`).
    pub const fn string(name: &'static CStr, opt: u8) -> Self {
        Self::new(name, opt, Some(bindings::fs_param_is_string), ptr::null())
    }

    /// A parameter whose value is one of the names of `values` (`fsparam_enum`);
    /// [`Parsed::enum_value`] is the number given with that name.
    pub const fn enumerated<const N: usize>(
        name: &'static CStr,
        opt: u8,
        values: &'static EnumValues<N>,
    ) -> Self {
        Self::new(
            name,
            opt,
            Some(bindings::fs_param_is_enum),
            (values as *const EnumValues<N>).cast(),
        )
    }
}

/// The values of an enumerated parameter (a `struct constant_table` array and its terminator).
#[repr(C)]
pub struct EnumValues<const N: usize> {
    values: [bindings::constant_table; N],
    end: bindings::constant_table,
}

impl<const N: usize> EnumValues<N> {
    /// Makes the table of `(name, number)` pairs.
    pub const fn new(values: [(&'static CStr, u32); N]) -> Self {
        const END: bindings::constant_table = bindings::constant_table {
            name: ptr::null(),
            value: 0,
        };
        let mut table = [END; N];
        let mut i = 0;
        while i < N {
            table[i].name = values[i].0.as_char_ptr();
            table[i].value = values[i].1 as _;
            i += 1;
        }
        Self {
            values: table,
            end: END,
        }
    }
}

/// A file system's parameter table: `N` entries and the terminator `fs_parse()` stops at.
#[repr(C)]
pub struct ParamTable<const N: usize> {
    specs: [ParamSpec; N],
    end: bindings::fs_parameter_spec,
}

impl<const N: usize> ParamTable<N> {
    /// Makes the table.
    pub const fn new(specs: [ParamSpec; N]) -> Self {
        Self {
            specs,
            end: bindings::fs_parameter_spec {
                name: ptr::null(),
                type_: None,
                opt: 0,
                flags: 0,
                data: ptr::null(),
            },
        }
    }

    /// The table as [`FileSystem::PARAMS`](super::FileSystem::PARAMS) takes it.
    pub const fn params(&'static self) -> ParamTableRef {
        ParamTableRef((self as *const Self).cast())
    }
}

/// A terminated parameter table that lives for ever (made by [`ParamTable::params`]).
///
/// # Invariants
///
/// The pointer is to the first entry of a `ParamTable`, whose strings and enumerated values
/// are `'static`.
#[derive(Clone, Copy)]
pub struct ParamTableRef(*const bindings::fs_parameter_spec);

impl ParamTableRef {
    pub(crate) fn as_ptr(self) -> *const bindings::fs_parameter_spec {
        self.0
    }
}

/// A mount parameter the VFS matched against the file system's table (`fs_parse()`).
///
/// The parser has checked it against its entry: a string parameter has a non-empty string
/// value, an enumerated one one of the names of its table.
pub struct Parsed<'a> {
    pub(crate) opt: u8,
    pub(crate) string: Option<&'a CStr>,
    pub(crate) enum_value: u32,
}

impl<'a> Parsed<'a> {
    /// The `opt` number of the table entry the parameter matched.
    pub fn opt(&self) -> u8 {
        self.opt
    }

    /// The value of a string parameter.
    pub fn string(&self) -> Option<&'a CStr> {
        self.string
    }

    /// The number of the name given to an enumerated parameter.
    pub fn enum_value(&self) -> u32 {
        self.enum_value
    }
}

/// A file system context (`struct fs_context`) being configured or used to mount.
///
/// # Invariants
///
/// The wrapped context is valid for the lifetime of the reference.
#[repr(transparent)]
pub struct FsContext(Opaque<bindings::fs_context>);

impl FsContext {
    /// Creates a reference from a raw pointer.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `fs_context` that outlives `'a`.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::fs_context) -> &'a Self {
        // SAFETY: `FsContext` is a transparent wrapper; validity is guaranteed by the caller.
        unsafe { &*ptr.cast() }
    }

    /// Reports a mount error.
    ///
    /// The message goes to the context's log, where `mount` (through `fsopen`/`fsconfig`) reads
    /// and prints it, and to the kernel log, so that `dmesg` keeps it in all cases.
    pub fn error(&self, args: fmt::Arguments<'_>) {
        let Ok(msg) = CString::try_from_fmt(args) else {
            pr_err!("{}\n", args);
            return;
        };
        // SAFETY: `self.0` is valid by the type invariant; `log` is its message log, or null.
        let (log, fs_name) = unsafe {
            let fc = self.0.get();
            ((*fc).log.log, CStr::from_char_ptr((*(*fc).fs_type).name))
        };
        if log.is_null() {
            // `logfc` prints to the kernel log itself when there is no log.
        } else {
            pr_err!("{}: {}\n", fs_name, &*msg);
        }
        // SAFETY: `log` is the context's (possibly null) log; the format string takes exactly
        // one string argument, `msg`, which is NUL-terminated.
        unsafe {
            bindings::logfc(
                log,
                (*(*self.0.get()).fs_type).name,
                b'e' as _,
                c_str!("%s").as_char_ptr(),
                msg.as_char_ptr(),
            )
        };
    }
}
