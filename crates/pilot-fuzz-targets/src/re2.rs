//! Regular expressions: `pilot_re2` as routing rules' validation calls it.

/// RE2's verdict on `data` (UTF-8) as a pattern; the program size and
/// the verdict agree.
pub(crate) fn re2_parse(data: &[u8]) {
    let Ok(pattern) = std::str::from_utf8(data) else {
        return;
    };
    let size = pilot_re2::regex_program_size(pattern);
    let verdict = pilot_re2::check_regex(pattern);
    match (&size, &verdict) {
        (Ok(size), Ok(())) => assert!(
            *size <= pilot_re2::MAX_PROGRAM_SIZE,
            "{pattern:?} is accepted with a program of {size}"
        ),
        (Ok(size), Err(_)) => assert!(
            *size > pilot_re2::MAX_PROGRAM_SIZE,
            "{pattern:?} is refused with a program of {size}: {verdict:?}"
        ),
        (Err(reason), Err(refused)) => assert!(
            reason == refused,
            "{pattern:?}: two reasons, {reason:?} and {refused:?}"
        ),
        (Err(reason), Ok(())) => panic!("{pattern:?} is accepted but has no size: {reason}"),
    }
}
