//! The smallest agent there is, for the lean benchmark: prints the file named by its first
//! argument to stdout and exits.

use std::io::Write;

fn main() {
    let path = std::env::args().nth(1).expect("usage: print_log FILE");
    let mut file = std::fs::File::open(path).expect("the log opens");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    std::io::copy(&mut file, &mut out).expect("the log prints");
    out.flush().expect("the log prints");
}
