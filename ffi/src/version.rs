//! The library's version, for a program to print beside its results or to compare with the
//! header's `PBS_VERSION_STRING` (a header and a library of different versions).

use std::ffi::{c_char, CStr};

/// This crate's version, NUL-terminated.
const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(version) => version,
    Err(_) => panic!("a crate version holds no NUL"),
};

/// The library's version, "MAJOR.MINOR.PATCH": a static string.
#[no_mangle]
pub extern "C" fn pbs_version() -> *const c_char {
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME value` in the header.
    fn defined(header: &str, name: &str) -> String {
        let prefix = format!("#define {name} ");
        let line = header.lines().find_map(|l| l.strip_prefix(&prefix));
        line.unwrap_or_else(|| panic!("pbs.h defines no {name}")).trim().to_string()
    }

    #[test]
    fn the_header_the_library_and_the_crate_name_one_version() {
        let header = include_str!("../include/pbs.h");
        // SAFETY: pbs_version returns a pointer to a static NUL-terminated string.
        let library = unsafe { CStr::from_ptr(pbs_version()) }.to_str().unwrap();
        assert_eq!(library, env!("CARGO_PKG_VERSION"));
        assert_eq!(defined(header, "PBS_VERSION_STRING"), format!("\"{library}\""));
        let parts: Vec<&str> = library.split('.').collect();
        assert_eq!(parts.len(), 3, "{library}");
        for (part, name) in parts.iter().zip(["PBS_VERSION_MAJOR", "PBS_VERSION_MINOR", "PBS_VERSION_PATCH"]) {
            assert_eq!(&defined(header, name), part, "{name}");
        }
        // The Fortran module's parameters say the same.
        let module = include_str!("../include/pbs.f90");
        assert!(module.contains(&format!("PBS_VERSION_STRING = '{library}'")), "pbs.f90's version string");
        let numbers = format!(
            "PBS_VERSION_MAJOR = {}, PBS_VERSION_MINOR = {}, PBS_VERSION_PATCH = {}",
            parts[0], parts[1], parts[2]
        );
        assert!(module.contains(&numbers), "pbs.f90's version numbers");
    }
}
