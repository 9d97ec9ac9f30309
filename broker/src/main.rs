fn main() {
    eprintln!("kafluss: not yet implemented");
    std::process::exit(2);
}
