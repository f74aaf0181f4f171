//! What the hand-drawn SVG charts (`mttdl::plot`, `timed::report`) share:
//! text escaped for an element's content. Labels and titles go between tags,
//! never into attribute values, so `&`, `<` and `>` are all that need it.

/// `text` with `&`, `<` and `>` as entities.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_once_and_keeps_the_rest() {
        assert_eq!(escape("a & <b> &amp; \"q\" é"), "a &amp; &lt;b&gt; &amp;amp; \"q\" é");
        assert_eq!(escape(""), "");
    }
}
