//! Writing query results: where they go (stdout or a file) and in which text format.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use clap::ValueEnum;

/// `zarrow sql --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SqlFormat {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// One JSON array of row objects.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// A GitHub Markdown table (`|` in values written `\|`), to paste into an issue.
    Markdown,
}

impl SqlFormat {
    /// Rows are written as batches arrive (the table format waits for all of them, to size its
    /// columns).
    pub(crate) fn streams(self) -> bool {
        self != SqlFormat::Table
    }
}

/// A destination: standard output, a character device written in place (`/dev/null`,
/// `/dev/stderr`), or a file. A file is written to a temporary file beside it and renamed over
/// the path only by [`Sink::finish`]: a command that fails leaves the path as it was, whether it
/// existed or not.
pub(crate) struct Sink {
    writer: BufWriter<Target>,
}

/// Where a [`Sink`]'s bytes go.
enum Target {
    Stdout(std::io::Stdout),
    /// A character device, opened for writing without truncation and never removed.
    Device(File),
    /// The temporary file and the path it becomes.
    File(tempfile::NamedTempFile, PathBuf),
}

impl Write for Target {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Target::Stdout(w) => w.write(buf),
            Target::Device(w) => w.write(buf),
            Target::File(w, _) => w.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Target::Stdout(w) => w.flush(),
            Target::Device(w) => w.flush(),
            Target::File(w, _) => w.flush(),
        }
    }
}

impl Sink {
    /// `None` or `-` → standard output; a character device → written in place; else a file
    /// that replaces the path on success. Directories, block devices, FIFOs and sockets are
    /// refused, and so is a path inside one of the `inputs` (local zarr locations the command
    /// reads).
    pub(crate) fn open(path: Option<&Path>, inputs: &[&str]) -> Result<Sink> {
        let target = match path {
            None => Target::Stdout(std::io::stdout()),
            Some(p) if p.as_os_str() == "-" => Target::Stdout(std::io::stdout()),
            Some(p) => {
                refuse_inside_inputs(p, inputs)?;
                open_path(p)?
            }
        };
        Ok(Sink {
            writer: BufWriter::with_capacity(1 << 20, target),
        })
    }

    /// Flush and, for a file, put it in place of the path.
    pub(crate) fn finish(self) -> Result<()> {
        let target = self
            .writer
            .into_inner()
            .map_err(|e| e.into_error())
            .context("cannot write the output")?;
        match target {
            Target::Stdout(mut w) => w.flush().context("cannot write the output"),
            Target::Device(mut w) => w.flush().context("cannot write the output"),
            Target::File(tmp, dest) => {
                tmp.as_file()
                    .sync_all()
                    .with_context(|| format!("cannot write '{}'", dest.display()))?;
                tmp.persist(&dest)
                    .map_err(|e| e.error)
                    .with_context(|| format!("cannot write '{}'", dest.display()))?;
                Ok(())
            }
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

/// The target for an output path (see [`Sink::open`]).
fn open_path(p: &Path) -> Result<Target> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let shown = p.display();
    let existing = match std::fs::metadata(p) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot write '{shown}'")),
    };
    if let Some(m) = &existing {
        let kind = m.file_type();
        if kind.is_char_device() {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .with_context(|| format!("cannot write '{shown}'"))?;
            return Ok(Target::Device(file));
        }
        if !kind.is_file() {
            let what = if kind.is_dir() {
                "a directory"
            } else if kind.is_block_device() {
                "a block device"
            } else if kind.is_fifo() {
                "a FIFO"
            } else if kind.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            };
            bail!(
                "cannot write '{shown}': it is {what}; give a file path or '-' for standard output"
            );
        }
    }
    // A symbolic link is replaced through: the file it points to gets the new contents.
    let dest = if existing.is_some() {
        std::fs::canonicalize(p).with_context(|| format!("cannot write '{shown}'"))?
    } else {
        p.to_path_buf()
    };
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // New files get the usual 0666 less the umask; a replaced file keeps its permissions.
    let mode = existing
        .as_ref()
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o666);
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(mode))
        .tempfile_in(&dir)
        .with_context(|| format!("cannot create '{shown}'"))?;
    Ok(Target::File(tmp, dest))
}

/// Refuse an output path inside a local store the command reads: exporting into a store's own
/// chunk files would replace the data being read.
pub(crate) fn refuse_inside_inputs(output: &Path, inputs: &[&str]) -> Result<()> {
    let Some(out) = absolute_existing_prefix(output) else {
        return Ok(());
    };
    for input in inputs {
        if let Some(root) = local_store_root(input) {
            if out.starts_with(&root) {
                bail!(
                    "cannot write '{}': it is inside the store '{}' being read; write the \
                     output elsewhere",
                    output.display(),
                    root.display()
                );
            }
        }
    }
    Ok(())
}

/// The path with its longest existing ancestor canonicalized (symbolic links resolved), the
/// rest appended: where the output would really be written.
fn absolute_existing_prefix(path: &Path) -> Option<PathBuf> {
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        if let Ok(c) = std::fs::canonicalize(&cur) {
            return Some(rest.iter().rev().fold(c, |acc, part| acc.join(part)));
        }
        let name = cur.file_name()?.to_os_string();
        rest.push(name);
        cur = match cur.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
    }
}

/// The root directory of the local store a location names: the node's directory (or, for a
/// node inside an Icechunk repository, the nearest existing directory) and every enclosing
/// directory that is a zarr node (`zarr.json`, `.zgroup`, `.zarray`) or an Icechunk repository,
/// or is named `*.zarr` / `*.icechunk`. `None` for remote locations and paths that do not exist.
fn local_store_root(location: &str) -> Option<PathBuf> {
    let path = location
        .strip_prefix("icechunk+file://")
        .or_else(|| location.strip_prefix("file://"))
        .unwrap_or(location);
    if path.contains("://") {
        return None;
    }
    let mut dir = std::fs::canonicalize(path).ok().or_else(|| {
        // `repo.icechunk@v1/node`, or a node that lives only in an Icechunk snapshot
        Path::new(path)
            .ancestors()
            .skip(1)
            .find_map(|a| std::fs::canonicalize(a.to_str()?.split('@').next()?).ok())
    })?;
    if !dir.is_dir() {
        dir.pop();
    }
    let is_store = |d: &Path| {
        let named = d
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(".zarr") || n.ends_with(".icechunk"));
        named
            || ["zarr.json", ".zgroup", ".zarray"]
                .iter()
                .any(|f| d.join(f).is_file())
            || (d.join("snapshots").is_dir()
                && (d.join("repo").is_file() || d.join("refs").is_dir()))
    };
    let mut root = dir.clone();
    for d in dir.ancestors().skip(1) {
        if !is_store(d) {
            break;
        }
        root = d.to_path_buf();
    }
    Some(root)
}

/// Writes one statement's result in a text format, batch by batch (the table format keeps the
/// batches, to size its columns).
pub(crate) enum ResultWriter<'a, W: Write> {
    /// Batches kept for the pretty printer.
    Table(&'a mut W, SchemaRef, Vec<RecordBatch>),
    /// CSV with a header.
    Csv(Box<arrow::csv::Writer<&'a mut W>>, SchemaRef, bool),
    /// A JSON array.
    Json(arrow::json::Writer<&'a mut W, arrow::json::writer::JsonArray>),
    /// JSON lines.
    Ndjson(arrow::json::Writer<&'a mut W, arrow::json::writer::LineDelimited>),
    /// A Markdown table: its header until written, the rows written so far.
    Markdown(&'a mut W, Option<String>, usize),
}

impl<'a, W: Write> ResultWriter<'a, W> {
    /// Start a result of `schema` in `format`.
    pub(crate) fn new(format: SqlFormat, schema: SchemaRef, out: &'a mut W) -> Self {
        match format {
            SqlFormat::Table => ResultWriter::Table(out, schema, Vec::new()),
            SqlFormat::Csv => ResultWriter::Csv(
                Box::new(
                    arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .build(out),
                ),
                schema,
                false,
            ),
            SqlFormat::Json => ResultWriter::Json(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::JsonArray>(out),
            ),
            SqlFormat::Ndjson => ResultWriter::Ndjson(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(out),
            ),
            SqlFormat::Markdown => {
                let names: Vec<String> = schema
                    .fields()
                    .iter()
                    .map(|f| markdown_cell(f.name()))
                    .collect();
                let rule = vec!["---"; names.len()];
                let header = format!("| {} |\n|{}|", names.join(" | "), rule.join("|"));
                ResultWriter::Markdown(out, Some(header), 0)
            }
        }
    }

    /// Write (or keep) one batch.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            ResultWriter::Table(_, _, batches) => batches.push(batch.clone()),
            ResultWriter::Csv(w, _, wrote) => {
                w.write(batch).context("cannot write CSV")?;
                *wrote = true;
            }
            // arrow's JSON writer, like its table printer, writes unformattable values as text.
            ResultWriter::Json(w) => {
                check_displayable(std::slice::from_ref(batch))?;
                w.write(batch).context("cannot write JSON")?
            }
            ResultWriter::Ndjson(w) => {
                check_displayable(std::slice::from_ref(batch))?;
                w.write(batch).context("cannot write NDJSON")?
            }
            ResultWriter::Markdown(out, header, first_row) => {
                if let Some(header) = header.take() {
                    writeln!(out, "{header}")?;
                }
                let options = FormatOptions::default().with_null("");
                let schema = batch.schema();
                let formatters = batch
                    .columns()
                    .iter()
                    .zip(schema.fields())
                    .map(|(c, f)| {
                        ArrayFormatter::try_new(c.as_ref(), &options)
                            .with_context(|| format!("cannot format column '{}'", f.name()))
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mut line = String::new();
                for row in 0..batch.num_rows() {
                    line.clear();
                    line.push('|');
                    for (formatter, field) in formatters.iter().zip(schema.fields()) {
                        let value = cell(formatter, field.name(), row, *first_row)?;
                        line.push(' ');
                        line.push_str(&markdown_cell(&value));
                        line.push_str(" |");
                    }
                    writeln!(out, "{line}")?;
                }
                *first_row += batch.num_rows();
            }
        }
        Ok(())
    }

    /// End the result (the table is printed now; an empty CSV result still gets its header, an
    /// empty JSON result is `[]`).
    pub(crate) fn finish(self) -> Result<()> {
        match self {
            ResultWriter::Table(out, schema, batches) => {
                check_displayable(&batches)?;
                let table = if batches.iter().all(|b| b.num_rows() == 0) {
                    arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema)])
                } else {
                    arrow::util::pretty::pretty_format_batches(&batches)
                }
                .context("cannot format the result")?;
                writeln!(out, "{table}")?;
            }
            ResultWriter::Csv(mut w, schema, wrote) => {
                if !wrote {
                    w.write(&RecordBatch::new_empty(schema))
                        .context("cannot write CSV")?;
                }
            }
            ResultWriter::Json(mut w) => {
                w.finish().context("cannot write JSON")?;
                writeln!(w.get_mut())?;
            }
            ResultWriter::Ndjson(mut w) => w.finish().context("cannot write NDJSON")?,
            ResultWriter::Markdown(out, header, _) => {
                if let Some(header) = header {
                    writeln!(out, "{header}")?;
                }
            }
        }
        Ok(())
    }
}

/// Every cell of `batches` formats: arrow's table printer writes a value it cannot format
/// (a timestamp out of range, …) into the cell as `ERROR: …` text and succeeds; here that is
/// an error naming the column and row (counted from the first of `batches`), and the command
/// fails.
fn check_displayable(batches: &[RecordBatch]) -> Result<()> {
    let options = FormatOptions::default();
    let mut first_row = 0;
    for batch in batches {
        for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
            // Numbers, strings, bytes and booleans always format: only dates and times (and
            // what may hold them) are looked at, so ordinary results are not formatted twice.
            let dt = field.data_type();
            if !(dt.is_temporal()
                || dt.is_nested()
                || matches!(dt, arrow::datatypes::DataType::Dictionary(..)))
            {
                continue;
            }
            let formatter = ArrayFormatter::try_new(column.as_ref(), &options)
                .with_context(|| format!("cannot format column '{}'", field.name()))?;
            for row in 0..batch.num_rows() {
                cell(&formatter, field.name(), row, first_row)?;
            }
        }
        first_row += batch.num_rows();
    }
    Ok(())
}

/// Row `row` of a batch as text; an error names the column and the row of the result (the
/// batch's first row is row `first_row` of the result).
fn cell(
    formatter: &ArrayFormatter<'_>,
    column: &str,
    row: usize,
    first_row: usize,
) -> Result<String> {
    formatter
        .value(row)
        .try_to_string()
        .with_context(|| format!("cannot format column '{column}' at row {}", first_row + row))
}

/// Text for a Markdown table cell: `|` escaped, line breaks as `<br>`.
fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace("\r\n", "<br>")
        .replace(['\n', '\r'], "<br>")
}

/// Progress on stderr (`N rows`), only when stderr is a terminal, at most 5 times a second, and
/// not before `delay` has passed.
pub(crate) struct Progress {
    enabled: bool,
    rows: u64,
    started: Instant,
    delay: Duration,
    last: Instant,
    label: &'static str,
    /// Something was drawn.
    drawn: bool,
}

impl Progress {
    /// Progress for `label` ("exported", …).
    pub(crate) fn new(label: &'static str) -> Self {
        Self::after(label, Duration::ZERO)
    }

    /// Progress for `label` that shows only once `delay` has passed (a long scan).
    pub(crate) fn after(label: &'static str, delay: Duration) -> Self {
        let now = Instant::now();
        Progress {
            enabled: std::io::stderr().is_terminal(),
            rows: 0,
            started: now,
            delay,
            last: now,
            label,
            drawn: false,
        }
    }

    /// Count rows; redraw if due.
    pub(crate) fn add(&mut self, rows: usize) {
        self.set(self.rows + rows as u64, "");
    }

    /// The rows so far, and what to say after them (`, 3/40 chunks`); redraw if due.
    pub(crate) fn set(&mut self, rows: u64, detail: &str) {
        self.rows = rows;
        if self.enabled
            && self.started.elapsed() >= self.delay
            && self.last.elapsed() >= Duration::from_millis(200)
        {
            self.last = Instant::now();
            self.drawn = true;
            eprint!("\r{} {} rows{detail}\x1b[K", self.label, self.rows);
        }
    }

    /// The final count and where the rows went, with a newline (the line stays).
    pub(crate) fn finish(&mut self, to: &str) {
        if self.enabled {
            eprintln!("\r{} {} rows to {to}", self.label, self.rows);
        }
        self.drawn = false;
    }
}

/// A progress line not finished is erased: what is printed next (a result, an error, the
/// prompt after a cancelled statement) starts on a clean line.
impl Drop for Progress {
    fn drop(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[K");
        }
    }
}
