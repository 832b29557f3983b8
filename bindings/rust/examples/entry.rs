//! One password through the crate, from the command line: how scripts/test-rust checks that
//! Python, Rust and Swift read each other's passwords on one device, and how scripts/bench-rust
//! times a `get` against the same Swift call.
//!
//!   entry APP get SERVICE ACCOUNT            prints the password
//!   entry APP set SERVICE ACCOUNT            the password on stdin (one line)
//!   entry APP bench SERVICE ACCOUNT ROUNDS   prints the median get, in microseconds

use keepsake::Keepsake;
use std::io::BufRead;
use std::process::exit;
use std::time::Instant;

fn main() {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let [app, verb, service, account, rest @ ..] = arguments.as_slice() else {
        eprintln!("usage: entry APP get|set|bench SERVICE ACCOUNT [ROUNDS]");
        exit(2);
    };
    let keepsake = Keepsake::open(app, None).unwrap_or_else(|error| {
        eprintln!("entry: {error}");
        exit(1)
    });
    let entry = keepsake.entry(service, account);
    let result = match (verb.as_str(), rest) {
        ("get", []) => entry.get_password().map(|password| println!("{}", password.expose())),
        ("set", []) => {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).expect("stdin");
            entry.set_password(line.trim_end_matches('\n'))
        }
        ("bench", [rounds]) => {
            let rounds: usize = rounds.parse().expect("ROUNDS is a number");
            entry.get_secret().map(|_| {
                let mut times: Vec<f64> = (0..rounds)
                    .map(|_| {
                        let start = Instant::now();
                        entry.get_secret().expect("get");
                        start.elapsed().as_secs_f64() * 1e6
                    })
                    .collect();
                times.sort_by(|a, b| a.partial_cmp(b).unwrap());
                println!("{:.1}", times[times.len() / 2]);
            })
        }
        _ => {
            eprintln!("usage: entry APP get|set|bench SERVICE ACCOUNT [ROUNDS]");
            exit(2)
        }
    };
    if let Err(error) = result {
        eprintln!("entry: {error}");
        exit(1);
    }
}
