//! Finds METIS (Debian's `libmetis-dev`): where `metis.h` is found, links `libmetis` and tells
//! the crate the widths of METIS's `idx_t` and `real_t`, which the header fixes at build time.
//! Where it is not found the crate still builds and the METIS methods say so when called.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=METIS_DIR");
    let dirs: Vec<PathBuf> = match std::env::var_os("METIS_DIR") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![PathBuf::from("/usr"), PathBuf::from("/usr/local")],
    };
    for dir in dirs {
        let header = dir.join("include").join("metis.h");
        println!("cargo:rerun-if-changed={}", header.display());
        let Ok(text) = std::fs::read_to_string(&header) else { continue };
        let width = |name: &str| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("#define")?.trim().strip_prefix(name)?.trim().parse::<u32>().ok())
        };
        println!("cargo:rustc-cfg=pbs_metis");
        if width("IDXTYPEWIDTH") == Some(64) {
            println!("cargo:rustc-cfg=pbs_metis_idx64");
        }
        if width("REALTYPEWIDTH") == Some(64) {
            println!("cargo:rustc-cfg=pbs_metis_real64");
        }
        if dir != std::path::Path::new("/usr") {
            println!("cargo:rustc-link-search=native={}", dir.join("lib").display());
        }
        // GKlib's signal trapping, replaced (src/metis_signals.c says why);
        // before libmetis on the link line, which its references to GKlib resolve against.
        println!("cargo:rerun-if-changed=src/metis_signals.c");
        cc::Build::new().file("src/metis_signals.c").warnings(true).compile("pbs_metis_signals");
        println!("cargo:rustc-link-lib=dylib=metis");
        return;
    }
    println!("cargo:warning=METIS not found (no metis.h under METIS_DIR, /usr or /usr/local): the metis-* methods will report it; install libmetis-dev and rebuild");
}
