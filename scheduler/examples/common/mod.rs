//! What the examples share (`mod common;` in each): their command-line numbers read whole or
//! refused, and a failure that ends an example with its reason and status 2 rather than a
//! panic's backtrace. Each example uses part of it.
#![allow(dead_code)]

use std::fmt::Display;

/// Ends the example: `example: what` on stderr, status 2.
pub fn fail(example: &str, what: impl Display) -> ! {
    eprintln!("{example}: {what}");
    std::process::exit(2);
}

/// `text` as a whole number of at least `min`, or why not, naming `name`.
pub fn parse_count(text: &str, name: &str, min: usize) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        _ => Err(format!("{name} must be a whole number of at least {min}, got {text:?}")),
    }
}

/// The `i`-th argument after the program's name as [`parse_count`] reads it, or `default`
/// where there is none; anything else ends the example.
pub fn count(example: &str, args: &[String], i: usize, name: &str, default: usize, min: usize) -> usize {
    args.get(i).map_or(default, |text| parse_count(text, name, min).unwrap_or_else(|why| fail(example, why)))
}

/// The arguments after the program's name; more than `most` ends the example.
pub fn arguments(example: &str, most: usize) -> Vec<String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() > most {
        fail(example, format!("at most {most} arguments, got {}: {:?}", args.len(), &args[most..]));
    }
    args
}

/// A result the example cannot go on without: its value, or the example ends with the error.
pub trait OrFail<T> {
    /// The value, or `example: what: error` and status 2.
    fn or_fail(self, example: &str, what: &str) -> T;
}

impl<T, E: Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, example: &str, what: &str) -> T {
        self.unwrap_or_else(|e| fail(example, format!("{what}: {e}")))
    }
}

/// The error an example's `main` returns: shown by its message (`Error: unknown executor
/// "omp"; expected one of …`), where a plain `Box<dyn Error>` shows its debug form
/// (`Error: UnknownExecutor { name: "omp" }`).
pub struct Failure(Box<dyn std::error::Error>);

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        Display::fmt(&self.0, f)
    }
}

impl<E: Into<Box<dyn std::error::Error>>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.into())
    }
}
