//! The `puzzlefs` command.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use puzzlefs::build::{build, BuildOptions};
use puzzlefs::progress::{Progress, Verbosity};

#[derive(Parser)]
#[command(
    name = "puzzlefs",
    version,
    about = "Build, extract, inspect and mount PuzzleFS images"
)]
struct Cli {
    /// Print errors only.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
    /// Print details and warnings.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build <rootfs> into <oci_dir> as <tag>; prints the manifest digest.
    Build {
        rootfs: PathBuf,
        oci_dir: PathBuf,
        tag: String,
        /// Build a delta layer on top of this tag.
        #[arg(short, long = "base-layer", value_name = "TAG")]
        base_layer: Option<String>,
        /// zstd-compress the chunks.
        #[arg(short, long)]
        compression: bool,
        /// zstd level with --compression (1-22; 3 matches the other implementation).
        #[arg(short = 'l', long, default_value_t = puzzlefs::build::ZSTD_LEVEL,
              value_parser = clap::value_parser!(i32).range(1..=22))]
        level: i32,
        /// Worker threads (default: one per CPU).
        #[arg(short, long, default_value_t = 0)]
        jobs: usize,
    },
    /// Extract image <tag> of <oci_dir> into <dir>.
    Extract {
        oci_dir: PathBuf,
        tag: String,
        dir: PathBuf,
    },
    /// Show tags, layers, inode and chunk counts, sizes and ratios.
    Inspect {
        oci_dir: PathBuf,
        tag: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Mount image <tag> of <oci_dir> on <mnt> with the kernel driver.
    Mount {
        oci_dir: PathBuf,
        tag: String,
        mnt: PathBuf,
        /// Print the mount(2) arguments instead of mounting.
        #[arg(short = 'n', long)]
        dry_run: bool,
        /// Check chunk blobs' fs-verity digests (the driver's verity= option).
        #[arg(long, value_enum, default_value_t)]
        verity: puzzlefs::mount::Verity,
    },
    /// Enable fs-verity on every blob of image <tag> and check each digest.
    EnableFsVerity { oci_dir: PathBuf, tag: String },
}

fn run(cli: Cli) -> Result<()> {
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else if cli.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let progress = Progress::new(verbosity);
    match cli.cmd {
        Cmd::Build {
            rootfs,
            oci_dir,
            tag,
            base_layer,
            compression,
            level,
            jobs,
        } => {
            let opts = BuildOptions {
                base: base_layer,
                compression,
                zstd_level: level,
                threads: jobs,
                progress: progress.clone(),
            };
            let out = build(&rootfs, &oci_dir, &tag, &opts)?;
            let s = &out.stats;
            progress.detail(&format!(
                "{} inodes ({} in the new layer), {} bytes in {} chunks ({} files repeat another), {} new chunks ({} bytes)",
                s.inodes,
                s.layer_inodes,
                s.logical_bytes,
                s.chunks,
                s.same_files,
                s.new_chunks,
                s.new_chunk_bytes
            ));
            println!("{}", hex::encode(out.digest));
        }
        Cmd::Extract { oci_dir, tag, dir } => {
            let s = puzzlefs::extract::extract(&oci_dir, &tag, &dir, &progress)?;
            progress.detail(&format!(
                "{} paths, {} bytes, {} skipped",
                s.paths, s.bytes, s.skipped
            ));
        }
        Cmd::Inspect { oci_dir, tag, json } => {
            let r = puzzlefs::inspect::inspect(&oci_dir, tag.as_deref())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print!("{}", puzzlefs::inspect::render(&r));
            }
        }
        Cmd::Mount {
            oci_dir,
            tag,
            mnt,
            dry_run,
            verity,
        } => {
            if dry_run {
                let a = puzzlefs::mount::mount_args(&oci_dir, &tag, verity)?;
                println!(
                    "mount -t {} -o ro,{} {} {}",
                    a.fstype,
                    a.data,
                    a.source,
                    mnt.display()
                );
            } else {
                puzzlefs::mount::mount(&oci_dir, &tag, &mnt, verity)?;
            }
        }
        Cmd::EnableFsVerity { oci_dir, tag } => {
            let s = puzzlefs::enable_verity::enable_fs_verity(&oci_dir, &tag)?;
            progress.detail(&format!(
                "fs-verity enabled on {} blobs, already on {}; every digest matches",
                s.enabled, s.already
            ));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("puzzlefs: {e:#}");
            ExitCode::FAILURE
        }
    }
}
