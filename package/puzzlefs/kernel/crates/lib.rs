//! Empty: this package only pins the kernel's third-party crates (see Cargo.toml).
