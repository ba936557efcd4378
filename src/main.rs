//! The `csi-conform` binary: a thin shell over the library's [`csi_conform::cli`].

fn main() -> std::process::ExitCode {
    csi_conform::cli::main()
}
