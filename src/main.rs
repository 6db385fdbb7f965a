//! The `sharestream` command: the standalone broker and tools.

use clap::{Parser, Subcommand};

/// Huge allocations announced by hostile frames must not abort the broker
/// (see `sharestream::alloc`).
#[global_allocator]
static GLOBAL: sharestream::alloc::GuardedAlloc = sharestream::alloc::GuardedAlloc::new();

/// sharestream: exactly-once stream processing over Kafka share groups.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the API keys and versions this build can encode and decode.
    Apis,
}

fn main() {
    let cli = Cli::parse();
    match cli.command {
        Command::Apis => {
            for key in 0..=i16::MAX {
                if let Some(v) = sharestream::protocol::api::codec_versions(key) {
                    println!(
                        "{key:>3} {:<40} v{}..=v{}",
                        sharestream::protocol::api::api_name(key),
                        v.min,
                        v.max
                    );
                }
                if key > 200 {
                    break;
                }
            }
        }
    }
}
