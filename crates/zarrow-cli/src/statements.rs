//! Splitting SQL text into statements and backslash commands, with the line each starts on.
//!
//! `;` ends a statement except inside quotes (`'…'`, `"…"`, `` `…` ``) and comments (`-- …`,
//! `/* … */`, nested); a `\` at the start of a statement begins a command that runs to the end of
//! its line or to a `;` (`\d`, `\q`). One-shot SQL, files, standard input and the shell all go through
//! [`split`]; the shell also asks it whether what was typed so far is complete.

/// One statement or command of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Piece {
    /// The line (from 1) of its first character.
    pub(crate) line: usize,
    /// The statement without its `;`, or the command without its `\`.
    pub(crate) text: String,
    /// A backslash command, not SQL.
    pub(crate) command: bool,
}

/// A text split into pieces.
#[derive(Debug, Default)]
pub(crate) struct Split {
    /// The statements ended by `;` and the commands, in order.
    pub(crate) pieces: Vec<Piece>,
    /// A statement not ended by `;` (one-shot SQL and files run it too; the shell waits for
    /// more lines).
    pub(crate) rest: Option<Piece>,
}

impl Split {
    /// Every piece, the unterminated rest last.
    pub(crate) fn all(self) -> Vec<Piece> {
        let mut pieces = self.pieces;
        pieces.extend(self.rest);
        pieces
    }

    /// Nothing is left open: no statement is waiting for its `;`.
    pub(crate) fn is_complete(&self) -> bool {
        self.rest.is_none()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    Quoted(char),
    LineComment,
    /// Inside `/* */`, nested this deep.
    Block(usize),
}

/// Split `text` (see the module documentation).
pub(crate) fn split(text: &str) -> Split {
    let mut out = Split::default();
    let mut state = State::Normal;
    let mut line = 1;
    // The current statement's first byte and line, once it has something besides comments.
    let mut start: Option<(usize, usize)> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        match state {
            State::Quoted(q) => {
                if c == q {
                    state = State::Normal;
                }
            }
            State::LineComment => {
                if c == '\n' {
                    state = State::Normal;
                }
            }
            State::Block(depth) => {
                if c == '*' && next == Some('/') {
                    chars.next();
                    state = if depth == 1 {
                        State::Normal
                    } else {
                        State::Block(depth - 1)
                    };
                } else if c == '/' && next == Some('*') {
                    chars.next();
                    state = State::Block(depth + 1);
                }
            }
            State::Normal => match c {
                '-' if next == Some('-') => state = State::LineComment,
                '/' if next == Some('*') => {
                    chars.next();
                    state = State::Block(1);
                }
                ';' => {
                    if let Some((s, l)) = start.take() {
                        out.pieces.push(Piece {
                            line: l,
                            text: text[s..i].trim().to_string(),
                            command: false,
                        });
                    }
                }
                '\\' if start.is_none() => {
                    let end = text[i..].find(['\n', ';']).map_or(text.len(), |n| i + n);
                    out.pieces.push(Piece {
                        line,
                        text: text[i + 1..end].trim().to_string(),
                        command: true,
                    });
                    // the `;` too, not the line break (it counts a line)
                    while chars
                        .peek()
                        .is_some_and(|&(j, c)| j < end || (j == end && c == ';'))
                    {
                        chars.next();
                    }
                }
                c if c.is_whitespace() => {}
                c => {
                    if start.is_none() {
                        start = Some((i, line));
                    }
                    if matches!(c, '\'' | '"' | '`') {
                        state = State::Quoted(c);
                    }
                }
            },
        }
        if c == '\n' {
            line += 1;
        }
    }
    let open = matches!(state, State::Quoted(_) | State::Block(_));
    out.rest = match start {
        Some((s, l)) => Some(Piece {
            line: l,
            text: text[s..].trim().to_string(),
            command: false,
        }),
        // only an unclosed comment: still waiting for its end
        None if open => Some(Piece {
            line,
            text: String::new(),
            command: false,
        }),
        None => None,
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<(usize, String, bool)> {
        split(s)
            .all()
            .into_iter()
            .map(|p| (p.line, p.text, p.command))
            .collect()
    }

    #[test]
    fn statements_lines_and_commands() {
        let sql = "SELECT 1;\n\n-- a comment; not a statement\nSELECT ';' AS \"a;b\"\n  FROM t; /* x; /* nested; */ y; */\n\\d obs\nSELECT\n 2";
        assert_eq!(
            texts(sql),
            vec![
                (1, "SELECT 1".to_string(), false),
                (4, "SELECT ';' AS \"a;b\"\n  FROM t".to_string(), false),
                (6, "d obs".to_string(), true),
                (7, "SELECT\n 2".to_string(), false),
            ]
        );
        // doubled quotes stay inside the string
        assert_eq!(
            texts("SELECT 'it''s;'; SELECT 2;"),
            vec![
                (1, "SELECT 'it''s;'".to_string(), false),
                (1, "SELECT 2".to_string(), false)
            ]
        );
        assert_eq!(texts("\\q;"), vec![(1, "q".to_string(), true)]);
        assert_eq!(
            texts("\\d; \\d obs ;SELECT 1"),
            vec![
                (1, "d".to_string(), true),
                (1, "d obs".to_string(), true),
                (1, "SELECT 1".to_string(), false)
            ]
        );
        // a backslash inside a statement is not a command
        assert_eq!(texts("SELECT 1 \\ 2;").len(), 1);
    }

    #[test]
    fn completeness() {
        assert!(split("SELECT 1;").is_complete());
        assert!(split("SELECT 1; -- done").is_complete());
        assert!(split("  \n").is_complete());
        assert!(split("\\d").is_complete());
        assert!(!split("SELECT 1").is_complete());
        assert!(!split("SELECT ';").is_complete());
        assert!(!split("SELECT 1; /* ;").is_complete());
        assert!(!split("SELECT 1;\nSELECT\n2").is_complete());
    }
}
