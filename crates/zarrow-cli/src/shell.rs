//! The interactive SQL shell of `zarrow sql` (no query, standard input a terminal): a rustyline
//! editor whose input ends at a `;` outside quotes and comments (or is a `\` command), with
//! history in `$XDG_DATA_HOME/zarrow/history` (else `~/.local/share/zarrow/history`) and tab
//! completion of SQL keywords and the session's tables. What is typed runs through the same
//! [`Runner`] as one-shot SQL and files; a failing statement prints its error and the shell goes
//! on; Ctrl-C cancels the running statement, or clears the line at the prompt.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::keywords::ALL_KEYWORDS;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Config, Context, Editor, Helper};

use crate::sql::{tables, Flow, Runner, Source};

const PROMPT: &str = "zarrow> ";

/// Read, run and print until `\q` or end of input (Ctrl-D).
pub(crate) async fn run(runner: &mut Runner) -> Result<()> {
    let config = Config::builder().auto_add_history(false).build();
    let mut editor: Editor<ShellHelper, DefaultHistory> =
        Editor::with_config(config).context("cannot start the line editor")?;
    editor.set_helper(Some(ShellHelper {
        ctx: runner.context().clone(),
    }));
    let history = history_path();
    if let Some(path) = &history {
        // A first session has no history yet.
        let _ = editor.load_history(path);
    }
    eprintln!(
        "zarrow {}: SQL ending in ';', \\d lists the tables, \\? for help, \\q to quit",
        env!("CARGO_PKG_VERSION")
    );
    loop {
        match editor.readline(PROMPT) {
            Ok(text) => {
                if text.trim().is_empty() {
                    continue;
                }
                let _ = editor.add_history_entry(text.as_str());
                match runner.run_text(&text, &Source::Shell).await {
                    Ok(Flow::Quit) => break,
                    Ok(Flow::Continue) => {}
                    Err(e) => crate::report(&e),
                }
            }
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("cannot read the input"),
        }
    }
    if let Some(path) = &history {
        let saved = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(ReadlineError::from)
            .and_then(|()| editor.save_history(path));
        if let Err(e) = saved {
            eprintln!(
                "warning: cannot save the history to '{}': {e}",
                path.display()
            );
        }
    }
    Ok(())
}

/// `$XDG_DATA_HOME/zarrow/history`, else `$HOME/.local/share/zarrow/history`.
fn history_path() -> Option<PathBuf> {
    let non_empty = |v: &str| std::env::var_os(v).filter(|s| !s.is_empty());
    let data = non_empty("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("zarrow").join("history"))
}

/// Completion and multi-line input for the editor.
struct ShellHelper {
    ctx: SessionContext,
}

impl Completer for ShellHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(completions(&self.ctx, &line[..pos]))
    }
}

/// Where the word before the cursor starts, and what may finish it: the session's tables, and
/// SQL keywords in the case the word is typed in.
fn completions(ctx: &SessionContext, before: &str) -> (usize, Vec<String>) {
    let start = before
        .char_indices()
        .rev()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let word = &before[start..];
    if word.is_empty() {
        return (start, Vec::new());
    }
    let upper = word.to_uppercase();
    let mut out: Vec<String> = tables(ctx)
        .into_iter()
        .map(|t| t.shown)
        .filter(|t| t.to_uppercase().starts_with(&upper))
        .collect();
    let lower = word.chars().all(|c| !c.is_uppercase());
    out.extend(
        ALL_KEYWORDS
            .iter()
            .filter(|k| k.starts_with(upper.as_str()))
            .map(|k| {
                if lower {
                    k.to_lowercase()
                } else {
                    k.to_string()
                }
            }),
    );
    (start, out)
}

impl Validator for ShellHelper {
    fn validate(&self, ctx: &mut ValidationContext) -> rustyline::Result<ValidationResult> {
        Ok(if crate::statements::split(ctx.input()).is_complete() {
            ValidationResult::Valid(None)
        } else {
            ValidationResult::Incomplete
        })
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::completions;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn keywords_and_tables_complete() {
        let ctx = SessionContext::new();
        ctx.sql("CREATE TABLE observations AS SELECT 1 AS x")
            .await
            .unwrap();
        let (start, words) = completions(&ctx, "sel");
        assert_eq!(start, 0);
        assert!(words.contains(&"select".to_string()), "{words:?}");
        let (start, words) = completions(&ctx, "SELECT * FROM obs");
        assert_eq!(start, 14);
        assert_eq!(words, vec!["observations".to_string()]);
        let (_, words) = completions(&ctx, "SELECT * FROM ");
        assert!(words.is_empty());
    }
}
