//! Text for people: names cut to a width, columns padded (the tree, error messages naming
//! hostile keys). Imports nothing of the crate.

/// `text` cut to `max` characters, `…` marking the cut (a record's base64 fill value, a
/// hostile 100,000-character name).
pub fn short(text: &str, max: usize) -> String {
    if text.chars().nth(max).is_none() {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` followed by spaces up to `width` characters (the formatter's `{:<w$}` panics for
/// widths over 65,535).
pub fn push_padded(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    let n = text.chars().count();
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(n)));
}
