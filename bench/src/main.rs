fn main() {
    eprintln!("kafluss-bench: not yet implemented");
    std::process::exit(2);
}
