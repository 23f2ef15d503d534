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

/// `--chunking` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum ChunkingArg {
    /// Large files chunked on their own, small ones packed: an unchanged
    /// file keeps its chunks from version to version.
    Files,
    /// One stream over all files: the other implementation's images, byte
    /// for byte (with --no-metadata-tree and --no-link-counts).
    Stream,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build <rootfs> into <oci_dir> as <tag>; prints the manifest digest.
    Build {
        /// Directory tree to store.
        rootfs: PathBuf,
        /// OCI directory (created if missing).
        oci_dir: PathBuf,
        /// Tag to point at the new image ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}).
        tag: String,
        /// Build a delta layer on top of this tag.
        #[arg(short, long = "base-layer", value_name = "TAG")]
        base_layer: Option<String>,
        /// zstd-compress the chunks.
        #[arg(short, long)]
        compression: bool,
        /// zstd level with --compression (1-22; 3 matches the other implementation).
        #[arg(short = 'l', long, default_value_t = puzzlefs::build::ZSTD_LEVEL,
              requires = "compression",
              value_parser = clap::value_parser!(i32).range(1..=22))]
        level: i32,
        /// Worker threads [default: number of CPUs].
        #[arg(short, long, value_name = "N",
              value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
        /// How file contents are cut into chunks.
        #[arg(long, value_enum, default_value_t = ChunkingArg::Files)]
        chunking: ChunkingArg,
        /// Do not store the fs-verity Merkle trees of the metadata layers
        /// (the kernel driver then reads and hashes each layer whole at
        /// mount, as for images of the other implementation).
        #[arg(long)]
        no_metadata_tree: bool,
        /// Do not record the link counts in the manifest (a reader then
        /// counts the names of every inode, walking every directory, as for
        /// images of the other implementation).
        #[arg(long)]
        no_link_counts: bool,
    },
    /// Extract image <tag> of <oci_dir> into <dir>.
    Extract {
        /// OCI directory.
        oci_dir: PathBuf,
        /// Tag of the image.
        tag: String,
        /// Destination (created; must be empty if it exists).
        dir: PathBuf,
    },
    /// Show tags, layers, inode and chunk counts, sizes and ratios.
    Inspect {
        /// OCI directory.
        oci_dir: PathBuf,
        /// Only this tag (default: every tag).
        tag: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remove the blobs of <oci_dir> that no tag reaches.
    Gc {
        /// OCI directory.
        oci_dir: PathBuf,
        /// Only report what would be removed.
        #[arg(short = 'n', long)]
        dry_run: bool,
    },
    /// Mount image <tag> of <oci_dir> on <mnt> with the kernel driver.
    Mount {
        /// OCI directory.
        oci_dir: PathBuf,
        /// Tag of the image.
        tag: String,
        /// Mount point.
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
            chunking,
            no_metadata_tree,
            no_link_counts,
        } => {
            let opts = BuildOptions {
                base: base_layer,
                compression,
                zstd_level: level,
                threads: jobs.map_or(0, usize::from),
                chunking: match chunking {
                    ChunkingArg::Files => puzzlefs::build::Chunking::Files,
                    ChunkingArg::Stream => puzzlefs::build::Chunking::Stream,
                },
                metadata_trees: !no_metadata_tree,
                link_counts: !no_link_counts,
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
            out_line(&hex::encode(out.digest))?;
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
                out_line(&serde_json::to_string_pretty(&r)?)?;
            } else {
                out(&puzzlefs::inspect::render(&r))?;
            }
        }
        Cmd::Gc { oci_dir, dry_run } => {
            let s = puzzlefs::gc::gc(&oci_dir, dry_run, &progress)?;
            progress.info(&format!(
                "{} {} unreachable blobs ({} bytes), kept {}",
                if dry_run { "would remove" } else { "removed" },
                s.unreachable,
                s.unreachable_bytes,
                s.kept
            ));
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
                out_line(&format!(
                    "mount -t {} -o ro,{} {} {}",
                    a.fstype,
                    a.data,
                    a.source,
                    mnt.display()
                ))?;
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

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn out(s: &str) -> Result<()> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    match o.write_all(s.as_bytes()).and_then(|()| o.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn out_line(s: &str) -> Result<()> {
    out(&format!("{s}\n"))
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
