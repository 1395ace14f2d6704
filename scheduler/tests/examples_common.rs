//! The examples' shared reading of their command lines (`examples/common/`): a number is read
//! whole or refused with its name, and an example's error is shown by its message.

#[path = "../examples/common/mod.rs"]
mod common;

#[test]
fn a_count_is_read_whole_or_refused_by_name() {
    assert_eq!(common::parse_count("16", "threads", 1), Ok(16));
    assert_eq!(common::parse_count("0", "rounds", 0), Ok(0));
    for bad in ["two", "0", "8x", "-5", "", " 3", "99999999999999999999999"] {
        let why = common::parse_count(bad, "threads", 1).unwrap_err();
        assert_eq!(why, format!("threads must be a whole number of at least 1, got {bad:?}"));
    }
}

#[test]
fn an_examples_error_is_shown_by_its_message() {
    let failure: common::Failure = pbs_scheduler::Error::UnknownExecutor { name: "omp".into() }.into();
    let shown = format!("{failure:?}");
    assert!(shown.starts_with("unknown executor \"omp\"; expected one of pbs,"), "{shown}");
}
