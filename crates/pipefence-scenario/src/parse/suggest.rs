//! "Did you mean" suggestions for misspelled names: the closest known name, when it is close
//! enough to be a typo (an edit distance of at most a third of the name's length, at least 1, as
//! rustc does; or a different case), else nothing.

/// The known name closest to `word`, when close enough to be what was meant.
pub(super) fn closest<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(1);
    let lower = word.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for k in known {
        if k == word {
            continue;
        }
        let d = if k.to_lowercase() == lower {
            0
        } else {
            strsim::damerau_levenshtein(word, k)
        };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, k));
        }
    }
    best.map(|(_, k)| k)
}

/// `; did you mean `NAME`?` for the closest known name, or nothing.
pub(super) fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, known)
        .map(|k| format!("; did you mean `{k}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn close_names_are_suggested_far_ones_are_not() {
        let props = ["value", "flush", "mask", "reference"];
        assert_eq!(closest("valeu", props), Some("value"));
        assert_eq!(closest("Value", props), Some("value"));
        assert_eq!(closest("refrence", props), Some("reference"));
        assert_eq!(closest("groups", props), None);
        assert_eq!(closest("x", ["y", "value"]), Some("y"));
        assert_eq!(closest("zz", ["value"]), None);
        assert_eq!(closest("value", props), None);
    }
}
